"""The compiled budget search (plugins/album/budget_kernel.py) against the numpy search.

Node for node: the same best set (ties included), count, status, nodes expanded and the same
stack left when a limit stops it (node by node, running totals included), on random albums
with integer scores (exact ties on the count and on the thresholds) and real-valued ones,
conflict groups, both count classes; a search stopped in one loop resumes in the other.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("numba")

from vispriv.harness import compiled
from vispriv.plugins.album import budget_kernel, budget_search
from vispriv.plugins.album.budget_search import (
    KeptCount,
    Prepared,
    TotalsCount,
    branch_and_bound,
    numpy_search,
    search,
)
from vispriv.plugins.album.pruning import protected_k


def _instances(count: int, seed: int):
    """(B, tot, d, groups, count): integer scores (odd trials), tenths or real ones, conflict groups on
    two thirds (some larger than a word of 8 places), KeptCount (the rows of an album ``A``,
    two photos never deletable) or TotalsCount."""
    rng = np.random.default_rng(seed)
    for trial in range(count):
        n, m, d = int(rng.integers(8, 15)), int(rng.integers(1, 24)), int(rng.integers(2, 7))
        A = rng.integers(-3, 3, (n + 2, m)).astype(float) if trial % 2 else rng.normal(-0.3, 1.0, (n + 2, m))
        if trial % 6 == 0:  # tenths: totals that are 0 in exact arithmetic land a few ulps either side
            A = rng.integers(-3, 3, (n + 2, m)) * 0.1
        cand = np.sort(rng.choice(n + 2, n, replace=False))
        B = A[cand]
        groups = rng.integers(0, max(1, m // (1 + trial % 4)), m) if trial % 3 else None
        if trial % 5 == 4:  # two groups: more than 8 members each where m > 16
            groups = rng.integers(0, 2, m)
        if trial % 4 < 2:
            yield B, A.sum(axis=0), d, groups, KeptCount(A, cand)
        else:
            tot = B.sum(axis=0) - (rng.integers(0, 4, m) if trial % 2 else rng.uniform(0, 2, m))
            yield B, tot, d, groups, TotalsCount(B, tot)


def _run(loop, prepared, stack, start, limit, count):
    stats: dict[str, int] = {}
    rows, found, proven = loop(prepared, stack, None, start, math.inf, limit, count, stats)
    return (None if rows is None else rows.tolist()), found, proven, stats["nodes"]


def _stack_view(stack):
    return [(p, bound, tuple(rows), removed.tolist()) for p, bound, removed, rows, _ in stack]


def test_compiled_search_equals_the_numpy_search_node_for_node():
    searched = stopped = wide = 0
    for B, tot, d, groups, count in _instances(60, 31):
        wide += groups is not None and np.bincount(groups).max() > 8 and d > 1
        prepared = Prepared.of(B, tot, d, groups)
        start = int(np.random.default_rng(len(B)).integers(-1, max(1, len(tot) // 4)))
        whole = _run(numpy_search, prepared, [prepared.root()], start, math.inf, count)
        assert _run(budget_kernel.compiled_search, prepared, [prepared.root()], start, math.inf, count) == whole
        searched += whole[3] > 5
        for limit in {0, 1, whole[3] // 2, whole[3] - 1, whole[3]}:
            stacks = [[prepared.root()], [prepared.root()]]
            ours = _run(budget_kernel.compiled_search, prepared, stacks[0], start, limit, count)
            theirs = _run(numpy_search, prepared, stacks[1], start, limit, count)
            assert ours == theirs, (limit, ours, theirs)
            assert _stack_view(stacks[0]) == _stack_view(stacks[1])
            stopped += not ours[2]
    assert searched >= 12 and stopped >= 40 and wide >= 3  # they search, the limits stop them, groups span words


def test_a_search_stopped_in_one_loop_resumes_in_the_other():
    for B, tot, d, groups, count in _instances(30, 7):
        prepared = Prepared.of(B, tot, d, groups)
        whole = _run(numpy_search, prepared, [prepared.root()], -1, math.inf, count)
        if whole[3] < 4:
            continue
        for first, then in ((budget_kernel.compiled_search, numpy_search), (numpy_search, budget_kernel.compiled_search)):
            stack = [prepared.root()]
            head = _run(first, prepared, stack, -1, whole[3] // 3, count)
            assert not head[2]
            stats: dict[str, int] = {}
            rows, found, proven = then(prepared, stack, None if head[0] is None else np.array(head[0]), head[1],
                                       math.inf, math.inf, count, stats)
            assert ((None if rows is None else rows.tolist()), found, proven) == whole[:3]
            assert head[3] + stats["nodes"] == whole[3]


def test_compiled_exact_counts_sum_as_the_count_classes_do():
    """The leaf counts: the kept rows summed in row order equal numpy's ``A[keep].sum(axis=0)``
    bit for bit (KeptCount, via protected_k), and the totals less the deleted rows' sum
    (TotalsCount), on real-valued rows where the order of the additions changes the last bits."""
    rng = np.random.default_rng(5)
    A = rng.normal(0, 1, (40, 25)) * 10.0 ** rng.integers(-6, 7, (40, 25))
    cand = np.arange(40)
    sums, keep = np.empty(25), np.empty(40, dtype=bool)
    for _ in range(50):
        rows = np.sort(rng.choice(40, int(rng.integers(0, 12)), replace=False))
        exact = budget_kernel._exact_count(A, cand, np.zeros(0), 1, rows, len(rows), sums, keep)
        kept = np.ones(40, dtype=bool)
        kept[rows] = False
        assert np.array_equal(sums, A[kept].sum(axis=0)) and exact == KeptCount(A, cand)(rows) == protected_k(A, kept)
        tot = A.sum(axis=0) * 0.5
        exact = budget_kernel._exact_count(A, cand, tot, 0, rows, len(rows), sums, keep)
        assert exact == TotalsCount(A, tot)(rows)


def test_halted_stops_the_compiled_search_where_it_can_go_on(monkeypatch):
    """``halted`` (and the deadline) are looked at every ``CHECK_EVERY`` nodes; stopped there, the
    stack holds the rest and the search resumed from it finishes with the uninterrupted answer."""
    monkeypatch.setattr(budget_kernel, "CHECK_EVERY", 256)
    rng = np.random.default_rng(2)
    B = rng.normal(0, 1, (22, 12))
    tot = B.sum(axis=0) - 1.5
    count = TotalsCount(B, tot)
    prepared = Prepared.of(B, tot, 7, None)
    whole = _run(numpy_search, prepared, [prepared.root()], -1, math.inf, count)
    assert whole[3] > 600
    calls = []
    stack = [prepared.root()]
    stats: dict[str, int] = {}
    rows, found, proven = budget_kernel.compiled_search(prepared, stack, None, -1, math.inf, math.inf, count, stats,
                                                        halted=lambda: calls.append(1) or len(calls) == 2)
    assert not proven and stats["nodes"] == 2 * 256 - 1 and len(calls) == 2
    more: dict[str, int] = {}
    rest = budget_kernel.compiled_search(prepared, stack, rows, found, math.inf, math.inf, count, more)
    assert ((None if rest[0] is None else rest[0].tolist()), rest[1], rest[2]) == whole[:3]
    assert stats["nodes"] + more["nodes"] == whole[3]
    stack = [prepared.root()]
    assert not budget_kernel.compiled_search(prepared, stack, None, -1, 0.0, math.inf, count, {})[2]  # past the deadline


def test_search_takes_the_numpy_loop_for_another_count_or_when_turned_off(monkeypatch):
    B = np.array([[1.0, -2.0], [-1.0, 1.0], [0.5, -0.5]])
    tot = B.sum(axis=0)
    prepared = Prepared.of(B, tot, 2, None)
    assert budget_kernel.compiled_search(prepared, [prepared.root()], None, -1, math.inf, math.inf,
                                         lambda rows: 0, {}) is None
    monkeypatch.setenv("VISPRIV_BUDGET_KERNEL", "0")
    assert not budget_kernel.available()
    assert budget_kernel.compiled_search(prepared, [prepared.root()], None, -1, math.inf, math.inf,
                                         TotalsCount(B, tot), {}) is None
    seen = []
    monkeypatch.setattr(budget_search, "numpy_search", lambda *a, **k: seen.append(1) or (None, -1, True))
    search(prepared, [prepared.root()], None, -1, math.inf, math.inf, TotalsCount(B, tot), {})
    assert seen == [1]
    monkeypatch.delenv("VISPRIV_BUDGET_KERNEL")
    assert budget_kernel.available()
    _, found, proven = branch_and_bound(B, tot, 2, -1, math.inf)
    assert proven and found == int(np.max([np.sum(tot - B[list(r)].sum(axis=0) >= 0) for r in ([], [0], [1], [2], [0, 1], [0, 2], [1, 2])]))


def test_no_writable_cache_compiles_without_it(monkeypatch):
    """numba raises when it finds no folder to cache in; the function is then compiled uncached."""
    import numba

    njit = numba.njit
    asked = []

    def picky(*args, **kwargs):
        asked.append(kwargs.get("cache", False))
        if kwargs.get("cache"):
            raise RuntimeError("cannot cache function '_exact': no locator available")
        return njit(*args, **kwargs)

    monkeypatch.setattr(numba, "njit", picky)
    exact = compiled.jit(budget_kernel._exact)
    assert asked == [True, False]
    A = np.array([[1.0, -2.0], [-1.0, 1.5], [0.5, -0.5]])
    sums, keep = np.empty(2), np.empty(3, dtype=bool)
    assert exact(A, np.arange(3), np.zeros(0), 1, np.array([1]), 1, sums, keep) == KeptCount(A, np.arange(3))(np.array([1])) == 1


def test_compact_layout_keeps_every_place_in_its_conflict_group():
    """The compiled loop's columns without padding: the lone places first, then each larger
    group's members, those beyond a group's first word of 8 included (groups of 9 and 17)."""
    sizes = {0: 1, 1: 3, 2: 9, 3: 1, 4: 17, 5: 2}
    groups = np.concatenate([np.full(size, label) for label, size in sizes.items()])
    groups = np.random.default_rng(0).permutation(groups)
    B = np.random.default_rng(1).normal(0, 1, (5, len(groups)))
    prepared = Prepared.of(B, B.sum(axis=0), 2, groups)
    compact = budget_kernel._Compact.of(prepared)
    place_of_column = budget_search._packed_layout(groups)[0]
    places = place_of_column[compact.columns]
    assert sorted(places.tolist()) == list(range(len(groups)))  # every place once, no padding
    assert sorted(places[: compact.lone].tolist()) == np.flatnonzero(np.isin(groups, [0, 3])).tolist()
    members = [sorted(places[compact.gcols[a:b]].tolist()) for a, b in zip(compact.gptr[:-1], compact.gptr[1:])]
    assert sorted(members) == sorted(np.flatnonzero(groups == g).tolist() for g in (1, 2, 4, 5))
    assert np.array_equal(compact.Bs, prepared.Bs[:, compact.columns])
    assert np.array_equal(compact.child_bar, prepared.child_bar[:, compact.columns])
