"""Centroid leakage: a user's mini-batch read off its k-means centroids (DPHE (ICCV 2017) supplement A.3).

The clustering counterpart of ``gradient-leakage`` (whose eq. (12) inversion does not apply to
centroids). A user's step moves each centroid c it assigned points to towards their mean:
c' = soft(c + eta_c (mean(B_c) - c), eta_c lam) with eta_c = m_c / (v_c + m_c)
(:mod:`vispriv.plugins.federated.clustering.kmeans`). The attacker does not know the user's private counts
v_c, so it guesses eta_c = 1 -- exact on the first batch a user assigns to a centroid, where
c' = soft(mean(B_c), lam) -- and takes the mean of the moved centroids as its estimate of
the user's batch (the truth: the mean of the samples the user's update used).

* plaintext centroids (``none``): per (round, user), the centroids that user moved;
* DPHE: the ciphertexts open to nobody and the indices are doubly permuted, so it works on the
  published average C̄_{t+1} against C̄_t instead: one estimate, the same for every user of the round.

A round where nothing moved gets the public mean image (the no-leak baseline). Estimates map
back to pixels through the public standardisation, as ``gradient-leakage``'s do.
"""

from __future__ import annotations

import numpy as np

from vispriv.harness import Attack, AttackResult, CellContext, Images
from vispriv.harness.errors import InputError
from vispriv.plugins.federated.clustering.payloads import ClusteringRelease, PlainCentroidUpdates
from vispriv.plugins.federated.payloads import FederatedPublic, require_public


def moved_mean(before: np.ndarray, after: np.ndarray) -> np.ndarray | None:
    """Mean of the rows of ``after`` (K, D) that differ from ``before``; None when none moved."""
    moved = np.any(after != before, axis=1)
    return after[moved].mean(axis=0) if moved.any() else None


class CentroidLeakage(Attack):
    """Estimates each user's mini-batch from the centroids it moved (or from the published average)."""

    name = "centroid-leakage"
    version = "1.0"
    scenario = "federated-learning"
    consumes = (ClusteringRelease,)
    produces = (Images,)

    def attack(self, release: ClusteringRelease, public: FederatedPublic | None, ctx: CellContext) -> AttackResult:
        if not isinstance(release, ClusteringRelease):
            raise InputError(f"centroid-leakage needs a ClusteringRelease; got {type(release).__name__}")
        public = require_public(public)
        per_user = isinstance(release, PlainCentroidUpdates)
        feats, ids = [], []
        for t in range(release.n_rounds):
            before = release.centroids[t]
            shared = None if per_user else moved_mean(before, release.centroids[t + 1])
            for n in range(release.n_users):
                feats.append(moved_mean(before, release.updates[t, n]) if per_user else shared)
                ids.append(release.target_ids[t][n])
        inverted = sum(x is not None for x in feats)
        mean_feature = public.init_features.mean(axis=0)
        images = public.to_pixels(np.stack([mean_feature if x is None else x for x in feats]))
        metrics = {"estimates": float(len(ids)), "inverted_fraction": inverted / max(1, len(ids)),
                   "per_user_view": float(per_user)}
        return AttackResult(
            estimate={"images": Images(images, ids)}, metrics=metrics, metric_directions=dict.fromkeys(metrics, True)
        )
