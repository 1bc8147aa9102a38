"""Eq. (1), Eq. (2) and the attacks of ldp-feat.md section 4 on hand-made and synthetic cases."""

import numpy as np
import pytest
import torch

from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release.recovery import (
    EPS,
    _smallest_mask,
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
    rec = database_attack(w, lf.offsets, lf.bases, n_adv=2, v_size=6, u_size=3)
    for i in range(len(d)):
        assert set(rec.nearest_rows[i, :2]) == set(lf.adversarial_rows[i])  # step 2: exact, distance 0
    assert rec.nearest_dist[:, :2].max() < 1e-2
    cos = np.sum(_unit(rec.estimates) * d, axis=1)
    assert np.median(cos) > 0.97
    # the attack beats the nearest database row on average
    nearest_cos = np.max(w @ d.T, axis=0)
    assert np.mean(cos) > np.mean(nearest_cos)


def _database_attack_by_full_sort(w, offsets, bases, n_adv, v_size, u_size):
    """Section 4.1 as written, in float64: sort all of W by dist(D, w), take a, V, score, U, Eq. (1)."""
    w = np.asarray(w, np.float64)
    est, chosen = [], []
    for c, b in zip(np.asarray(offsets, np.float64), np.asarray(bases, np.float64)):
        diff = w - c
        dist = np.sqrt(np.clip((diff**2).sum(1) - ((diff @ b.T) ** 2).sum(1), 0, None))
        order = np.argsort(dist, kind="stable")
        a, v = order[:n_adv], order[n_adv : n_adv + v_size]
        score = np.linalg.norm(w[v][:, None] - w[a][None], axis=-1).min(axis=1) if n_adv else -dist[v]
        u = v[np.argsort(-score, kind="stable")[:u_size]]
        mean = (w[u] / np.maximum(dist[u], EPS)[:, None]).sum(0) / (1 / np.maximum(dist[u], EPS)).sum()
        est.append(c + b.T @ (b @ (mean - c)))
        chosen.append(u)
    return np.array(est), np.array(chosen)


@pytest.mark.parametrize(("m", "mode", "v_size", "u_size"), [(2, "hybrid", 40, 1), (4, "hybrid", 97, 3), (4, "adversarial", 60, 2), (2, "random", 30, 4)])
def test_database_attack_equals_the_full_sort_of_section_4_1(m, mode, v_size, u_size):
    rng, db, d = _world(2, n_db=500, n_desc=70)
    lf = lift(d, m, mode, rng, database=db)
    n_adv = {"hybrid": m // 2, "adversarial": m, "random": 0}[mode]
    rec = database_attack(db, lf.offsets, lf.bases, n_adv, v_size, u_size, subspace_chunk=16)
    est, chosen = _database_attack_by_full_sort(db, lf.offsets, lf.bases, n_adv, v_size, u_size)
    np.testing.assert_array_equal(np.sort(rec.chosen_rows, axis=1), np.sort(chosen, axis=1))
    np.testing.assert_allclose(rec.estimates, est, atol=1e-5)
    assert rec.nearest_rows.shape == (len(d), n_adv + 1)
    assert np.all(np.diff(rec.nearest_dist, axis=1) >= 0)


@pytest.mark.parametrize("use_numpy", [True, False])
def test_smallest_mask_keeps_exactly_n_and_breaks_ties_by_column(use_numpy):
    values = torch.tensor([[3.0, 1.0, 2.0, 2.0, 2.0, 0.5], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [5.0, 4.0, 3.0, 2.0, 1.0, 0.0]])
    mask = _smallest_mask(values, 3, use_numpy)
    assert mask.tolist() == [[False, True, True, False, False, True], [True, True, True, False, False, False],
                             [False, False, False, True, True, True]]
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.integers(0, 20, size=(50, 200)).astype(np.float32))  # many ties
    got = _smallest_mask(x, 37, use_numpy)
    order = np.argsort(x.numpy(), axis=1, kind="stable")[:, :37]  # the n smallest, ties by column
    want = np.zeros(x.shape, bool)
    np.put_along_axis(want, order, True, axis=1)
    np.testing.assert_array_equal(got.numpy(), want)


def test_database_attack_rejects_a_v_larger_than_the_database():
    _, db, d = _world(3, n_db=50, n_desc=4)
    lf = lift(d, 2, "hybrid", np.random.default_rng(0), database=db)
    with pytest.raises(InputError, match="n_adv \\+ v_size <= \\|W\\| = 50"):
        database_attack(db, lf.offsets, lf.bases, 1, 50, 1)


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
