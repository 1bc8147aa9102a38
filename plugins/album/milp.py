"""MILP formulations of problems (3) and (4) (section 4, supplement C) with cvxpy.

Two formulations of each problem, both exact:

* ``naive`` -- the paper's model: binaries ``z`` (kept photos) and ``h`` (place beats the
  true one) for every place, the bilinear constraint (5)/(8) linearised as in supplement C
  with ``w_j = h_j v_j``. The big-M ``T`` is per place and correct: ``T_j`` bounds
  ``|v_j|`` for every keep mask (the reference code's ``|N * max(A)|`` can be too small).
* ``fast`` -- this package's formulation. It rests on the exact single-place caps
  ``c_j`` (:func:`vispriv.plugins.album.pruning.caps`): a place can only beat the true one in a
  solution keeping ``T`` photos if ``c_j >= T``; the k-th largest cap bounds the optimum of
  (3) from above, and a heuristic solution bounds it from below. For (3) it decides
  "exactly T photos kept, k places beating" for T descending from that bound, on the
  places with ``c_j >= T`` only: the surrogate filters of :mod:`vispriv.plugins.album.surrogate`
  (pair tests, k-set enumeration, one LP bound per k-set) settle most levels without a
  MILP; the k-sets they cannot refute get one small MILP each, or, when there are many,
  one MILP over their places with big-Ms tightened to that cardinality, places that beat
  for every T-subset fixed, and pairwise conflict rows ``h_j + h_j' <= 1``. For (4) it
  searches the objective instead (:func:`fast_budget`): the same level check with "``N -
  d`` photos or more kept" for k descending when few places can beat, or a branch and
  bound over deletion sets (:mod:`vispriv.plugins.album.budget_search`) when many can.
  Every row and bound is implied by the original problem, so the optimum is exact.

The solver is any cvxpy MILP solver (``HIGHS`` by default); the time limit, the node limit
(what is left of the album's, :class:`~vispriv.plugins.album.solver.NodeBudget`) and a zero
MIP gap are passed to HiGHS. ``time_limit=None`` sets no wall-clock limit: the solve runs
until proven or until its node limit -- the HiGHS nodes of its MILPs, and the budget
branch and bound's own -- a stop that falls after the same nodes on every machine,
whatever its load.
"""

from __future__ import annotations

import math
import time
import warnings

import cvxpy as cp
import numpy as np

from vispriv.plugins.album.budget_search import NODE_LIMIT, KeptCount, branch_and_bound, conflict_groups
from vispriv.plugins.album.pruning import PruneResult, caps, greedy_budget, keep_mask_or_none, protected_k
from vispriv.plugins.album.solver import NodeBudget, solver_options
from vispriv.plugins.album.surrogate import (
    LP_CHUNK,
    LP_TOLERANCE,
    best_totals,
    lp_bounds,
    pair_compatibility,
    surviving_cliques,
    uniform_slack,
    worst_totals,
)

#: The first this many surviving k-sets get one small MILP each; the rest share one union MILP.
CLIQUE_MILP_LIMIT = 8
#: At most this many k-sets go through the LP bound (solved in chunks, see lp_bounds).
LP_SET_LIMIT = 4096
#: The budget heuristic also starts from the deletion masks of this many single places.
PLACE_STARTS = 8
#: fast_budget runs the descending search first up to this many candidate places, else branch and bound.
DESCEND_PLACES = 16

