"""The budget branch and bound split among worker processes (plugins/album/parallel_search.py).

The split is forced early (``SPLIT_AFTER`` of a few nodes) on small instances whose search
expands hundreds of nodes, with integer scores so that several deletion sets tie on the
count: the answer must be the one-process search's set, not just its count.
"""

from __future__ import annotations

import numpy as np
import pytest

from vispriv.plugins.album import milp, parallel_search
from vispriv.plugins.album.budget_search import KeptCount, Prepared, TotalsCount, branch_and_bound, search
from vispriv.plugins.album.pruning import advantage, protected_k


@pytest.fixture
def early_split(monkeypatch):
    monkeypatch.setattr(parallel_search, "SPLIT_AFTER", 3)
    monkeypatch.setattr(parallel_search, "SPLIT_TASKS", 6)


def _instances(count: int, seed: int):
    rng = np.random.default_rng(seed)
    while count:
        n, m, d = int(rng.integers(11, 14)), int(rng.integers(8, 13)), int(rng.integers(3, 6))
        B = rng.integers(-3, 3, (n, m)).astype(float)
        tot = B.sum(axis=0) - rng.integers(0, 4, m)
        stats: dict[str, int] = {}
        one = branch_and_bound(B, tot, d, -1, np.inf, node_limit=None, stats=stats)
        if stats["nodes"] > 20:  # the split happens after 3 nodes, so there is something to split
            count -= 1
            yield B, tot, d, one, stats["nodes"]


def _same(a, b) -> bool:
    (rows_a, count_a, proven_a), (rows_b, count_b, proven_b) = a, b
    same_rows = (rows_a is None and rows_b is None) or (
        rows_a is not None and rows_b is not None and rows_a.tolist() == rows_b.tolist())
    return same_rows and count_a == count_b and proven_a == proven_b


def test_split_search_returns_the_one_process_set(early_split):
    # From no count at all (-1): the split search improves on its starting count in the
    # subtrees, where a set found late must not win a tie with one found earlier in the
    # depth-first order.
    for B, tot, d, one, _ in _instances(5, 3):
        stats: dict[str, int] = {}
        split = branch_and_bound(B, tot, d, -1, np.inf, node_limit=None, stats=stats, workers=2)
        assert _same(split, one), (split, one)
        assert split[2] and stats["nodes"] > parallel_search.SPLIT_AFTER


@pytest.mark.slow  # four process pools (~1.6 s); the default tier keeps the split's own tests
def test_node_limit_counts_the_split_search_nodes_at_any_worker_count(early_split):
    B, tot, d, one, _ = next(_instances(1, 8))
    stats: dict[str, int] = {}
    split = branch_and_bound(B, tot, d, -1, np.inf, node_limit=None, stats=stats, workers=2)
    total = stats["nodes"]
    # A limit of exactly the split search's nodes proves it; one node fewer does not, on any
    # number of workers, with the same nodes counted and the same best set kept.
    at_limit = branch_and_bound(B, tot, d, -1, np.inf, node_limit=total, workers=3)
    assert _same(at_limit, split) and _same(at_limit, one)
    short = {}
    for workers in (2, 3):
        stats = {}
        short[workers] = (branch_and_bound(B, tot, d, -1, np.inf, node_limit=total - 1, stats=stats, workers=workers),
                          stats["nodes"])
        assert not short[workers][0][2]
    assert _same(short[2][0], short[3][0]) and short[2][1] == short[3][1]


def test_a_limit_inside_the_first_phase_stops_where_one_process_stops(early_split):
    B, tot, d, _, _ = next(_instances(1, 5))
    for limit in (1, 3):
        stats_one: dict[str, int] = {}
        stats_split: dict[str, int] = {}
        one = branch_and_bound(B, tot, d, -1, np.inf, node_limit=limit, stats=stats_one)
        split = branch_and_bound(B, tot, d, -1, np.inf, node_limit=limit, stats=stats_split, workers=2)
        assert _same(split, one) and not split[2] and stats_split["nodes"] == stats_one["nodes"] == limit


def test_fast_budget_with_workers_keeps_the_same_mask(early_split, monkeypatch):
    # More than DESCEND_PLACES places can beat, so fast_budget runs the branch and bound
    # first, and it splits; the kept-photo count (KeptCount) crosses to the workers.
    split_into = []
    searched = parallel_search._Workers.search

    def spy(self, subtrees, *args):
        split_into.append(len(subtrees))
        yield from searched(self, subtrees, *args)

    monkeypatch.setattr(parallel_search._Workers, "search", spy)
    rng = np.random.default_rng(11)
    S = rng.normal(0, 1, (18, 80))
    S[:, 0] += 0.9
    A, _ = advantage(S, 0)
    one = milp.fast_budget(A, 5, S[:, 0], time_limit=None)
    split = milp.fast_budget(A, 5, S[:, 0], time_limit=None, workers=2)
    assert one.status == split.status == "optimal" and split_into and split_into[0] > 1
    assert one.keep.tolist() == split.keep.tolist()
    assert protected_k(A, split.keep) == protected_k(A, one.keep)


