"""Gradient pruning: each user zeroes the smallest-magnitude entries of its update before sending it.

"Deep Leakage from Gradients" (Zhu, Liu & Han, NeurIPS 2019, section 5, Figure 7) found
pruning the strongest of the defenses it tried: DLG's reconstructions survive up to about
20 % of the entries pruned and fail beyond. Top-k sparsification is also where DPHE's
sparse updates come from on deep models. ``prune`` is the fraction of entries set to zero,
chosen per user by magnitude (ties broken by position); the aggregator sees every pruned
update in plaintext.

``scope`` says over what the fraction is counted, a choice the paper leaves open:

* ``update`` (default): one threshold over the whole flattened update. The layers then keep
  very different shares: on DLG's LeNet with a 100-output head (CIFAR-100) the head holds 90 %
  of the entries, mostly near zero, so 90 % pruning removes mostly head entries and leaves most
  convolution gradients in place -- which a pruning-aware attacker inverts (docs: adaptive).
* ``layer``: the fraction is removed from every parameter tensor separately, as the gradient
  pruning of GradAttack ("Evaluating Gradient Inversion Attacks and Defenses in Federated
  Learning", Huang et al., NeurIPS 2021) prunes each parameter's gradient by its own percentile.
"""

from __future__ import annotations

import itertools
from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from vispriv.harness import CellContext, Defense, PluginConfig, Protected, UtilityOnly
from vispriv.plugins.federated.deep.outcome import deep_plaintext_protected
from vispriv.plugins.federated.deep.payloads import DeepFederatedData, DeepPlaintextUpdates, require_deep_public


class GradientPruningConfig(PluginConfig):
    prune: float = Field(0.9, ge=0, lt=1, description="fraction of each update's entries set to zero (smallest |value| first)")
    scope: Literal["update", "layer"] = Field(
        "update", description="update: one magnitude threshold over the whole update; layer: the fraction pruned "
        "from every parameter tensor separately (GradAttack's per-layer pruning)",
    )
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


def prune_per_layer(update: np.ndarray, fraction: float, sizes: list[int]) -> np.ndarray:
    """:func:`prune_smallest` applied to each consecutive block of ``sizes`` entries (one parameter
    tensor each, in the model's order) on its own."""
    if sum(sizes) != update.size:
        raise ValueError(f"the layer sizes add up to {sum(sizes)} entries but the update has {update.size}")
    bounds = np.cumsum([0, *sizes])
    return np.concatenate([prune_smallest(update[a:b], fraction) for a, b in itertools.pairwise(bounds)])


class GradientPruning(Defense):
    """Users send only the largest-magnitude (1 - prune) share of their deep-model update."""

    name = "gradient-pruning"
    version = "1.1"
    scenario = "federated-learning"
    headline = ("test_accuracy", "ami")
    Config = GradientPruningConfig
    consumes = (DeepFederatedData,)
    produces = (DeepPlaintextUpdates,)

    def protect(self, private: DeepFederatedData, public: object, ctx: CellContext) -> Protected:
        cfg: GradientPruningConfig = self.config

        def protect(_n: int, update: np.ndarray, _rng: np.random.Generator) -> np.ndarray:
            return prune_smallest(update, cfg.prune)

        if cfg.scope == "layer":
            from vispriv.plugins.federated.deep.local import trainable  # torch: imported where it is used

            sizes = [p.numel() for p in trainable(require_deep_public(public).model()).values()]

            def protect(_n: int, update: np.ndarray, _rng: np.random.Generator) -> np.ndarray:
                return prune_per_layer(update, cfg.prune, sizes)

        return deep_plaintext_protected(
            private, public, cfg.rounds, ctx, protect=protect, protocol_extra={"prune": cfg.prune, "prune_scope": cfg.scope},
        )