def _solve(problem: cp.Problem, solver: str, time_limit: float | None, nodes: NodeBudget | None = None) -> str:
    """Solve and map cvxpy's status to ``optimal`` / ``feasible`` / ``infeasible`` / ``unknown``.

    ``nodes``: the album's HiGHS node budget; the solve gets what is left of it and is charged
    what it explored (``unknown`` without solving when nothing is left).
    """
    nodes = nodes or NodeBudget()
    if nodes.exhausted():
        return "unknown"
    opts = solver_options(solver, time_limit, nodes.left())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            problem.solve(solver=solver, **opts)
    except cp.error.SolverError:
        return "unknown"
    nodes.charge(problem.solver_stats.extra_stats if problem.solver_stats is not None else None)
    status = problem.status
    if status == cp.OPTIMAL:
        return "optimal"
    if status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        return "infeasible"
    if status in (cp.USER_LIMIT, cp.OPTIMAL_INACCURATE) and problem.variables()[0].value is not None:
        return "feasible"
    return "unknown"


def _keep_from(z: cp.Variable, fixed: np.ndarray, free: np.ndarray) -> np.ndarray:
    keep = fixed.copy()
    keep[free] = np.asarray(z.value).reshape(-1) > 0.5
    return keep


def _abs_bound(A: np.ndarray) -> np.ndarray:
    """Per-place ``T_j >= |v_j|`` for every keep mask (supplement C, correct big-M)."""
    return np.maximum(np.clip(A, 0, None).sum(axis=0), -np.clip(A, None, 0).sum(axis=0)) + 1e-9


# -- naive (paper) ------------------------------------------------------------------------


def _naive_model(A: np.ndarray, fixed: np.ndarray):
    n, m = A.shape
    z = cp.Variable(n, boolean=True)
    h = cp.Variable(m, boolean=True)
    w = cp.Variable(m)
    T = _abs_bound(A)
    v = A.T @ z
    cons = [
        w >= 0,
        w >= -cp.multiply(T, h),
        w <= cp.multiply(T, h),
        w >= v - cp.multiply(T, 1 - h),
        w <= v + cp.multiply(T, 1 - h),
    ]
    if fixed.any():
        cons.append(z[np.flatnonzero(fixed)] == 1)
    return z, h, cons


def naive_topk(
    A: np.ndarray, k: int, fixed=None, solver: str = "HIGHS", time_limit: float | None = 60.0, node_limit: int | None = None
) -> PruneResult:
    """Problem (6) with the supplement-C linearisation over all places (``node_limit``: HiGHS nodes)."""
    fixed = keep_mask_or_none(fixed, len(A))
    start = time.perf_counter()
    nodes = NodeBudget(node_limit)
    z, h, cons = _naive_model(A, fixed)
    problem = cp.Problem(cp.Maximize(cp.sum(z)), [*cons, cp.sum(h) >= k])
    status = _solve(problem, solver, time_limit, nodes)
    keep = _keep_from(z, fixed, np.arange(len(A))) if status in ("optimal", "feasible") else None
    if keep is not None and protected_k(A, keep) < k:
        keep, status = None, "unknown"
    return PruneResult(keep, status, time.perf_counter() - start, float(nodes.spent))


def naive_budget(
    A: np.ndarray, d: int, fixed=None, solver: str = "HIGHS", time_limit: float | None = 60.0, node_limit: int | None = None
) -> PruneResult:
    """Problem (7) with the supplement-C linearisation over all places (``node_limit``: HiGHS nodes)."""
    fixed = keep_mask_or_none(fixed, len(A))
    start = time.perf_counter()
    nodes = NodeBudget(node_limit)
    z, h, cons = _naive_model(A, fixed)
    problem = cp.Problem(cp.Maximize(cp.sum(h)), [*cons, cp.sum(1 - z) <= d])
    status = _solve(problem, solver, time_limit, nodes)
    keep = _keep_from(z, fixed, np.arange(len(A))) if status in ("optimal", "feasible") else None
    if keep is not None and (~keep).sum() > d:
        keep, status = None, "unknown"
    return PruneResult(keep, status, time.perf_counter() - start, float(nodes.spent))


# -- fast (this package) --------------------------------------------------------------------


