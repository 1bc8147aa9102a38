"""MILP formulations of problems (3) and (4) (section 4, supplement C) with cvxpy.

Two formulations of each problem, both exact:

* ``naive`` -- the paper's model: binaries ``z`` (kept photos) and ``h`` (place beats the
  true one) for every place, the bilinear constraint (5)/(8) linearised as in supplement C
  with ``w_j = h_j v_j``. The big-M ``T`` is per place and correct: ``T_j`` bounds
  ``|v_j|`` for every keep mask (the reference code's ``|N * max(A)|`` can be too small).
* ``fast`` -- this package's formulation. It rests on the exact single-place caps
  ``c_j`` (:func:`plugins.album.pruning.caps`): a place can only beat the true one in a
  solution keeping ``T`` photos if ``c_j >= T``; the k-th largest cap bounds the optimum of
  (3) from above, and a heuristic solution bounds it from below. For (3) it checks
  feasibility of "exactly T photos kept" for T descending from that bound, each check on
  the places with ``c_j >= T`` only, with big-Ms tightened to that cardinality, places
  that beat for every T-subset fixed, and pairwise conflict rows ``h_j + h_j' <= 1``
  where even the surrogate place ``(A_j + A_j') / 2`` cannot keep T photos. For (4) it
  solves one model on the places with ``c_j >= N - d``, with cap rows and the same
  conflict rows. Every row is implied by the original problem, so the optimum is exact.

The solver is any cvxpy MILP solver (``HIGHS`` by default); the time limit and a zero
MIP gap are passed to HiGHS.
"""

from __future__ import annotations

import time
import warnings

import cvxpy as cp
import numpy as np

from plugins.album.pruning import PruneResult, caps, greedy_budget, keep_mask_or_none, protected_k

PAIR_LIMIT = 120


def _solve(problem: cp.Problem, solver: str, time_limit: float) -> str:
    """Solve and map cvxpy's status to ``optimal`` / ``feasible`` / ``infeasible`` / ``unknown``."""
    opts: dict = {}
    if solver.upper() == "HIGHS":
        opts = {"time_limit": max(float(time_limit), 0.01), "mip_rel_gap": 0.0, "threads": 1}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            problem.solve(solver=solver, **opts)
    except cp.error.SolverError:
        return "unknown"
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


def naive_topk(A: np.ndarray, k: int, fixed=None, solver: str = "HIGHS", time_limit: float = 60.0) -> PruneResult:
    """Problem (6) with the supplement-C linearisation over all places."""
    fixed = keep_mask_or_none(fixed, len(A))
    start = time.perf_counter()
    z, h, cons = _naive_model(A, fixed)
    problem = cp.Problem(cp.Maximize(cp.sum(z)), [*cons, cp.sum(h) >= k])
    status = _solve(problem, solver, time_limit)
    keep = _keep_from(z, fixed, np.arange(len(A))) if status in ("optimal", "feasible") else None
    if keep is not None and protected_k(A, keep) < k:
        keep, status = None, "unknown"
    return PruneResult(keep, status, time.perf_counter() - start)


def naive_budget(A: np.ndarray, d: int, fixed=None, solver: str = "HIGHS", time_limit: float = 60.0) -> PruneResult:
    """Problem (7) with the supplement-C linearisation over all places."""
    fixed = keep_mask_or_none(fixed, len(A))
    start = time.perf_counter()
    z, h, cons = _naive_model(A, fixed)
    problem = cp.Problem(cp.Maximize(cp.sum(h)), [*cons, cp.sum(1 - z) <= d])
    status = _solve(problem, solver, time_limit)
    keep = _keep_from(z, fixed, np.arange(len(A))) if status in ("optimal", "feasible") else None
    if keep is not None and (~keep).sum() > d:
        keep, status = None, "unknown"
    return PruneResult(keep, status, time.perf_counter() - start)


# -- fast (this package) --------------------------------------------------------------------


def _pair_conflicts(A: np.ndarray, fixed: np.ndarray, J: np.ndarray, T: int) -> list[tuple[int, int]]:
    """Pairs (positions in J) whose surrogate ``(A_j + A_j')/2`` cannot keep ``T`` photos."""
    if len(J) < 2 or len(J) > PAIR_LIMIT:
        return []
    a, b = np.triu_indices(len(J), k=1)
    surrogate = 0.5 * (A[:, J[a]] + A[:, J[b]])
    bad = caps(surrogate, fixed) < T
    return list(zip(a[bad].tolist(), b[bad].tolist()))


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


