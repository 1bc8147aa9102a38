"""What an attacker who knows the defense matches (the adaptive attacks' knowledge).

A defense is judged against an attacker who knows it ("On Evaluating Adversarial
Robustness", Carlini et al., 2019; "On Adaptive Attacks to Adversarial Example Defenses",
Tramèr et al., NeurIPS 2020; for gradient inversion "Evaluating Gradient Inversion Attacks
and Defenses in Federated Learning", Huang et al., NeurIPS 2021, section 5, whose attacks
know the defense's public settings). Every release carries the defense's public protocol;
from it and from the update itself the attacker knows:

* **Pruning** (``prune`` in the protocol, "Deep Leakage from Gradients", Zhu et al.,
  NeurIPS 2019, section 5): which entries were sent. The aggregator receives every pruned
  update and sees its zeros, so the entries the user sent are the nonzero ones (an entry that
  was exactly zero before pruning is indistinguishable from a pruned one and is left out too,
  losing nothing). The distance is computed over the sent entries only; matching the zeros
  would fit the pruning, not the image.
* **DP-SGD** (``max_grad_norm`` in the protocol, Abadi et al., CCS 2016, Algorithm 1): the
  clipping norm C. The attacker simulates the user's update with the same per-example
  clipping to C in every local step (for B = 1, FedSGD: the simulated gradient rescaled by
  min(1, C / ||g||)); only the Gaussian noise, whose draw it does not know, remains between
  its simulation and the update.
* **Update clipping** (``update_clip_norm`` in the protocol: Flower's client-side fixed
  clipping, "Differentially Private Federated Learning: A Client Level Perspective", Geyer et
  al., 2017, which clips each client's whole update w_E - w to norm C): the attacker simulates
  the plain update and rescales it by min(1, C / ||Δ||), in the units of the attacked update
  (a FedSGD gradient is (w - w_E) / lr, so its norm is clipped to C / lr).

Nothing private enters: no noise draw, no key. :func:`averaged_noise_std` is the analytic
gain of an attacker who sees the same user's same clipped gradient in R rounds (the release
holds round 0 only, so no attack here averages rounds; see its docstring).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from vispriv.plugins.federated.deep.local import (
    Differentiate,
    LocalWork,
    apply_local_work,
    autograd_gradient,
    call_with,
    cross_entropy,
    simulate_update,
)

#: ``auto``: use what the release's protocol says about the defense; ``none``: match the whole
#: update as received, as the papers' attacks do.
Adapt = Literal["auto", "none"]


@dataclass(frozen=True)
class DefenseKnowledge:
    """The public facts about the defense that one inversion uses.

    ``sent``: one boolean tensor per parameter, True where the user's entry was sent (None:
    every entry is matched); ``clip``: DP-SGD's per-example clipping norm C (None: no clipping
    is simulated); ``update_clip``: the norm the whole simulated update is clipped to, in the
    attacked update's units (None: not clipped).
    """

    sent: list[torch.Tensor] | None = None
    clip: float | None = None
    update_clip: float | None = None

    @property
    def adaptive(self) -> bool:
        return self.sent is not None or self.clip is not None or self.update_clip is not None

    def matched_share(self) -> float:
        """The share of the update's entries the distance is computed over."""
        if self.sent is None:
            return 1.0
        total = sum(m.numel() for m in self.sent)
        return float(sum(int(m.sum()) for m in self.sent)) / max(1, total)

    def to(self, device: str) -> DefenseKnowledge:
        sent = None if self.sent is None else [m.to(device) for m in self.sent]
        return DefenseKnowledge(sent, self.clip, self.update_clip)


def defense_knowledge(protocol: dict[str, Any], update: list[torch.Tensor], adapt: Adapt = "auto") -> DefenseKnowledge:
    """What the attacker of ``update`` knows under ``protocol`` (nothing when ``adapt`` is "none").

    A pruned update (``prune`` > 0) is matched on its nonzero entries; a DP-SGD update
    (``max_grad_norm``) is simulated with per-example clipping to that C; an update clipped as a
    whole (``update_clip_norm`` C, in weight units) is simulated clipped to C, or to C / lr
    where the attacked update is a FedSGD gradient (``mode`` fedsgd).
    """
    if adapt == "none":
        return DefenseKnowledge()
    sent = [u != 0 for u in update] if float(protocol.get("prune", 0.0) or 0.0) > 0 else None
    clip = protocol.get("max_grad_norm")
    update_clip = protocol.get("update_clip_norm")
    if update_clip is not None and protocol.get("mode") == "fedsgd":
        update_clip = float(update_clip) / float(protocol["lr"])
    return DefenseKnowledge(sent, None if clip is None else float(clip),
                            None if update_clip is None else float(update_clip))