def _pair_conflicts(A: np.ndarray, fixed: np.ndarray, J: np.ndarray, T: int) -> list[tuple[int, int]]:
    """Pairs (positions in J) that cannot both beat the true place with ``T`` photos kept."""
    compatible = pair_compatibility(A, fixed, J, T)
    if compatible is None:
        return []
    a, b = np.nonzero(np.triu(~compatible, k=1))
    return list(zip(a.tolist(), b.tolist()))


def _joint_heuristic(A: np.ndarray, K: np.ndarray, fixed: np.ndarray) -> np.ndarray | None:
    """Keep mask making every place of ``K`` beat the true one: delete, then add back."""
    keep = np.ones(len(A), dtype=bool)
    sub = A[:, K]
    while True:
        total = sub[keep].sum(axis=0)
        bad = total < 0
        if not bad.any():
            break
        cand = np.flatnonzero(keep & ~fixed)
        if len(cand) == 0:
            return None
        gain = np.clip(-sub[cand][:, bad], None, -total[bad]).sum(axis=1)
        keep[cand[np.argmax(gain)]] = False
    for i in np.argsort(-sub.sum(axis=1)):
        if not keep[i]:
            keep[i] = True
            if np.any(sub[keep].sum(axis=0) < 0):
                keep[i] = False
    return keep


def heuristic_topk(A: np.ndarray, k: int, fixed: np.ndarray, extra: list[np.ndarray] = ()) -> np.ndarray | None:
    """Best feasible keep mask among joint heuristics on a few candidate place sets."""
    c = caps(A, fixed)
    totals = A.sum(axis=0)
    candidates = []
    for order in (np.argsort(-c, kind="stable"), np.argsort(-totals, kind="stable")):
        for shift in range(3):
            K = order[shift : shift + k] if shift == 0 else np.concatenate([order[: k - 1], order[k - 1 + shift : k + shift]])
            if len(K) == k:
                candidates.append(_joint_heuristic(A, K, fixed))
    best = None
    for keep in [*candidates, *extra]:
        if keep is not None and protected_k(A, keep) >= k and (best is None or keep.sum() > best.sum()):
            best = keep
    return best


def _cardinality(z: cp.Variable, t_free: int, at_least: bool):
    """``sum z = t_free`` (top-k levels) or ``sum z >= t_free`` (deletion budget)."""
    return cp.sum(z) >= t_free if at_least else cp.sum(z) == t_free


def _union_model(
    Af: np.ndarray, base: np.ndarray, open_J: np.ndarray, bigm: np.ndarray, need: int, t_free: int, conflicts: list[tuple[int, int]], at_least: bool
):
    """Feasibility of "keep ``t_free`` free photos (or more), ``need`` places of ``open_J`` beating"."""
    z = cp.Variable(len(Af), boolean=True)
    h = cp.Variable(len(open_J), boolean=True)
    cons = [
        _cardinality(z, t_free, at_least),
        Af[:, open_J].T @ z + base[open_J] >= -cp.multiply(bigm, 1 - h),
        cp.sum(h) >= need,
    ]
    if conflicts:
        a, b = np.array(conflicts).T
        cons.append(h[a] + h[b] <= 1)
    return cp.Problem(cp.Maximize(0), cons), z


def _clique_model(Af: np.ndarray, base: np.ndarray, places: np.ndarray, t_free: int, at_least: bool):
    """Feasibility of "keep ``t_free`` free photos (or more) with every place of ``places`` beating"."""
    z = cp.Variable(len(Af), boolean=True)
    cons = [_cardinality(z, t_free, at_least), Af[:, places].T @ z + base[places] >= 0]
    return cp.Problem(cp.Maximize(0), cons), z


