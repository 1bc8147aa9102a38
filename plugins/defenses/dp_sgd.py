"""DP-SGD on the users' devices: per-example clipping and Gaussian noise in every local step.

"Deep Learning with Differential Privacy" (Abadi et al., CCS 2016, Algorithm 1): each local
step computes every example's gradient, clips it to L2 norm ``max_grad_norm`` (C), sums,
adds Gaussian noise N(0, sigma^2 C^2 I) and divides by the batch size B. FedSGD sends that
noisy gradient; FedAvg takes E such steps and sends the weight difference. Per-example
gradients come from ``torch.func`` (``vmap`` over ``grad``), which handles every model here,
BatchNorm in eval mode included (Opacus' own hooks refuse BatchNorm).

Privacy accounting uses Opacus' RDP accountant (Mironov, CSF 2017) over rounds x local
steps compositions of the Gaussian mechanism at sampling rate 1: a user's batches are taken
in a fixed order from its data, not Poisson-sampled, so no amplification by subsampling is
claimed. ``epsilon`` is reported at ``delta`` for one user's whole participation (example-level
DP with respect to that user's data).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Annotated

import numpy as np
from pydantic import Field

from vispriv.harness import CellContext, Defense, PluginConfig, Protected, UtilityOnly
from vispriv.plugins.federated.deep.outcome import deep_plaintext_protected
from vispriv.plugins.federated.deep.payloads import DeepFederatedData, DeepPlaintextUpdates, require_deep_public

if TYPE_CHECKING:  # torch is imported where it is used, so listing plugins stays light
    import torch
    from torch import nn

    from vispriv.plugins.federated.deep.local import LocalWork


class DpSgdConfig(PluginConfig):
    noise_multiplier: float = Field(1.0, ge=0, description="sigma: noise std in units of the clipping norm")
    max_grad_norm: float = Field(1.0, gt=0, description="C: per-example gradient clipping norm")
    delta: Annotated[float, UtilityOnly] = Field(1e-5, gt=0, lt=1, description="delta at which epsilon is reported")
    rounds: Annotated[int, UtilityOnly] = Field(
        10, ge=1, le=10_000, description="federated rounds run to measure the test accuracy and epsilon (the attacks see round 0)"
    )


def private_gradient(model: nn.Module, params: dict[str, torch.Tensor], images: torch.Tensor, labels: torch.Tensor,
                     clip: float, sigma: float, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Abadi et al. Algorithm 1, one step: clip every example's gradient to ``clip``, sum, add noise, divide by B."""
    import torch
    from torch.func import functional_call, grad, vmap

    from vispriv.plugins.federated.deep.local import cross_entropy
    buffers = {k: b.clone() for k, b in model.named_buffers()}

    def loss_of(p: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return cross_entropy(functional_call(model, {**p, **buffers}, (x[None],)), y[None])

    per_example = vmap(grad(loss_of), in_dims=(None, 0, 0))(params, images, labels)
    norms = torch.sqrt(sum((g.reshape(len(images), -1) ** 2).sum(dim=1) for g in per_example.values()))
    factor = (clip / (norms + 1e-12)).clamp(max=1.0)
    out = {}
    for k, g in per_example.items():
        summed = (g * factor.view(-1, *([1] * (g.ndim - 1)))).sum(dim=0)
        noise = torch.randn(summed.shape, generator=generator) * sigma * clip
        out[k] = (summed + noise) / len(images)
    return out


def dp_epsilon(sigma: float, compositions: int, delta: float) -> float:
    """epsilon of ``compositions`` Gaussian mechanisms at noise multiplier ``sigma`` (Opacus' RDP accountant).

    An upper bound; at small sigma the accountant's smallest RDP order is the optimum and it
    warns that the bound could be tighter (silenced: an epsilon in the hundreds means no
    meaningful guarantee either way).
    """
    if sigma <= 0:
        return float("inf")
    from opacus.accountants import RDPAccountant

    accountant = RDPAccountant()
    accountant.history = [(sigma, 1.0, compositions)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(accountant.get_epsilon(delta))


class DpSgd(Defense):
    """Users run DP-SGD locally (per-example clipping + Gaussian noise); the aggregator sees the noisy updates."""

    name = "dp-sgd"
    version = "1.0"
    scenario = "federated-learning"
    headline = ("test_accuracy", "ami")
    Config = DpSgdConfig
    consumes = (DeepFederatedData,)
    produces = (DeepPlaintextUpdates,)

    def protect(self, private: DeepFederatedData, public: object, ctx: CellContext) -> Protected:
        import torch

        from vispriv.plugins.federated.deep.local import apply_local_work, trainable

        cfg: DpSgdConfig = self.config
        generator = torch.Generator().manual_seed(ctx.child_seed("dp-sgd-noise") % (2**63))

        def local(model: nn.Module, x: torch.Tensor, y: torch.Tensor, work: LocalWork, _user: int,
                  _rng: np.random.Generator) -> list[torch.Tensor]:
            work.set_mode(model)
            params = {k: p.detach() for k, p in trainable(model).items()}

            def noisy(current: dict[str, torch.Tensor]) -> list[torch.Tensor]:
                g = private_gradient(model, current, x, y, cfg.max_grad_norm, cfg.noise_multiplier, generator)
                return [g[k] for k in current]

            return apply_local_work(params, noisy, work)

        work = require_deep_public(public).local_work()
        steps = cfg.rounds * (work.steps if work.mode == "fedavg" else 1)
        epsilon = dp_epsilon(cfg.noise_multiplier, steps, cfg.delta)
        return deep_plaintext_protected(
            private, public, cfg.rounds, ctx, local=local,
            protocol_extra={"noise_multiplier": cfg.noise_multiplier, "max_grad_norm": cfg.max_grad_norm},
            utility={"epsilon": epsilon}, directions={"epsilon": False},
        )
