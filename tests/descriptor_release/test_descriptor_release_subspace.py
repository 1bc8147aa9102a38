"""Lifting and distances against hand-computed and brute-force cases (ldp-feat.md section 3, Eqs. (1)-(2))."""

import numpy as np
import pytest

from vispriv.harness.errors import ConfigError, InputError
from vispriv.plugins.descriptor_release.subspace import (
    lift,
    nearest_to_subspaces,
    point_subspace_sqdist,
    project,
    sub_database_bounds,
    subspace_sqdist,
)


def _unit(rng, n):
    x = np.abs(rng.normal(size=(n, 128)))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _brute_point(w, c, b):
    # least squares: min_t ||c + B^T t - w||
    t, *_ = np.linalg.lstsq(b.T.astype(np.float64), (w - c).astype(np.float64), rcond=None)
    return float(np.sum((c + b.T @ t - w) ** 2))


def test_hand_case_plane_in_r128():
    # D = e3 + span(e1, e2): distance of (1, 2, 3, 4, 0...) is ||(0,0,2,4)||^2 = 20
    c = np.zeros((1, 128)); c[0, 2] = 1.0
    b = np.zeros((1, 2, 128)); b[0, 0, 0] = 1.0; b[0, 1, 1] = 1.0
    w = np.zeros((1, 128)); w[0, :4] = [1, 2, 3, 4]
    assert point_subspace_sqdist(w, c, b)[0, 0] == pytest.approx(20.0, rel=1e-6)
    np.testing.assert_allclose(project(w, c, b)[0, :4], [1, 2, 1, 0])


@pytest.mark.parametrize("mode", ["random", "adversarial", "hybrid", "sub-hybrid"])
@pytest.mark.parametrize("m", [2, 4, 8])
def test_lift_contains_descriptor_and_adversarial_rows(mode, m):
    rng = np.random.default_rng(0)
    db = _unit(rng, 256)
    d = _unit(rng, 12)
    subs = np.arange(12) % 16
    lf = lift(d, m, mode, np.random.default_rng(1), database=db, sub_database=subs)
    assert lf.bases.shape == (12, m, 128)
    np.testing.assert_allclose(np.einsum("kad,kbd->kab", lf.bases, lf.bases), np.broadcast_to(np.eye(m), (12, m, m)), atol=1e-5)
    # d lies in D (distance 0) but is not the offset (re-parameterised)
    dist = np.array([_brute_point(d[i], lf.offsets[i], lf.bases[i]) for i in range(12)])
    assert dist.max() < 1e-8
    assert np.min(np.linalg.norm(lf.offsets - d, axis=1)) > 0.05
    n_adv = {"random": 0, "adversarial": m, "hybrid": m // 2, "sub-hybrid": m // 2}[mode]
    assert lf.adversarial_rows.shape == (12, n_adv)
    for i in range(12):
        assert len(set(lf.adversarial_rows[i])) == n_adv
        for r in lf.adversarial_rows[i]:
            assert _brute_point(db[r], lf.offsets[i], lf.bases[i]) < 1e-8
    if mode == "sub-hybrid":
        bounds = sub_database_bounds(256)
        for i in range(12):
            assert np.all((lf.adversarial_rows[i] >= bounds[subs[i]]) & (lf.adversarial_rows[i] < bounds[subs[i] + 1]))


def test_batched_kernel_matches_brute_force_and_topn():
    rng = np.random.default_rng(2)
    db = _unit(rng, 700)
    d = _unit(rng, 9)
    lf = lift(d, 4, "hybrid", rng, database=db)
    full = point_subspace_sqdist(db, lf.offsets, lf.bases)
    brute = np.array([[_brute_point(w, lf.offsets[s], lf.bases[s]) for w in db[:50]] for s in range(9)])
    np.testing.assert_allclose(full[:, :50], brute, atol=1e-4)
    # tiny chunks force the running top-n merge over many database chunks
    dist, rows = nearest_to_subspaces(db, lf.offsets, lf.bases, n=7, subspace_chunk=4, chunk_elements=4 * 5 * 64)
    np.testing.assert_array_equal(rows, np.argsort(full, axis=1)[:, :7])
    np.testing.assert_allclose(dist, np.sort(full, axis=1)[:, :7], atol=1e-5)
    # Section 4.1 step 2: the adversarial rows come first, at distance ~0
    assert all(set(rows[i, :2]) == set(lf.adversarial_rows[i]) for i in range(9))
    assert dist[:, :2].max() < 1e-5


def test_subspace_distance_brute_force_and_parallel():
    rng = np.random.default_rng(3)
    d1, d2 = _unit(rng, 5), _unit(rng, 4)
    a = lift(d1, 3, "random", rng)
    b = lift(d2, 2, "random", rng)
    got = subspace_sqdist(a.offsets, a.bases, b.offsets, b.bases)
    for i in range(5):
        for j in range(4):
            m = np.concatenate([a.bases[i], -b.bases[j]]).T.astype(np.float64)
            t, *_ = np.linalg.lstsq(m, (b.offsets[j] - a.offsets[i]).astype(np.float64), rcond=None)
            assert got[i, j] == pytest.approx(np.sum((m @ t - (b.offsets[j] - a.offsets[i])) ** 2), abs=1e-6)
    # parallel: the same span shifted by a vector orthogonal to it -> distance = shift^2
    basis = a.bases[:1]
    shift = rng.normal(size=128)
    shift -= basis[0].T @ (basis[0] @ shift)
    shift *= 0.7 / np.linalg.norm(shift)
    rotated = np.linalg.qr(rng.normal(size=(3, 3)))[0] @ basis[0]
    dd = subspace_sqdist(a.offsets[:1], basis, a.offsets[:1] + shift[None], rotated[None])
    assert dd[0, 0] == pytest.approx(0.49, abs=1e-6)
    # intersecting subspaces (two lifts of the same descriptor) -> 0
    c = lift(d1[:1], 2, "random", rng)
    assert subspace_sqdist(a.offsets[:1], a.bases[:1], c.offsets, c.bases)[0, 0] < 1e-8


def test_bad_input():
    rng = np.random.default_rng(4)
    db = _unit(rng, 32)
    with pytest.raises(ConfigError, match="sub-database has 2"):
        lift(_unit(rng, 2), 8, "sub-hybrid", rng, database=db, sub_database=np.zeros(2, int))
    with pytest.raises(InputError, match="NaN"):
        lift(np.full((1, 128), np.nan), 2, "random", rng)
    with pytest.raises(InputError, match="128"):
        lift(np.zeros((3, 64)), 2, "random", rng)
    with pytest.raises(InputError, match="database"):
        nearest_to_subspaces(np.zeros((4, 100)), np.zeros((1, 128)), np.zeros((1, 2, 128)), 1)