def _check_level(
    A: np.ndarray, k: int, fixed: np.ndarray, T: int, c: np.ndarray, solver: str, deadline: float, at_least: bool = False,
    nodes: NodeBudget | None = None,
) -> tuple[str, np.ndarray | None]:
    """Is there a keep mask with exactly ``T`` photos (``T`` or more with ``at_least``) and
    ``k`` places beating the true one?

    Returns ``("feasible", keep)``, ``("infeasible", None)`` (proven) or ``("unknown", None)``
    (time or node limit, or solver failure; ``nodes``: the album's HiGHS node budget). The surrogate filters of :mod:`vispriv.plugins.album.surrogate`
    run first (the LP bound for at most :data:`LP_SET_LIMIT` sets); only sets of places
    they cannot refute reach a MILP: one small MILP for each of the first
    :data:`CLIQUE_MILP_LIMIT` (most promising first, see :func:`_unrefuted_sets`), then one
    MILP over the union of the remaining sets' places. Top-k (3) asks with ``T`` exact,
    the deletion budget (4) with ``T = N - d`` and ``at_least``.
    """
    free = np.flatnonzero(~fixed)
    n_fixed = len(A) - len(free)
    J = np.flatnonzero(c >= T)
    if len(J) < k or n_fixed > T:
        return "infeasible", None
    t_free = T - n_fixed
    base = A[fixed].sum(axis=0)
    Af = A[free]
    worst = worst_totals(A[:, J], fixed, T, at_least)
    always = worst >= 0
    if always.sum() >= k:
        keep = fixed.copy()
        keep[free[:t_free]] = True
        return "feasible", keep

    def run(model: tuple) -> tuple[str, np.ndarray | None]:
        return _run_model(model, A, k, fixed, free, T, solver, deadline, at_least, nodes)

    def union(places: np.ndarray):
        pos = np.searchsorted(J, places)
        is_open = ~always[pos]
        open_J = places[is_open]
        conflicts = _pair_conflicts(A, fixed, open_J, T)
        return _union_model(Af, base, open_J, -worst[pos][is_open], k - int(always[pos].sum()), t_free, conflicts, at_least)

    cliques = surviving_cliques(A, fixed, J, T, k)
    if cliques is None:
        return run(union(J))
    rest: list[np.ndarray] = []
    tried = 0
    for K in _unrefuted_sets(A, fixed, J, cliques, T, solver, at_least):
        if tried == CLIQUE_MILP_LIMIT:
            rest.append(K)
            continue
        tried += 1
        status, keep = run(_clique_model(Af, base, J[K], t_free, at_least))
        if status != "infeasible":
            return status, keep
    if not rest:
        return "infeasible", None
    # Any solution's beating set has a k-subset among the sets not refuted so far.
    return run(union(J[np.unique(np.concatenate(rest))]))


def _unrefuted_sets(A: np.ndarray, fixed: np.ndarray, J: np.ndarray, cliques: list[np.ndarray], T: int, solver: str, at_least: bool):
    """Surviving k-sets that the LP bound cannot refute, most promising first, lazily.

    Sets are ordered by the slack of their uniform average (its best top-``T`` total) and
    bounded by the LP in chunks of :data:`vispriv.plugins.album.surrogate.LP_CHUNK`; within a chunk
    the best LP bound comes first. Beyond :data:`LP_SET_LIMIT` sets the LP is skipped.
    """
    order = np.argsort(-uniform_slack(A, fixed, J, cliques, T, at_least), kind="stable")
    cliques = [cliques[i] for i in order]
    if len(cliques) > LP_SET_LIMIT:
        yield from cliques
        return
    for start in range(0, len(cliques), LP_CHUNK):
        chunk = cliques[start : start + LP_CHUNK]
        bounds = lp_bounds(A, fixed, J, chunk, T, solver, at_least)
        for i in np.argsort(-bounds, kind="stable"):
            if bounds[i] >= -LP_TOLERANCE:
                yield chunk[i]