def clip_to_norm(tensors: list[torch.Tensor], clip: float) -> list[torch.Tensor]:
    """``tensors`` scaled by min(1, C / ||tensors||), the norm over all of them together (differentiable)."""
    norm = torch.sqrt(sum((t**2).sum() for t in tensors))  # type: ignore[arg-type]
    factor = (clip / (norm + 1e-12)).clamp(max=1.0)
    return [t * factor for t in tensors]


def clipped_mean_gradient(
    model: nn.Module,
    params: dict[str, torch.Tensor],
    images: torch.Tensor,
    labels: torch.Tensor,
    clip: float,
    create_graph: bool = False,
    differentiate: Differentiate | None = None,
    buffers: dict[str, torch.Tensor] | None = None,
) -> list[torch.Tensor]:
    """Abadi et al. Algorithm 1 without the noise: (1/B) sum_i g_i min(1, C / ||g_i||).

    The per-example gradients are taken one example at a time (B is small in an inversion) so
    that the attacker can differentiate through them; each example runs its own forward pass,
    as the defense's ``vmap`` does, so BatchNorm in batch mode sees the same one-image batches.
    ``labels`` are integer (B,) or a distribution (B, C); ``differentiate`` and ``buffers`` as
    in :func:`~vispriv.plugins.federated.deep.local.simulate_update`.
    """
    differentiate = differentiate or autograd_gradient(create_graph)
    buffers = {k: b.clone() for k, b in model.named_buffers()} if buffers is None else buffers
    total: list[torch.Tensor] | None = None
    for i in range(len(images)):
        x, y = images[i : i + 1], labels[i : i + 1]
        grads = differentiate(
            lambda p, b, x=x, y=y: cross_entropy(call_with(model, {**p, **b}, (x,)), y), params, buffers
        )
        scaled = clip_to_norm(grads, clip)
        total = scaled if total is None else [t + s for t, s in zip(total, scaled)]
    assert total is not None
    return [t / len(images) for t in total]


def simulate_known_update(
    model: nn.Module,
    params: dict[str, torch.Tensor],
    images: torch.Tensor,
    labels: torch.Tensor,
    work: LocalWork,
    knowledge: DefenseKnowledge,
    create_graph: bool = False,
    differentiate: Differentiate | None = None,
    buffers: dict[str, torch.Tensor] | None = None,
) -> list[torch.Tensor]:
    """The update the attacker expects from ``images``/``labels``: the plain one, or DP-SGD's
    clipped one (clipping in every local step, as the defense does, without its noise); then,
    where the defense clips whole updates, rescaled by min(1, C / ||update||).
    ``differentiate`` and ``buffers`` as in :func:`~vispriv.plugins.federated.deep.local.simulate_update`."""
    if knowledge.clip is None:
        update = simulate_update(model, params, images, labels, work, create_graph, differentiate, buffers)
    else:
        clip = knowledge.clip
        update = apply_local_work(
            params,
            lambda current: clipped_mean_gradient(model, current, images, labels, clip, create_graph, differentiate, buffers),
            work,
        )
    return update if knowledge.update_clip is None else clip_to_norm(update, knowledge.update_clip)


def averaged_noise_std(noise_multiplier: float, clip: float, batch_size: int, rounds: int = 1) -> float:
    """Per-entry noise std left after averaging ``rounds`` DP-SGD releases of the same clipped mean gradient.

    One FedSGD DP-SGD gradient carries N(0, (sigma C / B)^2) noise per entry (Algorithm 1 divides
    the noisy sum by B). If the same user sends the gradient of the same batch at the same
    weights in R rounds with independent draws, their mean has std sigma C / (B sqrt(R)): the
    attacker facing R rounds faces sigma / sqrt(R). An upper bound on the gain: in a real run
    the global weights move between rounds, so the R gradients differ and are not simply
    averaged. The releases here hold round 0 only, so no attack averages rounds; this helper
    states what the noise is worth against an attacker who could.
    """
    if rounds < 1 or batch_size < 1:
        raise ValueError(f"rounds and batch_size must be >= 1; got {rounds}, {batch_size}")
    return noise_multiplier * clip / (batch_size * math.sqrt(rounds))
