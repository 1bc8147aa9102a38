"""``federated-deep-imprint``: the deep federated scene with a malicious server that sends an imprinted model.

The model a server sends is part of the scene every defense computes its release from (the
public ``DeepFederatedPublic``), so the imprint block of "Robbing the Fed" (Fowl et al.,
ICLR 2022, section 3) is placed here, in the dataset stage: the scene of ``federated-deep``
(same sources, users, protocol and pre-training) whose global model is then wrapped in an
imprint block (:mod:`vispriv.plugins.federated.deep.imprint`) with bins placed by the public
images. Every deep defense (``none``, ``gradient-pruning``, ``dp-sgd``, ``dphe``) then computes
the users' updates through the malicious model unchanged, and the ``imprint`` attack reads the
block's rows from the release and the public model. No defense's secret is involved: the block
is public (it is the model everybody receives), and the defenses do not know it is malicious,
as a client that does not inspect the model it is sent would not.

A separate dataset plugin rather than new ``federated-deep`` settings, so that the cells (and
``--resume`` hashes) of every existing ``federated-deep`` config stay as they are.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from pydantic import Field

from vispriv.harness import CellContext, Scene
from vispriv.plugins.federated.deep.dataset import DeepFederatedConfig, DeepFederatedImages
from vispriv.plugins.federated.deep.payloads import DeepFederatedPublic, state_of, to_tensor


class ImprintedDeepFederatedConfig(DeepFederatedConfig):
    imprint_bins: int = Field(128, ge=2, le=4096, description="k: rows (bins) of the imprint block")
    imprint_statistic: Literal["brightness", "random"] = Field(
        "random", description="h(x) every row measures: the mean pixel value, or one fixed random projection",
    )
    imprint_gain: float = Field(
        1.0, gt=0, le=1e6, description="the block adds gain/k * sum of its rows to the image: larger gives its rows "
        "a larger share of the update (the readout does not depend on it)",
    )


class ImprintedDeepFederatedImages(DeepFederatedImages):
    """``federated-deep``'s scene, the global model behind an imprint block (a malicious server, Fowl et al., ICLR 2022)."""

    name = "federated-deep-imprint"
    version = "1.0"
    Config = ImprintedDeepFederatedConfig

    def load(self, ctx: CellContext) -> Scene:
        from vispriv.plugins.federated.deep.imprint import imprint_model

        cfg: ImprintedDeepFederatedConfig = self.config
        scene = super().load(ctx)
        public = scene.public
        assert isinstance(public, DeepFederatedPublic)
        model = imprint_model(public.model(), to_tensor(public.public_images), cfg.imprint_bins,
                              cfg.imprint_statistic, ctx.child_seed("imprint-statistic"), cfg.imprint_gain)
        imprint = {"bins": cfg.imprint_bins, "statistic": cfg.imprint_statistic, "gain": cfg.imprint_gain}
        return Scene(private=scene.private, public=replace(public, state=state_of(model), imprint=imprint))