def _run_model(
    model: tuple, A: np.ndarray, k: int, fixed: np.ndarray, free: np.ndarray, T: int, solver: str, deadline: float,
    at_least: bool = False, nodes: NodeBudget | None = None,
) -> tuple[str, np.ndarray | None]:
    """Solve one feasibility model: a verified solution, ``infeasible``, or ``unknown``."""
    problem, z = model
    status = _solve(problem, solver, deadline - time.perf_counter(), nodes)
    if status == "optimal":
        keep = _keep_from(z, fixed, free)
        kept_ok = keep.sum() >= T if at_least else keep.sum() == T
        if kept_ok and protected_k(A, keep) >= k:
            return "feasible", keep
        return "unknown", None
    return ("infeasible", None) if status == "infeasible" else ("unknown", None)


def fast_topk(
    A: np.ndarray, k: int, fixed=None, solver: str = "HIGHS", time_limit: float | None = 60.0, warm: np.ndarray | None = None,
    node_limit: int | None = None,
) -> PruneResult:
    """Exact minimum deletions for a top-k guarantee (3) by descending-cardinality search
    (``time_limit=None``: no wall-clock limit; ``node_limit``: HiGHS branch-and-bound nodes
    over all the album's MILPs, a stop at the same point on every machine, reported in
    ``work``; ``None``: none)."""
    fixed = keep_mask_or_none(fixed, len(A))
    start = time.perf_counter()
    deadline = _deadline(start, time_limit)
    nodes = NodeBudget(node_limit)
    c = caps(A, fixed)
    upper = int(np.sort(c)[::-1][k - 1])
    best = heuristic_topk(A, k, fixed, [warm] if warm is not None else [])
    lower = int(best.sum()) if best is not None else int(fixed.sum()) - 1
    proven = True
    for T in range(upper, lower, -1):
        if time.perf_counter() >= deadline:
            proven = False
            break
        status, keep = _check_level(A, k, fixed, T, c, solver, deadline, nodes=nodes)
        if status == "feasible":
            best = keep
            break
        if status == "unknown":
            proven = False
            break
    seconds, work = time.perf_counter() - start, float(nodes.spent)
    if best is None:
        return PruneResult(None, "infeasible" if proven else "unknown", seconds, work)
    return PruneResult(best, "optimal" if proven else "feasible", seconds, work)


def _deadline(start: float, time_limit: float | None) -> float:
    """``start + time_limit``, or ``math.inf`` (no wall-clock limit) for ``None``."""
    return math.inf if time_limit is None else start + time_limit


def _place_starts(A: np.ndarray, d: int, fixed: np.ndarray, n_starts: int = PLACE_STARTS) -> list[np.ndarray]:
    """For the places closest to beating (best total after ``d`` deletions), the mask that
    deletes the ``d`` free photos most against each of them (supplement B's order)."""
    free = np.flatnonzero(~fixed)
    if len(free) == 0 or d == 0:
        return []
    slack = best_totals(A, fixed, len(A) - d, at_least=True)
    starts = []
    for j in np.argsort(-slack, kind="stable")[:n_starts]:
        keep = np.ones(len(A), dtype=bool)
        keep[free[np.argsort(A[free, j], kind="stable")[:d]]] = False
        starts.append(keep)
    return starts


