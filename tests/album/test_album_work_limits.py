"""Work limits of the exact album solvers: a stop that falls at the same point on every
machine (branch-and-bound nodes for the ``fast`` budget search and for HiGHS's MILPs, CP-SAT
deterministic seconds), and no wall-clock stop when ``time_limit`` is ``None``."""

import types

import numpy as np
import pytest

from vispriv.harness.labels import config_label
from vispriv.plugins.album import budget_kernel, budget_search, cpsat, milp
from vispriv.plugins.album.protocol import prune, public_protocol
from vispriv.plugins.album.pruning import advantage, brute_force_budget, protected_k
from vispriv.plugins.album.solver import NodeBudget, solver_options
from vispriv.plugins.defenses.album_pruning import AlbumPruning


def _album(seed: int, n: int = 12, m: int = 40):
    rng = np.random.default_rng(seed)
    S = rng.normal(0, 2, (n, m))
    S[:, 0] += 1.0
    return S, advantage(S, 0)[0]


def _searched_albums(count: int):
    """Albums (with d) whose proof needs at least 2 branch-and-bound nodes (many places: it runs first)."""
    found = []
    for seed in range(400):
        S, A = _album(seed)
        d = 4
        full = milp.fast_budget(A, d, S[:, 0], time_limit=None, descend_places=0)
        if full.work >= 2:
            found.append((S, A, d, full))
        if len(found) == count:
            return found
    raise AssertionError("no album needs the branch and bound")