def fast_topk(A: np.ndarray, k: int, fixed=None, solver: str = "HIGHS", time_limit: float = 60.0, warm: np.ndarray | None = None) -> PruneResult:
    """Exact minimum deletions for a top-k guarantee (3) by descending-cardinality search."""
    fixed = keep_mask_or_none(fixed, len(A))
    start = time.perf_counter()
    n_fixed = int(fixed.sum())
    free = np.flatnonzero(~fixed)
    c = caps(A, fixed)
    upper = int(np.sort(c)[::-1][k - 1])
    best = heuristic_topk(A, k, fixed, [warm] if warm is not None else [])
    lower = int(best.sum()) if best is not None else n_fixed - 1
    proven = True
    base = A[fixed].sum(axis=0)
    Af = A[free]
    sorted_up = np.sort(Af, axis=0)
    for T in range(upper, lower, -1):
        remaining = time_limit - (time.perf_counter() - start)
        if remaining <= 0:
            proven = False
            break
        J = np.flatnonzero(c >= T)
        if len(J) < k or T < n_fixed:
            continue
        t_free = T - n_fixed
        worst = base[J] + sorted_up[:t_free, J].sum(axis=0)
        always = worst >= 0
        if always.sum() >= k:
            keep = fixed.copy()
            keep[free[:t_free]] = True
            best = keep
            break
        z = cp.Variable(len(free), boolean=True)
        open_J = J[~always]
        h = cp.Variable(len(open_J), boolean=True)
        bigm = -worst[~always]
        cons = [
            cp.sum(z) == t_free,
            Af[:, open_J].T @ z + base[open_J] >= -cp.multiply(bigm, 1 - h),
            cp.sum(h) >= k - int(always.sum()),
        ]
        conflicts = _pair_conflicts(A, fixed, open_J, T)
        if conflicts:
            a, b = np.array(conflicts).T
            cons.append(h[a] + h[b] <= 1)
        status = _solve(cp.Problem(cp.Maximize(0), cons), solver, remaining)
        if status == "optimal":
            keep = _keep_from(z, fixed, free)
            if keep.sum() == T and protected_k(A, keep) >= k:
                best = keep
                break
            proven = False
        elif status != "infeasible":
            proven = False
            break
    seconds = time.perf_counter() - start
    if best is None:
        return PruneResult(None, "infeasible" if proven else "unknown", seconds)
    return PruneResult(best, "optimal" if proven else "feasible", seconds)


def fast_budget(A: np.ndarray, d: int, S_true: np.ndarray, fixed=None, solver: str = "HIGHS", time_limit: float = 60.0) -> PruneResult:
    """Exact maximum protected-k under a budget of ``d`` deletions (4) on the candidate places."""
    fixed = keep_mask_or_none(fixed, len(A))
    start = time.perf_counter()
    free = np.flatnonzero(~fixed)
    d = min(d, len(free))
    t_min = len(A) - d
    c = caps(A, fixed)
    J = np.flatnonzero(c >= t_min)
    greedy = greedy_budget(np.column_stack([S_true, S_true]), 0, d, fixed).keep
    best = greedy if protected_k(A, greedy) >= protected_k(A, np.ones(len(A), bool)) else np.ones(len(A), bool)
    if len(J) == 0 or protected_k(A, best) >= len(J):
        return PruneResult(best, "optimal", time.perf_counter() - start)
    base = A[fixed].sum(axis=0)
    Af = A[free]
    top_pos = np.clip(np.sort(Af[:, J], axis=0)[::-1][:d], 0, None).sum(axis=0)
    worst = base[J] + Af[:, J].sum(axis=0) - top_pos
    always = worst >= 0
    open_J = J[~always]
    z = cp.Variable(len(free), boolean=True)
    h = cp.Variable(len(open_J), boolean=True)
    n_fixed = int(fixed.sum())
    cons = [
        cp.sum(1 - z) <= d,
        Af[:, open_J].T @ z + base[open_J] >= -cp.multiply(-worst[~always], 1 - h),
        cp.sum(z) + n_fixed <= c[open_J] + len(A) * (1 - h),
    ]
    conflicts = _pair_conflicts(A, fixed, open_J, t_min)
    if conflicts:
        a, b = np.array(conflicts).T
        cons.append(h[a] + h[b] <= 1)
    problem = cp.Problem(cp.Maximize(cp.sum(h)), cons)
    status = _solve(problem, solver, time_limit)
    if status in ("optimal", "feasible"):
        keep = _keep_from(z, fixed, free)
        if (~keep).sum() <= d and protected_k(A, keep) > protected_k(A, best):
            best = keep
    final = "optimal" if status == "optimal" else "feasible"
    return PruneResult(best, final, time.perf_counter() - start)
