"""The exact deletion-budget solver (problem 4) against brute force: margins, user keeps, ties,
both exact searches, and time limits that cut the search."""

import gc
from itertools import product

import numpy as np
import pytest

from vispriv.plugins.album import budget_search, milp
from vispriv.plugins.album.budget_search import (
    _group_layout,
    _groups_hit,
    _packed_hits,
    _packed_layout,
    branch_and_bound,
    conflict_groups,
    suffix_relief,
)
from vispriv.plugins.album.pruning import advantage, brute_force_budget, caps, protected_k
from vispriv.plugins.album.surrogate import (
    LP_TOLERANCE,
    best_totals,
    lp_bounds,
    pair_compatibility,
    surviving_cliques,
    worst_totals,
)


def _albums(n_albums: int, seed: int, integer: bool = False):
    """Small random albums; ``integer`` scores make exact ties (a total of 0) common."""
    rng = np.random.default_rng(seed)
    for trial in range(n_albums):
        n, m = int(rng.integers(3, 10)), int(rng.integers(3, 9))
        S = rng.integers(-2, 3, (n, m)).astype(float) if integer else rng.normal(0, 2, (n, m))
        S[:, 0] += 1.0
        theta = 0.0 if integer else float(rng.choice([0.0, 0.3]))
        fixed = rng.random(n) < 0.3 if trial % 2 == 0 else np.zeros(n, bool)
        yield S, advantage(S, 0, theta)[0], fixed, int(rng.integers(0, n + 1))


def _check(result, A, d, fixed):
    assert result.status == "optimal"
    assert (~result.keep).sum() <= d
    assert result.keep[fixed].all()
    assert protected_k(A, result.keep) == brute_force_budget(A, d, fixed)


@pytest.mark.parametrize("descend_places", [0, 1000], ids=["branch-and-bound-first", "descending-first"])
def test_fast_budget_equals_brute_force(descend_places):
    for S, A, fixed, d in _albums(40, 11):
        _check(milp.fast_budget(A, d, S[:, 0], fixed, descend_places=descend_places), A, d, fixed)


def test_fast_budget_counts_ties_as_beating():
    ties = 0
    for S, A, fixed, d in _albums(40, 12, integer=True):
        result = milp.fast_budget(A, d, S[:, 0], fixed)
        _check(result, A, d, fixed)
        ties += int(np.sum(A[result.keep].sum(axis=0) == 0))
    assert ties > 0  # some optimum counts a place whose total is exactly the true place's


def test_descending_search_alone_equals_brute_force():
    """The descending search on its own (no branch and bound, no heuristic) proves every optimum."""
    for _, A, fixed, d in _albums(30, 13):
        c = caps(A, fixed)
        free_d = min(d, int((~fixed).sum()))
        best, proven = milp._descend_budget(A, free_d, fixed, c, np.ones(len(A), bool), "HIGHS", 1e18)
        assert proven and protected_k(A, best) == brute_force_budget(A, d, fixed)


def test_branch_and_bound_equals_brute_force_and_stops_unproven():
    rng = np.random.default_rng(14)
    for _ in range(30):
        n, m, d = int(rng.integers(2, 9)), int(rng.integers(1, 8)), int(rng.integers(1, 5))
        B = rng.normal(0, 1, (n, m))
        tot = B.sum(axis=0)
        expected = max(
            int(np.sum(tot - B[np.array(bits)].sum(axis=0) >= 0))
            for bits in product((False, True), repeat=n)
            if sum(bits) <= d
        )
        start = int(np.sum(tot >= 0))
        rows, count, proven = branch_and_bound(B, tot, d, start, 1e18)
        assert proven and count == expected
        if rows is not None:
            assert len(rows) <= d and int(np.sum(tot - B[rows].sum(axis=0) >= 0)) == count
    _, _, proven = branch_and_bound(rng.normal(0, 1, (12, 6)), rng.normal(-1, 1, 6), 4, 0, 1e18, node_limit=1)
    assert not proven


def test_branch_and_bound_without_node_limit_equals_brute_force():
    """``node_limit=None`` (the deadline alone) proves the same optima as brute force."""
    for _, A, fixed, budget in _albums(30, 23):
        d = min(budget, int((~fixed).sum()))
        cand = np.flatnonzero(~fixed)

        def exact(rows, cand=cand, A=A):
            keep = np.ones(len(A), dtype=bool)
            keep[cand[rows]] = False
            return protected_k(A, keep)

        _, count, proven = branch_and_bound(A[cand], A.sum(axis=0), d, -1, 1e18, node_limit=None, count=exact)
        assert proven and count == brute_force_budget(A, budget, fixed)


