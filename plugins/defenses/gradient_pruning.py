"""Gradient pruning: each user zeroes the smallest-magnitude entries of its update before sending it.

"Deep Leakage from Gradients" (Zhu, Liu & Han, NeurIPS 2019, section 5, Figure 7) found
pruning the strongest of the defenses it tried: DLG's reconstructions survive up to about
20 % of the entries pruned and fail beyond. Top-k sparsification is also where DPHE's
sparse updates come from on deep models. ``prune`` is the fraction of entries set to zero,
chosen per user by magnitude over the whole update (ties broken by position); the
aggregator sees every pruned update in plaintext.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
from pydantic import Field

from vispriv.harness import CellContext, Defense, PluginConfig, Protected, UtilityOnly
from vispriv.plugins.federated.deep.outcome import deep_plaintext_protected
from vispriv.plugins.federated.deep.payloads import DeepFederatedData, DeepPlaintextUpdates


class GradientPruningConfig(PluginConfig):
    prune: float = Field(0.9, ge=0, lt=1, description="fraction of each update's entries set to zero (smallest |value| first)")
    rounds: Annotated[int, UtilityOnly] = Field(
        10, ge=1, le=10_000, description="federated rounds run to measure the test accuracy (the attacks see round 0)"
    )


def pruned_count(fraction: float, size: int) -> int:
    """``floor(fraction * size)``, the product rounded to 9 decimals first: 0.29 of 100 entries is 29
    (the binary float 0.29 x 100 is 28.999999999999996, which a bare floor makes 28)."""
    return int(np.floor(round(fraction * size, 9)))


def prune_smallest(update: np.ndarray, fraction: float) -> np.ndarray:
    """``update`` with the :func:`pruned_count` smallest-magnitude entries set to zero (ties: the first
    in position first)."""
    k = pruned_count(fraction, update.size)
    if k <= 0:
        return update.copy()
    out = update.copy()
    order = np.argsort(np.abs(update), kind="stable")
    out[order[:k]] = 0.0
    return out


class GradientPruning(Defense):
    """Users send only the largest-magnitude (1 - prune) share of their deep-model update."""

    name = "gradient-pruning"
    version = "1.0"
    scenario = "federated-learning"
    headline = ("test_accuracy", "ami")
    Config = GradientPruningConfig
    consumes = (DeepFederatedData,)
    produces = (DeepPlaintextUpdates,)

    def protect(self, private: DeepFederatedData, public: object, ctx: CellContext) -> Protected:
        cfg: GradientPruningConfig = self.config
        return deep_plaintext_protected(
            private, public, cfg.rounds, ctx,
            protect=lambda _n, update, _rng: prune_smallest(update, cfg.prune), protocol_extra={"prune": cfg.prune},
        )
