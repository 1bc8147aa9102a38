"""Mini-batch k-means with sparse centroids, one user's local step (DPHE (ICCV 2017) supplement A.3).

The supplement's clustering (Table 6): the aggregator seeds K centroids by k-means++
(Arthur & Vassilvitskii 2007) and shares them; each user updates them locally by
mini-batch k-means (Sculley 2010, "Web-Scale K-Means Clustering") with an L1 penalty that
makes the centroids sparse (Jumutc, Langone & Suykens 2015, "Regularized and Sparse
Stochastic K-Means"; the paper tunes it to > 90 % sparsity), and the centroids are averaged
like the classifiers of section 2.1 (:mod:`vispriv.plugins.federated.clustering.rounds`).

One local step on a mini-batch B follows Sculley's Algorithm 1: every x in B is assigned
to its nearest centroid first (the cache d[x]), then per point in order v_c += 1,
eta = 1 / v_c, c <- (1 - eta) c + eta x, with per-centroid counts v. With eta = 1 / v_c
that pass is a running mean, so for the m_c points B_c of centroid c it equals

    eta_c = m_c / (v_c + m_c),   u = c + eta_c (mean(B_c) - c)             (Sculley 2010)
    c'    = sign(u) * max(|u| - eta_c * lam, 0)                            (L1 proximal step)

the proximal stochastic-gradient step on 1/2 ||x - c||^2 + lam |c|_1 with the per-centroid
rate eta_c. ``lam = 0`` is plain mini-batch k-means; a centroid with no point in B does not
move. A coordinate that is 0 stays 0 unless |mean(B_c)| exceeds lam there, so lam sets the
sparsity in the units of the (standardised) features.
"""

from __future__ import annotations

import numpy as np

from vispriv.harness.errors import InputError


def soft_threshold(u: np.ndarray, threshold: np.ndarray | float) -> np.ndarray:
    """sign(u) max(|u| - threshold, 0): the proximal map of threshold * |.|_1."""
    return np.sign(u) * np.maximum(np.abs(u) - threshold, 0.0)


def seed_centroids(x: np.ndarray, k: int, seed: int, lam: float) -> np.ndarray:
    """The aggregator's K initial centroids: k-means++ on the public set (scikit-learn's
    ``kmeans_plusplus``, deterministic given ``seed``), soft-thresholded by ``lam`` so they
    start as sparse as the users keep them."""
    from sklearn.cluster import kmeans_plusplus

    x = np.asarray(x, dtype=np.float64)
    if k < 1 or len(x) < k:
        raise InputError(f"k-means++ needs at least K={k} initialisation samples; the initialisation set has {len(x)}")
    centres, _ = kmeans_plusplus(x, k, random_state=seed % 2**32)
    return soft_threshold(centres, lam)


def assign(centroids: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Index of each row's nearest centroid (squared Euclidean; ties go to the lowest index)."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    dist = (x**2).sum(axis=1)[:, None] - 2.0 * x @ centroids.T + (centroids**2).sum(axis=1)[None, :]
    return np.argmin(dist, axis=1)


def minibatch_step(
    centroids: np.ndarray, counts: np.ndarray, batch: np.ndarray, lam: float
) -> tuple[np.ndarray, np.ndarray]:
    """One mini-batch step (module docstring): the new centroids (K, D) and counts (K,)."""
    batch = np.atleast_2d(np.asarray(batch, dtype=np.float64))
    nearest = assign(centroids, batch)
    k = len(centroids)
    m = np.bincount(nearest, minlength=k).astype(np.float64)
    sums = np.zeros_like(centroids)
    np.add.at(sums, nearest, batch)
    new_counts = counts + m
    moved = m > 0
    eta = np.where(moved, m / np.where(moved, new_counts, 1.0), 0.0)
    means = sums / np.where(moved, m, 1.0)[:, None]
    u = centroids + eta[:, None] * (means - centroids)
    out = np.where(moved[:, None], soft_threshold(u, eta[:, None] * lam), centroids)
    return out, new_counts


def local_update(
    centroids: np.ndarray,
    counts: np.ndarray,
    x: np.ndarray,
    batch_size: int,
    steps: int,
    lam: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A user's round: ``steps`` mini-batches of ``batch_size`` rows drawn (with replacement
    across steps, without within one) from its ``x``; returns centroids, counts and the rows used."""
    if len(x) == 0:
        raise InputError("a user with no training samples cannot update the centroids")
    used = []
    for _ in range(steps):
        rows = rng.choice(len(x), size=min(batch_size, len(x)), replace=False)
        centroids, counts = minibatch_step(centroids, counts, x[rows], lam)
        used.append(rows)
    return centroids, counts, np.unique(np.concatenate(used))


def adjusted_mutual_information(centroids: np.ndarray, x: np.ndarray, labels: np.ndarray) -> float:
    """Table 6's score: scikit-learn's ``adjusted_mutual_info_score`` of the labels against
    the nearest-centroid clustering of ``x``."""
    from sklearn.metrics import adjusted_mutual_info_score

    if len(x) == 0:
        return float("nan")
    return float(adjusted_mutual_info_score(np.asarray(labels), assign(centroids, x)))
