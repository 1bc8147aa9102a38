"""Eq. (1), Eq. (2) and the attacks of ldp-feat.md section 4 on hand-made and synthetic cases."""

import numpy as np

from vispriv.plugins.descriptor_release.recovery import (
    batched_kmeans,
    cluster_candidates,
    database_attack,
    intersecting,
    select_candidates,
    weighted_projection,
)
from vispriv.plugins.descriptor_release.subspace import lift


def _unit(x):
    x = np.asarray(x, np.float64)
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def test_eq1_weighted_projection_hand_case():
    # D = the x axis; u1 = (1, 1) at distance 1, u2 = (3, 0, 2) at distance 2:
    # mean = (u1/1 + u2/2) / (1 + 1/2) = (5/3, 2/3, 2/3); projected -> (5/3, 0, 0)
    offsets = np.zeros((1, 128))
    bases = np.zeros((1, 1, 128)); bases[0, 0, 0] = 1
    pts = np.zeros((1, 3, 128)); pts[0, 0, :2] = [1, 1]; pts[0, 1, [0, 2]] = [3, 2]; pts[0, 2, 5] = 100
    dists = np.array([[1.0, 2.0, 100.0]])
    mask = np.array([[True, True, False]])  # the third point is not in U
    est = weighted_projection(pts, dists, mask, offsets, bases)
    expected = np.zeros(128); expected[0] = 5 / 3
    np.testing.assert_allclose(est[0], expected, atol=1e-6)


def test_batched_kmeans_separates_two_blobs():
    rng = np.random.default_rng(0)
    a, b = np.zeros(128), np.zeros(128)
    a[0], b[1] = 1, 1
    pts = np.stack([np.concatenate([a + 0.01 * rng.normal(size=(5, 128)), b + 0.01 * rng.normal(size=(4, 128))]) for _ in range(3)])
    labels = batched_kmeans(pts, 2)
    for row in labels:
        assert len(set(row[:5])) == 1 and len(set(row[5:])) == 1 and row[0] != row[5]


def _world(seed=0, n_db=300, n_desc=40):
    rng = np.random.default_rng(seed)
    db = _unit(np.abs(rng.normal(size=(n_db, 128))))
    d = _unit(np.abs(rng.normal(size=(n_desc, 128))))
    return rng, db, d


def test_database_attack_recovers_adversarial_rows_and_d():
    rng, db, d = _world()
    # W also holds close neighbours of every d (the manifold around d), none equal to d
    near = _unit(np.repeat(d, 3, axis=0) + 0.05 * np.abs(rng.normal(size=(len(d) * 3, 128))))
    w = np.concatenate([db, near])
    lf = lift(d, 4, "hybrid", rng, database=db)
    est, rows, dist = database_attack(w, lf.offsets, lf.bases, n_adv=2, v_size=6, u_size=3)
    for i in range(len(d)):
        assert set(rows[i, :2]) == set(lf.adversarial_rows[i])  # step 2: exact, distance 0
    assert dist[:, :2].max() < 1e-2
    cos = np.sum(_unit(est) * d, axis=1)
    assert np.median(cos) > 0.97
    # the attack beats the nearest database row on average
    nearest_cos = np.max(w @ d.T, axis=0)
    assert np.mean(cos) > np.mean(nearest_cos)


def test_clustering_attack_picks_d_with_auxiliary_subspaces():
    rng, db, d = _world(1, n_db=200, n_desc=30)
    pool = db[:6]  # a small pool: the auxiliary subspaces share adversarial rows
    lf = lift(d, 2, "hybrid", rng, database=pool)
    # public database Z: noisy copies of the pool and of each d, plus unrelated rows
    def noisy(x, n):
        return _unit(np.repeat(x, n, axis=0) + 0.03 * np.abs(rng.normal(size=(len(x) * n, 128))))
    z = np.concatenate([noisy(pool, 4), noisy(d, 4), db[6:]])
    cands, sizes, _rows, _ = cluster_candidates(z, lf.offsets, lf.bases, k=2, v_size=8)
    aux = intersecting(lf.offsets, lf.bases, np.zeros(len(d), np.int64))
    # each Q' member really shares an adversarial row with D
    for i, q in enumerate(aux):
        for j in q:
            assert set(lf.adversarial_rows[i]) & set(lf.adversarial_rows[j])
    assert np.mean([len(q) > 0 for q in aux]) > 0.9
    est, _chosen = select_candidates(cands, sizes, aux, lf.offsets, lf.bases)
    cos_d = np.sum(_unit(est) * d, axis=1)
    cos_adv = np.sum(_unit(est) * pool[lf.adversarial_rows[:, 0]], axis=1)
    assert np.mean(cos_d > cos_adv) > 0.8
    assert np.median(cos_d) > 0.95