def test_kept_count_is_protected_k_of_the_kept_photos():
    # Candidates [2, 0]: rows index them. Exact ties (a total of 0) count as beating.
    A = np.array([[1.0, -1.0], [-1.0, 1.0], [0.5, 0.5]])
    count = KeptCount(A, np.array([2, 0]))
    assert count.keep(np.array([1])).tolist() == [False, True, True]
    assert count(np.zeros(0, dtype=int)) == 2  # totals 0.5, 0.5
    assert count(np.array([0])) == 2  # photo 2 deleted: totals 0, 0, ties beat
    assert count(np.array([1])) == 1  # photo 0 deleted: -0.5, 1.5


def test_the_leaf_children_of_a_node_expanded_at_the_split_count(monkeypatch):
    # Deleting photos 2 and 5 (each -1 on every place) lifts the three places from -2 to a tie
    # at 0 (ties beat); every other photo hurts them. After one node (the root) the search
    # splits; the node "photo 2 deleted" is expanded there, and its leaf child {2, 5} is the
    # answer: it must come back from the split's own leaf results.
    monkeypatch.setattr(parallel_search, "SPLIT_AFTER", 1)
    B = np.ones((8, 3))
    B[[2, 5]] = -1.0
    tot = np.full(3, -2.0)
    one = branch_and_bound(B, tot, 3, -1, np.inf, node_limit=None)
    split = branch_and_bound(B, tot, 3, -1, np.inf, node_limit=None, workers=2)
    assert one[0].tolist() == [2, 5] and one[1] == 3 and one[2]
    assert _same(split, one)
    # A node limit that the nodes expanded at the split pass: no subtree is searched, the
    # split's leaf results still count, unproven. (One process proves this album in its 2
    # nodes; the split expands every node left to reach its subtrees: the split's price.)
    stats: dict[str, int] = {}
    limited = branch_and_bound(B, tot, 3, -1, np.inf, node_limit=2, stats=stats, workers=2)
    assert limited[0].tolist() == [2, 5] and limited[1] == 3 and not limited[2] and stats["nodes"] > 2
    assert _same(branch_and_bound(B, tot, 3, -1, np.inf, node_limit=2), (limited[0], 3, True))


def test_starting_the_workers_early_resumes_the_same_search(monkeypatch):
    # The processes start after START_AFTER nodes and the search goes on from its stack to
    # SPLIT_AFTER: the same split, set, status and nodes as a search that starts them at the split.
    monkeypatch.setattr(parallel_search, "SPLIT_AFTER", 6)
    monkeypatch.setattr(parallel_search, "SPLIT_TASKS", 6)
    split_at = []
    split = parallel_search._split_and_search

    def spy(prepared, stack, best_rows, best_count, count, stats, *args):
        split_at.append((stats["nodes"], len(stack)))
        return split(prepared, stack, best_rows, best_count, count, stats, *args)

    monkeypatch.setattr(parallel_search, "_split_and_search", spy)
    for B, tot, d, one, _ in _instances(2, 4):
        runs = []
        for start_after in (6, 2):
            monkeypatch.setattr(parallel_search, "START_AFTER", start_after)
            stats: dict[str, int] = {}
            runs.append((branch_and_bound(B, tot, d, -1, np.inf, node_limit=None, stats=stats, workers=2), stats["nodes"]))
        (late, late_nodes), (early, early_nodes) = runs
        assert _same(early, late) and _same(early, one) and early_nodes == late_nodes
        assert split_at[-2] == split_at[-1] and split_at[-1][0] == 6  # split after 6 nodes both times


def _held_root_peak(B: np.ndarray, tot: np.ndarray, d: int, nodes: int) -> tuple[float, list]:
    """Traced peak of a search from a root the caller keeps referencing (as a worker's task
    holds its subtree's root), stopped after ``nodes`` nodes, and that root."""
    import tracemalloc

    prepared = Prepared.of(B, tot, d, None)
    root = prepared.root()
    tracemalloc.start()
    try:
        search(prepared, [root], None, -1, np.inf, nodes, TotalsCount(B, tot), {})
        return tracemalloc.get_traced_memory()[1], root
    finally:
        tracemalloc.stop()


def test_a_held_subtree_root_does_not_keep_the_searched_nodes_alive():
    # The root's evaluation (its kids' lists) is dropped once used: with it kept, every node the
    # search evaluated stayed reachable from a root the task still held (1.4 GB per worker on
    # user album 10); now 4x the nodes, the same peak.
    rng = np.random.default_rng(0)
    B = rng.normal(-0.3, 1.0, size=(40, 120)) + rng.normal(0, 0.2, size=(1, 120))
    tot = B.sum(axis=0) - 3.0
    small, root = _held_root_peak(B, tot, 10, 5_000)
    large, _ = _held_root_peak(B, tot, 10, 20_000)
    assert root[4] is None
    assert large < small + 2**20, (small, large)