def test_fast_budget_runs_its_first_branch_and_bound_without_node_limit(monkeypatch):
    """Many candidate places: the branch and bound runs first and stops at the time limit
    only (the descending search after it could not use the time left); when it runs after
    the descending search it keeps the node limit."""
    seen = []
    search = milp.branch_and_bound

    def spy(*args, **kwargs):
        seen.append(kwargs["node_limit"])
        return search(*args, **kwargs)

    monkeypatch.setattr(milp, "branch_and_bound", spy)
    for S, A, fixed, d in _albums(20, 11):
        _check(milp.fast_budget(A, d, S[:, 0], fixed, descend_places=0), A, d, fixed)
    assert seen and all(limit is None for limit in seen)
    seen.clear()
    for _, A, fixed, d in _albums(20, 11):
        free_d = min(d, int((~fixed).sum()))
        best, _ = milp._search_budget(A, free_d, fixed, caps(A, fixed), np.ones(len(A), bool), 1e18)
        assert protected_k(A, best) == brute_force_budget(A, d, fixed)
    assert seen and all(limit == budget_search.NODE_LIMIT for limit in seen)


def test_time_limit_that_cuts_the_search_is_not_proven():
    """An album whose optimum needs the exact search: a tiny time limit must not claim optimality."""
    rng = np.random.default_rng(15)
    cut = 0
    for _ in range(20):
        S = rng.normal(0, 2, (24, 60))
        S[:, 0] += 1.0
        A = advantage(S, 0)[0]
        result = milp.fast_budget(A, 6, S[:, 0], time_limit=1e-4)
        assert (~result.keep).sum() <= 6
        full = milp.fast_budget(A, 6, S[:, 0])
        assert full.status == "optimal"
        if result.status == "optimal":
            assert protected_k(A, result.keep) == protected_k(A, full.keep)
        else:
            assert result.status == "feasible"
            cut += 1
    assert cut > 0


def test_at_least_filters_keep_every_real_beating_set():
    """The budget's "T or more kept" filters never refute a set that beats under such a mask."""
    checked = 0
    for _, A, fixed, _ in _albums(25, 16):
        k = 2
        c = caps(A, fixed)
        for T in range(int(fixed.sum()), len(A) + 1):
            J = np.flatnonzero(c >= T)
            cliques = surviving_cliques(A, fixed, J, T, k)
            bounds = {tuple(J[K].tolist()): b for K, b in zip(cliques, lp_bounds(A, fixed, J, cliques, T, at_least=True))}
            for bits in product((False, True), repeat=len(A)):
                keep = np.array(bits)
                if keep.sum() < T or np.any(fixed & ~keep):
                    continue
                beating = np.flatnonzero(A[keep].sum(axis=0) >= 0)
                for a in range(len(beating)):
                    for b in range(a + 1, len(beating)):
                        checked += 1
                        assert bounds[(int(beating[a]), int(beating[b]))] >= -LP_TOLERANCE
    assert checked > 100


def test_at_least_totals_are_the_extremes_over_masks():
    rng = np.random.default_rng(17)
    A = rng.normal(0, 1, (7, 4))
    fixed = np.zeros(7, bool)
    fixed[1] = True
    masks = [np.array(b) for b in product((False, True), repeat=7) if b[1]]
    for T in range(1, 8):
        totals = np.array([A[m].sum(axis=0) for m in masks if m.sum() >= T])
        assert np.allclose(best_totals(A, fixed, T, at_least=True), totals.max(axis=0))
        assert np.allclose(worst_totals(A, fixed, T, at_least=True), totals.min(axis=0))


def test_conflict_groups_are_cliques_of_the_conflict_graph():
    rng = np.random.default_rng(18)
    conflict = rng.random((12, 12)) < 0.4
    conflict = np.triu(conflict, 1)
    conflict = conflict | conflict.T
    labels = conflict_groups(~conflict, 12)
    assert len(np.unique(labels)) < 12  # something was grouped
    for g in np.unique(labels):
        members = np.flatnonzero(labels == g)
        assert all(conflict[a, b] for a in members for b in members if a != b)
    assert np.array_equal(conflict_groups(None, 5), np.arange(5))