def heuristic_budget(A: np.ndarray, d: int, fixed: np.ndarray, starts: list[np.ndarray], max_moves: int = 200) -> np.ndarray:
    """Best keep mask (at most ``d`` deletions) by steepest-ascent local search on protected-k.

    From each start mask (those over the budget or deleting a fixed photo are skipped),
    the best of all single moves -- delete one more photo, restore one, or swap a deleted
    photo for a kept one -- is taken while it strictly raises the number of beating
    places. Only a lower bound for :func:`fast_budget`; the exact search proves the rest.
    """
    best = np.ones(len(A), dtype=bool)
    for begin in [*starts, *_place_starts(A, d, fixed)]:
        if begin is None or (~begin).sum() > d or np.any(fixed & ~begin):
            continue
        keep = begin.copy()
        for _ in range(max_moves):
            totals = A[keep].sum(axis=0)
            score = int(np.sum(totals >= 0))
            kept = np.flatnonzero(keep & ~fixed)
            gone = np.flatnonzero(~keep)
            moves: list[tuple[int, list[int]]] = []
            if len(gone) < d and len(kept):
                delete = np.sum(totals[None, :] - A[kept] >= 0, axis=1)
                moves.append((int(delete.max()), [int(kept[np.argmax(delete)])]))
            if len(gone):
                restore = np.sum(totals[None, :] + A[gone] >= 0, axis=1)
                moves.append((int(restore.max()), [int(gone[np.argmax(restore)])]))
                if len(kept):
                    swap = np.sum(totals[None, None, :] - A[kept][:, None, :] + A[gone][None, :, :] >= 0, axis=2)
                    a, b = np.unravel_index(np.argmax(swap), swap.shape)
                    moves.append((int(swap[a, b]), [int(kept[a]), int(gone[b])]))
            value, flip = max(moves, key=lambda m: m[0], default=(score, []))
            if value <= score:
                break
            keep[flip] = ~keep[flip]
        if protected_k(A, keep) > protected_k(A, best):
            best = keep
    return best


def _descend_budget(
    A: np.ndarray, d: int, fixed: np.ndarray, c: np.ndarray, best: np.ndarray, solver: str, deadline: float,
    nodes: NodeBudget | None = None,
) -> tuple[np.ndarray, bool]:
    """Descending search over the objective: for ``k`` from the number of places with
    ``c_j >= N - d`` down, "``N - d`` photos or more kept, ``k`` places beating" (its MILPs
    charged to ``nodes``)."""
    t_min = len(A) - d
    for k in range(int(np.sum(c >= t_min)), protected_k(A, best), -1):
        if time.perf_counter() >= deadline:
            return best, False
        status, keep = _check_level(A, k, fixed, t_min, c, solver, deadline, at_least=True, nodes=nodes)
        if status == "feasible":
            return keep, True
        if status == "unknown":
            return best, False
    return best, True


def _search_budget(
    A: np.ndarray, d: int, fixed: np.ndarray, c: np.ndarray, best: np.ndarray, deadline: float,
    node_limit: int | None = NODE_LIMIT, stats: dict[str, int] | None = None, workers: int = 1,
) -> tuple[np.ndarray, bool]:
    """Branch and bound over deletion sets (:mod:`vispriv.plugins.album.budget_search`) on the
    open places (neither beating nor losing under every admissible mask), with the pair
    conflicts of the surrogate test at ``N - d`` grouped into cliques for the bound;
    ``node_limit`` (``None``: the deadline alone), ``stats`` (nodes expanded) and ``workers``
    as in :func:`vispriv.plugins.album.budget_search.branch_and_bound`."""
    t_min = len(A) - d
    J = np.flatnonzero(c >= t_min)
    places = J[worst_totals(A[:, J], fixed, t_min, at_least=True) < 0]
    relief = np.minimum(A[:, places], 0.0).sum(axis=1)
    cand = np.flatnonzero(~fixed & (relief < 0))
    cand = cand[np.argsort(relief[cand], kind="stable")]
    groups = conflict_groups(pair_compatibility(A, fixed, places, t_min), len(places))
    count = KeptCount(A[:, places], cand)
    rows, _, proven = branch_and_bound(
        A[cand][:, places], A[:, places].sum(axis=0), d, protected_k(A[:, places], best), deadline,
        node_limit=node_limit, groups=groups, count=count, stats=stats, workers=workers,
    )
    return (best if rows is None else count.keep(rows)), proven


