"""The imprint attack: a model-changing server reads single images out of (aggregated) updates.

"Robbing the Fed: Directly Obtaining Private Data in Federated Learning with Modified Models"
(Fowl, Geiping, Czaja, Goldblum & Goldstein, ICLR 2022, section 3); the trap weights of "When
the Curious Abandon Honesty: Federated Learning Is Not Private" (Boenisch, Dziedzic, Schuster,
Shamsabadi, Shumailov & Papernot, IEEE EuroS&P 2023) are the same idea with random rows.

Threat model. The server chooses the model it sends, so it is *not* honest-but-curious: it
prepends an imprint block (k rows measuring one statistic h(x), staggered biases, ReLU). Where
the block lives: in the scene, not in this attack. The dataset ``federated-deep-imprint``
(:mod:`vispriv.plugins.federated.deep.imprint_dataset`) publishes the imprinted global model
as the public ``DeepFederatedPublic``; every deep defense computes its release from that
model unchanged; this attack reads the release and the public model only. So the core imports
no plugin, and no secret of a defense (keys, permutations, noise draws) reaches the attack.

Reading. For each view of the release (every user's update in plaintext; DPHE's published
average of N users, where the aggregator decrypts only the sum; an insider's average of the
others), the block's rows are sorted by threshold and neighbouring rows subtracted
(:func:`vispriv.plugins.federated.deep.imprint.read_bins`): a bin holding exactly one image
gives it back exactly, (dW_i - dW_{i+1}) / (db_i - db_{i+1}); a bin holding several gives
their mixture. The attacker cannot tell one from several, so it returns the bins with the
largest |db_i - db_{i+1}| (up to the number of image slots behind the view) and fills the
remaining slots with the public mean image; the core matches estimates to images within a
view's set by the best assignment (vispriv.harness.alignment).
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from vispriv.harness import Attack, AttackResult, CellContext, Images, PluginConfig
from vispriv.harness.errors import InputError
from vispriv.plugins.federated.deep.payloads import DeepRelease, require_deep_public, unflatten
from vispriv.plugins.federated.deep.views import adversary_views


class ImprintConfig(PluginConfig):
    relative_tol: float = Field(
        1e-6, gt=0, lt=1,
        description="a bin counts as occupied when |db_i - db_(i+1)| exceeds this share of the largest one",
    )


class Imprint(Attack):
    """Fowl et al. (ICLR 2022): images read off an imprint block's neighbouring rows, through any aggregate."""

    name = "imprint"
    version = "1.0"
    scenario = "federated-learning"
    Config = ImprintConfig
    consumes = (DeepRelease,)
    produces = (Images,)

    def attack(self, release: DeepRelease, public: object, ctx: CellContext) -> AttackResult:
        from vispriv.plugins.federated.deep.imprint import find_block, read_bins
        from vispriv.plugins.federated.deep.local import trainable

        cfg: ImprintConfig = self.config
        if not isinstance(release, DeepRelease):
            raise InputError(f"{self.name} needs a deep-model release (DeepRelease); got {type(release).__name__}")
        deep_public = require_deep_public(public)
        model = deep_public.model()
        block = find_block(model)
        if block is None:
            raise InputError(
                f"{self.name}: the global model has no imprint block, so there is nothing to read; "
                "the server must send one (dataset federated-deep-imprint)"
            )
        params = list(trainable(model).values())
        rows = [i for i, p in enumerate(params) if p is block.measure.weight or p is block.measure.bias]
        if len(rows) != 2:
            raise InputError(f"{self.name}: the imprint block's weights are not trainable, so no update carries them")
        biases = block.measure.bias.detach().double().numpy()
        c, h, w = deep_public.image_shape
        mean = deep_public.mean_image() if len(deep_public.public_images) else np.full((h, w, c), 0.5, np.float32)
        views, insider = adversary_views(release, self.name)
        images, ids, sets, occupied = [], [], [], []
        for view in views:
            update = unflatten(view.vector, model)
            readout = read_bins(update[rows[0]].double().numpy(), update[rows[1]].double().numpy(), biases)
            found, _bins = readout.images(len(view.ids), cfg.relative_tol)
            occupied.append(len(found))
            found = found.reshape(-1, c, h, w).transpose(0, 2, 3, 1)
            filler = np.repeat(mean[None], len(view.ids) - len(found), axis=0)
            images.append(np.clip(np.concatenate([found, filler]), 0.0, 1.0).astype(np.float32))
            ids += view.ids
            sets += [view.set_name] * len(view.ids)
        metrics = {
            "bins": float(block.bins),
            "views": float(len(views)),
            "images_per_view": float(np.mean([len(v.ids) for v in views])),
            "bins_read_share": float(sum(occupied) / max(1, len(ids))),
            "insider_view": float(insider),
        }
        return AttackResult(
            estimate={"images": Images(np.concatenate(images), ids, sets=sets)},
            metrics=metrics,
            metric_directions=dict.fromkeys(metrics, True),
        )