def test_branch_and_bound_with_real_conflict_groups_equals_brute_force():
    """Integer scores: deleting every photo leaves exact ties, which count as beating."""
    for _, A, fixed, budget in [*_albums(30, 19), *_albums(30, 20, integer=True)]:
        d = min(budget, int((~fixed).sum()))
        T = len(A) - d
        c = caps(A, fixed)
        places = np.flatnonzero(c >= T)
        cand = np.flatnonzero(~fixed)
        groups = conflict_groups(pair_compatibility(A, fixed, places, T), len(places))

        def exact(rows, cand=cand, places=places, A=A):
            keep = np.ones(len(A), dtype=bool)
            keep[cand[rows]] = False
            return protected_k(A[:, places], keep)

        _, count, proven = branch_and_bound(A[cand][:, places], A[:, places].sum(axis=0), d, -1, 1e18, groups=groups, count=exact)
        assert proven and count == brute_force_budget(A, budget, fixed)


def test_groups_hit_counts_groups_with_a_possible_place():
    """The branch and bound's node bound (lone places first, then grouped ones) equals a direct count."""
    rng = np.random.default_rng(21)
    for _ in range(30):
        m = int(rng.integers(1, 30))
        groups = rng.integers(0, max(1, m // 2), m)
        possible = rng.random((int(rng.integers(1, 8)), m)) < rng.random()
        order, n_single, ends = _group_layout(groups)
        expected = [len(np.unique(groups[row])) for row in possible]
        assert np.array_equal(_groups_hit(possible[:, order], n_single, ends), expected)


def test_branch_and_bound_equals_the_papers_milp_and_brute_force_on_larger_albums():
    """fast_budget with the branch and bound first against the paper's MILP (supplement C,
    through cvxpy/HiGHS) and brute force, on albums with many places and grouped conflicts."""
    rng = np.random.default_rng(22)
    grouped = nonzero = 0
    for _ in range(4):
        S = rng.normal(0, 2, (12, 40))
        S[:, 0] += 1.0
        A = advantage(S, 0)[0]
        d = 4
        T = len(A) - d
        places = np.flatnonzero(caps(A) >= T)
        labels = conflict_groups(pair_compatibility(A, np.zeros(len(A), bool), places, T), len(places))
        grouped += int(len(np.unique(labels)) < len(places))
        fast = milp.fast_budget(A, d, S[:, 0], descend_places=0)
        naive = milp.naive_budget(A, d)
        assert fast.status == naive.status == "optimal"
        assert protected_k(A, fast.keep) == protected_k(A, naive.keep) == brute_force_budget(A, d)
        nonzero += int(protected_k(A, fast.keep) > protected_k(A, np.ones(len(A), bool)))
    assert grouped > 0 and nonzero > 0  # grouped bounds exercised, deletions that matter


def test_packed_hits_count_groups_and_places():
    rng = np.random.default_rng(21)
    for _ in range(30):
        m = int(rng.integers(1, 40))
        groups = rng.integers(0, max(1, m // 3), m)
        groups[: m // 2] = rng.choice([0, 1], m // 2)  # big groups: members beyond one word
        possible = rng.random((6, m)) < 0.3
        columns, packing = _packed_layout(groups)
        packed = np.zeros((6, len(columns)), dtype=bool)
        packed[:, columns >= 0] = possible[:, columns[columns >= 0]]
        hit, n_possible = _packed_hits(packed, packing)
        assert np.array_equal(hit, [len(np.unique(groups[row])) for row in possible])
        assert np.array_equal(n_possible, possible.sum(axis=1))


def test_packed_hits_count_past_a_byte():
    # Counts are summed as bytes 255 columns at a time: 700 places, 600 of them alone, all
    # possible in one row (700 places, 650 groups), none in another, one in the third.
    groups = np.r_[np.arange(600), 600 + np.arange(100) // 2]
    possible = np.zeros((3, 700), dtype=bool)
    possible[0] = True
    possible[2, 650] = True
    columns, packing = _packed_layout(groups)
    packed = np.zeros((3, len(columns)), dtype=bool)
    packed[:, columns >= 0] = possible[:, columns[columns >= 0]]
    hit, n_possible = _packed_hits(packed, packing)
    assert hit.tolist() == [650, 0, 1]
    assert n_possible.tolist() == [700, 0, 1]


def _one_node_at_a_time(B, tot, d, best_count, groups):
    """The search evaluating each node's children when it is popped (this package's search
    before the look-ahead batches): the reference the batched search must equal exactly."""
    n = len(B)
    count = lambda rows: int(np.sum(tot - B[rows].sum(axis=0) >= 0))  # noqa: E731
    best_rows = None
    if count(np.zeros(0, dtype=int)) > best_count:
        best_count, best_rows = count(np.zeros(0, dtype=int)), np.zeros(0, dtype=int)
    tol = budget_search.TIE_TOLERANCE * max(1.0, float(np.abs(B).sum(axis=0).max()), float(np.abs(tot).max()))
    order, n_single, ends = _group_layout(groups)
    Bs, tots = B[:, order], tot[order]
    RT = suffix_relief(Bs, d).transpose(1, 0, 2)
    stack, nodes = [(0, len(tot), np.zeros_like(tots), ())], 0
    while stack:
        p, bound, removed, rows = stack.pop()
        r = d - len(rows)
        if bound <= best_count or r == 0 or p == n:
            continue
        nodes += 1
        slack = (tots - removed + tol)[None, :] - Bs[p:]
        approx = np.count_nonzero(slack >= 0, axis=1)
        for q in np.argsort(-approx, kind="stable"):
            if approx[q] <= best_count:
                break
            exact = count(np.array([*rows, p + q]))
            if exact > best_count:
                best_count, best_rows = exact, np.array([*rows, p + q])
        bounds = _groups_hit(slack >= RT[r - 1, p + 1 : n + 1], n_single, ends)
        for q in np.flatnonzero(bounds > best_count)[::-1]:
            stack.append((p + int(q) + 1, int(bounds[q]), removed + Bs[p + q], (*rows, p + int(q))))
    return best_rows, best_count, nodes


@pytest.mark.parametrize("loop, ahead", [("numpy", 1), ("numpy", 3), ("numpy", budget_search.AHEAD_NODES),
                                         ("compiled", budget_search.AHEAD_NODES)])
def test_batched_search_equals_the_one_node_at_a_time_search(loop, ahead, monkeypatch):
    """Same deletion set (ties included), same count and same number of nodes expanded as
    the search that evaluates one node at a time, for any look-ahead batch size of the numpy
    loop and for the compiled loop (plugins/album/budget_kernel.py)."""
    if loop == "compiled":
        pytest.importorskip("numba")
    monkeypatch.setenv("VISPRIV_BUDGET_KERNEL", "1" if loop == "compiled" else "0")
    monkeypatch.setattr(budget_search, "AHEAD_NODES", ahead)
    rng = np.random.default_rng(22)
    for trial in range(40):
        n, m, d = int(rng.integers(2, 12)), int(rng.integers(1, 30)), int(rng.integers(1, 6))
        B = rng.integers(-3, 4, (n, m)).astype(float) if trial % 2 else rng.normal(0, 1, (n, m))
        tot = B.sum(axis=0) + rng.normal(0, 0.5, m) * (trial % 2 == 0)
        groups = rng.integers(0, max(1, m // 2), m)
        start = int(rng.integers(-1, m))
        expanded = []
        got_rows, got_count, got_proven = branch_and_bound(B, tot, d, start, 1e18, groups=groups, node_limit=10**9)
        rows, count, nodes = _one_node_at_a_time(B, tot, d, start, groups)
        assert got_proven and got_count == count
        assert (got_rows is None) == (rows is None)
        if rows is not None:
            assert np.array_equal(got_rows, rows)
        for node_limit in (nodes, nodes - 1):
            expanded.append(branch_and_bound(B, tot, d, start, 1e18, groups=groups, node_limit=node_limit)[2])
        assert expanded == [True, nodes == 0]


@pytest.mark.parametrize("enabled", [True, False])
def test_search_restores_the_garbage_collector(enabled):
    """The cyclic collector paused during the search comes back as it was, also on a timeout."""
    B = np.array([[1.0, -2.0], [-1.0, 1.0], [0.5, -0.5]])
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        for deadline in (1e18, 0.0):
            branch_and_bound(B, B.sum(axis=0), 2, -1, deadline)
            assert gc.isenabled() == enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_lp_bound_of_the_nodes_diagnostic_is_never_below_the_optimum():
    """benchmarks/album_budget_nodes.py's LP relaxation of MILP (7) (big-M, cover and clique
    rows, optionally every pair-conflict row), quoted in docs/benchmarks.md, bounds the
    brute-force optimum from above."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        from album_budget_nodes import lp_bound
    finally:
        sys.path.pop(0)
    rng = np.random.default_rng(24)
    for _ in range(12):
        S = rng.normal(0, 2, (int(rng.integers(4, 9)), 12))
        S[:, 0] += 1.0
        A = advantage(S, 0)[0]
        d = int(rng.integers(1, 4))
        places = np.flatnonzero(caps(A) >= len(A) - d)
        if len(places) == 0:
            continue
        compatible = pair_compatibility(A, np.zeros(len(A), bool), places, len(A) - d)
        groups = conflict_groups(compatible, len(places))
        optimum = brute_force_budget(A[:, places], d)
        B, tot = A[:, places], A[:, places].sum(axis=0)
        assert lp_bound(B, tot, d, groups) >= optimum - 1e-6
        assert lp_bound(B, tot, d, groups, compatible) >= optimum - 1e-6