def fast_budget(
    A: np.ndarray,
    d: int,
    S_true: np.ndarray,
    fixed=None,
    solver: str = "HIGHS",
    time_limit: float | None = 60.0,
    warm: np.ndarray | None = None,
    descend_places: int = DESCEND_PLACES,
    node_limit: int | None = None,
    workers: int = 1,
) -> PruneResult:
    """Exact maximum protected-k under a budget of ``d`` deletions (4).

    With ``t = N - d`` (fewer deletions if fewer photos are free), only places whose
    single-place cap ``c_j >= t`` (supplement B) can beat under an admissible mask: their
    count bounds the optimum from above. The local search of :func:`heuristic_budget`
    from keep-all, greedy-budget (``S_true`` is the true place's score column), ``warm``
    and single-place deletion masks bounds it from below. Then two exact searches:

    * few candidate places (at most ``descend_places``): the descending search over the
      objective (:func:`_descend_budget`): the top-k surrogate filters in their "at least
      ``t`` kept" form refute most levels without a MILP, the rest go to lazy per-set
      MILPs; the first feasible ``k`` is the optimum;
    * many (user albums: often over a hundred): branch and bound over deletion sets
      (:func:`vispriv.plugins.album.budget_search.branch_and_bound`), whose per-place
      bound needs no LP.

    ``node_limit`` (``None``: the defaults below) caps the branch and bound's nodes
    wherever it runs, and, separately, the HiGHS nodes of the descending search's MILPs
    (:class:`~vispriv.plugins.album.solver.NodeBudget`); a branch and bound it stops is final
    (the descending search is not tried after it), so with ``time_limit=None`` the result --
    mask, status and ``work``, the nodes of both -- is the same on every machine, whatever
    its load. Without it: if the
    descending search runs first and stops unproven (time limit, solver failure), the
    branch and bound gets the time left, and at most
    :data:`vispriv.plugins.album.budget_search.NODE_LIMIT` nodes. Run first (many
    places), the branch and bound has the time limit only: a node limit would hand the rest
    of the time to the descending search over those many places, which has not settled an
    album that the branch and bound could not (docs/benchmarks.md). A time or node limit
    that cuts the search returns the best mask found as ``feasible``, never ``optimal``.

    ``workers > 1``: the branch and bound run first (many places) goes on in that many
    processes after its first :data:`vispriv.plugins.album.parallel_search.SPLIT_AFTER` nodes
    (:mod:`vispriv.plugins.album.parallel_search`): a proof gives the same mask and status as
    with one; ``work`` is the split search's nodes, the same for any ``workers > 1``, and
    ``node_limit`` counts them. The branch and bound run after the descending search stays in
    this process.
    """
    fixed = keep_mask_or_none(fixed, len(A))
    start = time.perf_counter()
    deadline = _deadline(start, time_limit)
    d = min(int(d), int((~fixed).sum()))
    c = caps(A, fixed)
    greedy = greedy_budget(np.column_stack([S_true, S_true]), 0, d, fixed).keep
    best = heuristic_budget(A, d, fixed, [np.ones(len(A), dtype=bool), greedy, warm])
    proven = protected_k(A, best) >= int(np.sum(c >= len(A) - d))
    stats: dict[str, int] = {}
    nodes = NodeBudget(node_limit)
    later_limit = NODE_LIMIT if node_limit is None else node_limit
    searches = [
        lambda keep: _descend_budget(A, d, fixed, c, keep, solver, deadline, nodes),
        lambda keep: _search_budget(A, d, fixed, c, keep, deadline, later_limit, stats),
    ]
    if np.sum(c >= len(A) - d) > descend_places:
        searches = [lambda keep: _search_budget(A, d, fixed, c, keep, deadline, node_limit, stats, workers)]
        if node_limit is None:
            searches.append(lambda keep: _descend_budget(A, d, fixed, c, keep, solver, deadline, nodes))
    for search in searches:
        if proven or time.perf_counter() >= deadline:
            break
        best, proven = search(best)
    work = float(stats.get("nodes", 0) + nodes.spent)
    return PruneResult(best, "optimal" if proven else "feasible", time.perf_counter() - start, work)