class _SlowClock:
    """A wall clock on which every reading is an hour after the previous one (a very busy machine)."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += 3600.0
        return self.now


def test_node_limit_stops_the_budget_search_after_exactly_that_many_nodes():
    """With ``W`` nodes to the proof, ``node_limit=W`` proves the optimum (brute force) and
    ``node_limit=W - 1`` stops after ``W - 1`` nodes, unproven, and the descending search is
    not tried after it; both runs are the same twice."""
    for S, A, d, full in _searched_albums(5):
        nodes = int(full.work)
        assert full.status == "optimal" and protected_k(A, full.keep) == brute_force_budget(A, d)
        enough = milp.fast_budget(A, d, S[:, 0], time_limit=None, descend_places=0, node_limit=nodes)
        assert enough.status == "optimal" and enough.work == nodes
        assert np.array_equal(enough.keep, full.keep)
        cut = [milp.fast_budget(A, d, S[:, 0], time_limit=None, descend_places=0, node_limit=nodes - 1) for _ in range(2)]
        assert [r.status for r in cut] == ["feasible", "feasible"]
        assert [r.work for r in cut] == [nodes - 1, nodes - 1]
        assert np.array_equal(cut[0].keep, cut[1].keep) and (~cut[0].keep).sum() <= d


def test_budget_result_without_time_limit_does_not_depend_on_the_clock(monkeypatch):
    """``time_limit=None``: on a clock that jumps an hour per reading the result (mask, status,
    nodes) is the one of the real clock; with a 60 s limit that clock cuts the search."""
    cases = _searched_albums(3)
    expected = [milp.fast_budget(A, d, S[:, 0], time_limit=None, descend_places=0, node_limit=10**6) for S, A, d, _ in cases]
    slow = types.SimpleNamespace(perf_counter=_SlowClock().perf_counter)
    monkeypatch.setattr(milp, "time", slow)
    monkeypatch.setattr(budget_search, "time", slow)
    monkeypatch.setattr(budget_kernel, "time", slow)
    monkeypatch.setattr(budget_search, "NODE_LIMIT", 10**6)
    for (S, A, d, _), want in zip(cases, expected):
        got = milp.fast_budget(A, d, S[:, 0], time_limit=None, descend_places=0, node_limit=10**6)
        assert (got.status, got.work) == (want.status, want.work) == ("optimal", want.work)
        assert np.array_equal(got.keep, want.keep)
        assert milp.fast_budget(A, d, S[:, 0], time_limit=60.0, descend_places=0).status == "feasible"


def test_protocol_passes_the_node_limit_to_the_budget_search():
    """The defense's ``node_limit`` and ``time_limit: null`` reach :func:`milp.fast_budget`
    through the public protocol (so an attacker replaying it gets the same stop)."""
    S, _, d, full = _searched_albums(1)[0]
    config = AlbumPruning.Config(mode="milp-budget", budget=(d + 0.5) / len(S), time_limit=None, node_limit=int(full.work) - 1)
    result = prune(S, 0, public_protocol("album-pruning", config.model_dump()), np.zeros(len(S), dtype=bool))
    assert (result.status, result.work) == ("feasible", full.work - 1)


def test_work_limits_are_left_out_of_labels_where_they_do_not_apply():
    """``node_limit`` is read by the ``fast`` and ``naive`` formulations (HiGHS's nodes and the
    budget search's), ``deterministic_limit`` by CP-SAT only; at their defaults (``None``)
    neither is named, so existing labels stay."""
    assert config_label("album-pruning", AlbumPruning.Config()) == "album-pruning"
    topk = AlbumPruning.Config(mode="milp-topk", node_limit=5, deterministic_limit=1.0)
    assert config_label("album-pruning", topk) == "album-pruning(node_limit=5)"
    greedy = AlbumPruning.Config(mode="greedy", node_limit=5, deterministic_limit=1.0)
    assert config_label("album-pruning", greedy) == "album-pruning(mode=greedy)"
    budget = AlbumPruning.Config(mode="milp-budget", node_limit=5, deterministic_limit=1.0, time_limit=None)
    assert config_label("album-pruning", budget) == "album-pruning(mode=milp-budget,node_limit=5,time_limit=None)"
    sat = AlbumPruning.Config(mode="milp-budget", formulation="cpsat", node_limit=5, deterministic_limit=1.0)
    assert config_label("album-pruning", sat) == "album-pruning(deterministic_limit=1,formulation=cpsat,mode=milp-budget)"


def test_workers_are_named_only_where_the_fast_budget_search_reads_them(monkeypatch):
    """``workers`` is read by the ``fast`` budget search alone, and reaches it from the defense."""
    fast = AlbumPruning.Config(mode="milp-budget", workers=2)
    assert config_label("album-pruning", fast) == "album-pruning(mode=milp-budget,workers=2)"
    for other in (AlbumPruning.Config(mode="milp-topk", workers=2), AlbumPruning.Config(mode="greedy-budget", workers=2),
                  AlbumPruning.Config(mode="milp-budget", formulation="cpsat", workers=2)):
        assert "workers" not in config_label("album-pruning", other)
    seen = []

    def fast_budget(*args, workers=1, **kwargs):
        seen.append(workers)
        return milp.greedy_budget(np.column_stack([args[2], args[2]]), 0, args[1])

    monkeypatch.setattr(milp, "fast_budget", fast_budget)
    S, _ = _album(3, 8, 6)
    prune(S, 0, public_protocol("album-pruning", fast.model_dump()), np.zeros(len(S), dtype=bool), workers=3)
    assert seen == [3]
    assert "workers" not in public_protocol("album-pruning", fast.model_dump())


def _highs_case(formulation: str):
    """An album whose exact top-k solve explores several HiGHS nodes (``fast``: 3 over its MILPs;
    ``naive``: one MILP of a few dozen), with the solve and its node count."""
    seed, k = (33, 8) if formulation == "fast" else (23, 8)
    S, A = _album(seed, 14, 60)
    solve = milp.fast_topk if formulation == "fast" else milp.naive_topk
    return S, A, k, solve


@pytest.mark.parametrize("formulation", ["fast", "naive"])
def test_node_limit_stops_the_highs_milps_after_exactly_that_many_nodes(formulation):
    """The album's HiGHS nodes are a work limit: unlimited, the solve proves the optimum in
    ``W`` nodes (its ``work``); ``node_limit=W + 1`` proves the same mask in the same ``W``
    nodes; ``W - 1`` stops unproven after exactly ``W - 1`` nodes, the same mask twice.
    (HiGHS stops on reaching its limit before it sees the tree empty, so ``W`` itself may stop
    unproven.)"""
    _, A, k, solve = _highs_case(formulation)
    full = solve(A, k, time_limit=None)
    nodes = int(full.work)
    assert full.status == "optimal" and nodes >= 3 and protected_k(A, full.keep) >= k
    enough = solve(A, k, time_limit=None, node_limit=nodes + 1)
    assert (enough.status, enough.work) == ("optimal", nodes) and np.array_equal(enough.keep, full.keep)
    cut = [solve(A, k, time_limit=None, node_limit=nodes - 1) for _ in range(2)]
    assert [r.status for r in cut] == ["feasible", "feasible"] and [r.work for r in cut] == [nodes - 1, nodes - 1]
    assert np.array_equal(cut[0].keep, cut[1].keep) and protected_k(A, cut[0].keep) >= k


@pytest.mark.parametrize("mode", ["milp-topk", "milp-budget"])
def test_protocol_passes_the_node_limit_to_the_highs_milps(mode):
    """``node_limit`` of a defense reaches HiGHS through the public protocol: the ``fast``
    top-k's MILPs, and the paper's ``naive`` budget MILP."""
    S, A, k, solve = _highs_case("fast" if mode == "milp-topk" else "naive")
    d = 4
    nodes = int(solve(A, k, time_limit=None).work if mode == "milp-topk" else milp.naive_budget(A, d, time_limit=None).work)
    assert nodes >= 3
    settings = {"mode": mode, "k": k, "time_limit": None, "node_limit": nodes - 1}
    if mode == "milp-budget":
        settings.update(formulation="naive", budget=(d + 0.5) / len(S))
    config = AlbumPruning.Config(**settings)
    result = prune(S, 0, public_protocol("album-pruning", config.model_dump()), np.zeros(len(S), dtype=bool))
    assert (result.status, result.work) == ("feasible", nodes - 1)


def test_node_budget_hands_each_milp_what_is_left():
    budget = NodeBudget(10)
    assert (budget.left(), budget.exhausted()) == (10, False)
    budget.charge(types.SimpleNamespace(mip_node_count=7))
    assert (budget.left(), budget.exhausted()) == (3, False)
    budget.charge(None)  # a solver without node counts charges nothing
    budget.charge(types.SimpleNamespace(mip_node_count=3))
    assert (budget.left(), budget.exhausted(), budget.spent) == (0, True, 10)
    assert NodeBudget().left() is None and not NodeBudget(None, 10**9).exhausted()
    assert solver_options("HIGHS", None, 4)["mip_max_nodes"] == 4
    assert "mip_max_nodes" not in solver_options("HIGHS", 5.0) and solver_options("SCIP", 5.0, 4) == {}


@pytest.mark.parametrize("problem", ["budget", "topk"])
def test_cpsat_deterministic_limit_is_the_same_stop_on_any_clock(problem, monkeypatch):
    """CP-SAT under ``deterministic_limit`` alone: a limit too small for the proof stops it
    unproven, and the mask, status and deterministic seconds spent are the same on the real
    clock and on one that jumps an hour per reading; without a limit it proves the optimum."""
    rng = np.random.default_rng(3)
    S = rng.normal(0, 2, (24, 100))
    S[:, 0] += 1.0
    A = advantage(S, 0)[0]

    def run(limit):
        if problem == "budget":
            return cpsat.solve_budget(A, 8, S[:, 0], time_limit=None, deterministic_limit=limit)
        return cpsat.solve_topk(A, 30, time_limit=None, deterministic_limit=limit)

    full = run(None)
    assert full.status == "optimal" and full.work > 0
    limit = full.work / 50
    real = run(limit)
    slow = types.SimpleNamespace(perf_counter=_SlowClock().perf_counter)
    monkeypatch.setattr(cpsat, "time", slow)
    late = run(limit)
    assert real.status == late.status == "feasible"
    # CP-SAT sums its deterministic time in floating point: the same stop can differ in the last ulp.
    assert real.work == pytest.approx(late.work, rel=1e-12)
    assert np.array_equal(real.keep, late.keep)


def _search_peak(A: np.ndarray, d: int, nodes: int) -> tuple[float, int]:
    """Traced peak (bytes) of a budget search stopped after ``nodes`` nodes, and the nodes it expanded."""
    import tracemalloc

    tracemalloc.start()
    try:
        result = milp.fast_budget(A, d, np.zeros(len(A)), time_limit=None, node_limit=nodes)
        return tracemalloc.get_traced_memory()[1], int(result.work)
    finally:
        tracemalloc.stop()


def test_budget_search_memory_does_not_grow_with_the_nodes_expanded():
    # The look-ahead evaluates the nodes the depth-first search pops next, so the nodes it holds
    # evaluated are those near the top of the stack: 4x the nodes, the same peak (about 7 MB here).
    # Looking ahead at the newest nodes instead ran ahead into subtrees visited much later:
    # 18 MB at 5,000 nodes, 50 MB at 20,000.
    rng = np.random.default_rng(0)
    A = rng.normal(-0.3, 1.0, size=(40, 120)) + rng.normal(0, 0.2, size=(1, 120))
    small, n_small = _search_peak(A, 10, 5_000)
    large, n_large = _search_peak(A, 10, 20_000)
    assert (n_small, n_large) == (5_000, 20_000)  # neither search finished: both ran to their limit
    assert large < small + 2**20, (small, large)


def test_stopped_by_limit_is_an_unproven_milp_solve_only():
    from vispriv.plugins.album.protocol import stopped_by_limit

    assert [stopped_by_limit("milp-topk", s) for s in ("optimal", "feasible", "unknown", "infeasible")] == [False, True, True, False]
    assert stopped_by_limit("milp-budget", "feasible")
    assert not any(stopped_by_limit(m, "feasible") for m in ("greedy", "greedy-budget", "top1-exact"))
