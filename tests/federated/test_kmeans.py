"""The users' mini-batch k-means step (plugins/federated/clustering/kmeans.py) against Sculley's per-point loop and by hand."""

from __future__ import annotations

import numpy as np
import pytest

from vispriv.harness.errors import InputError
from vispriv.plugins.federated.clustering import kmeans


def sculley_per_point(centroids, counts, batch):
    """Sculley (2010) Algorithm 1 literally: cache the nearest centres, then one point at a time."""
    c, v = centroids.copy(), counts.copy()
    cache = [int(np.argmin(((c - x) ** 2).sum(axis=1))) for x in batch]
    for x, j in zip(batch, cache):
        v[j] += 1
        eta = 1.0 / v[j]
        c[j] = (1 - eta) * c[j] + eta * x
    return c, v


def test_step_without_l1_is_sculleys_per_point_loop():
    rng = np.random.default_rng(3)
    centroids = rng.normal(size=(5, 7))
    counts = rng.integers(0, 20, size=5).astype(float)
    batch = rng.normal(size=(40, 7))
    got_c, got_v = kmeans.minibatch_step(centroids, counts, batch, lam=0.0)
    want_c, want_v = sculley_per_point(centroids, counts, batch)
    np.testing.assert_allclose(got_c, want_c, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(got_v, want_v)
    assert not np.allclose(got_c, centroids)


def test_step_by_hand_with_l1():
    # centroid 0 at (0, 2) seen 2 times gets points (1, 0) and (3, 0.5): mean (2, 0.25), eta = 2 / 4;
    # u = (1, 1.125); threshold eta * lam = 0.5 * 1.2 = 0.6 -> (0.4, 0.525). Centroid 1 gets no point.
    centroids = np.array([[0.0, 2.0], [10.0, -10.0]])
    counts = np.array([2.0, 5.0])
    batch = np.array([[1.0, 0.0], [3.0, 0.5]])
    c, v = kmeans.minibatch_step(centroids, counts, batch, lam=1.2)
    np.testing.assert_allclose(c, [[0.4, 0.525], [10.0, -10.0]], atol=1e-12)
    np.testing.assert_array_equal(v, [4.0, 5.0])


def test_a_zero_coordinate_stays_zero_unless_the_batch_mean_exceeds_lam():
    centroids = np.zeros((1, 3))
    batch = np.array([[0.5, 2.0, -0.9], [0.3, 1.0, -0.9]])  # means 0.4, 1.5, -0.9
    c, _ = kmeans.minibatch_step(centroids, np.array([6.0]), batch, lam=1.0)
    eta = 2 / 8
    np.testing.assert_allclose(c, [[0.0, eta * (1.5 - 1.0), 0.0]], atol=1e-12)


def test_seeding_is_deterministic_sparse_and_checks_the_set_size():
    x = np.random.default_rng(0).normal(size=(50, 6))
    a = kmeans.seed_centroids(x, 4, seed=7, lam=0.5)
    np.testing.assert_array_equal(a, kmeans.seed_centroids(x, 4, seed=7, lam=0.5))
    assert np.mean(a == 0) > 0.1
    with pytest.raises(InputError, match="at least K=60"):
        kmeans.seed_centroids(x, 60, seed=0, lam=0.0)


def test_on_blobs_it_matches_scikit_learns_minibatch_kmeans():
    from sklearn.cluster import MiniBatchKMeans
    from sklearn.datasets import make_blobs

    x, y = make_blobs(n_samples=600, centers=4, n_features=5, cluster_std=1.0, random_state=0)
    init = kmeans.seed_centroids(x, 4, seed=0, lam=0.0)
    c, counts = init, np.zeros(4)
    rng = np.random.default_rng(0)
    for _ in range(30):
        c, counts = kmeans.minibatch_step(c, counts, x[rng.choice(len(x), 32, replace=False)], lam=0.0)
    ours = kmeans.adjusted_mutual_information(c, x, y)
    ref = MiniBatchKMeans(4, init=init, n_init=1, batch_size=32, max_iter=30, random_state=0).fit(x)
    theirs = kmeans.adjusted_mutual_information(ref.cluster_centers_, x, y)
    assert ours > 0.95 and abs(ours - theirs) < 0.02
    inertia = ((x - c[kmeans.assign(c, x)]) ** 2).sum()
    assert inertia < 1.05 * ref.inertia_
