"""The surrogate filters of the exact top-k solver never cut off a real solution.

Brute force over every keep mask of small albums: each set of places that jointly beats
the true place under some mask with ``T`` photos kept must survive the clique enumeration
and have a non-negative LP bound; and the solver stays exact whichever MILP path it takes.
"""

from itertools import combinations, product

import numpy as np
import pytest

from vispriv.plugins.album import milp
from vispriv.plugins.album.pruning import advantage, brute_force_topk, caps
from vispriv.plugins.album.surrogate import LP_TOLERANCE, lp_bounds, surviving_cliques


def _albums(n_albums: int, seed: int):
    rng = np.random.default_rng(seed)
    for trial in range(n_albums):
        n, m = int(rng.integers(4, 10)), int(rng.integers(5, 10))
        S = rng.normal(0, 2, (n, m))
        S[:, 0] += 1.0
        fixed = rng.random(n) < 0.2 if trial % 3 == 0 else np.zeros(n, bool)
        yield advantage(S, 0)[0], fixed, int(rng.integers(2, 4))


def _beating_sets(A: np.ndarray, fixed: np.ndarray, T: int, k: int) -> set[tuple[int, ...]]:
    """Every k-set of places that all beat the true place under some mask keeping T photos."""
    found = set()
    for bits in product((False, True), repeat=len(A)):
        keep = np.array(bits)
        if keep.sum() != T or np.any(fixed & ~keep):
            continue
        beating = np.flatnonzero(A[keep].sum(axis=0) >= 0)
        found.update(combinations(beating.tolist(), k))
    return found


def test_clique_and_lp_filters_keep_every_real_beating_set():
    checked = 0
    for A, fixed, k in _albums(30, 3):
        c = caps(A, fixed)
        for T in range(int(fixed.sum()), len(A) + 1):
            J = np.flatnonzero(c >= T)
            cliques = surviving_cliques(A, fixed, J, T, k)
            assert cliques is not None
            bounds = {tuple(J[K].tolist()): b for K, b in zip(cliques, lp_bounds(A, fixed, J, cliques, T))}
            for places in _beating_sets(A, fixed, T, k):
                checked += 1
                assert places in bounds
                assert bounds[places] >= -LP_TOLERANCE
    assert checked > 100


def test_filters_refute_something():
    """The filters are not vacuous: on these albums they discard candidate sets."""
    refuted = 0
    for A, fixed, k in _albums(30, 4):
        c = caps(A, fixed)
        T = int(np.sort(c)[::-1][k - 1])
        J = np.flatnonzero(c >= T)
        cliques = surviving_cliques(A, fixed, J, T, k)
        all_sets = len(list(combinations(range(len(J)), k)))
        refuted += all_sets - int(np.sum(lp_bounds(A, fixed, J, cliques, T) >= -LP_TOLERANCE))
    assert refuted > 0


@pytest.mark.parametrize(("clique_limit", "lp_limit"), [(0, 128), (8, 128), (8, 0), (2, 128)])
def test_fast_topk_exact_on_every_milp_path(monkeypatch, clique_limit, lp_limit):
    """Clique limit 0 forces the union MILP, 8 the per-set MILPs; LP limit 0 skips the LP bound."""
    monkeypatch.setattr(milp, "CLIQUE_MILP_LIMIT", clique_limit)
    monkeypatch.setattr(milp, "LP_SET_LIMIT", lp_limit)
    for A, fixed, k in _albums(25, 5):
        result = milp.fast_topk(A, k, fixed)
        expected = brute_force_topk(A, k, fixed)
        assert (-1 if result.keep is None else int(result.keep.sum())) == expected
        if expected >= 0:
            assert result.status == "optimal"
