"""CP-SAT models of problems (3)/(6) and (4)/(7) (OR-Tools ``cp_model``).

Variables as in section 4: ``z_i`` (photo kept; the budget model uses ``x_i = 1 - z_i``,
photo deleted) and ``h_j`` (place ``j`` beats the true one), the bilinear constraint
(5)/(8) as a half-reified linear row ``h_j => sum_i a_ij z_i >= -delta_j`` (CP-SAT
enforces it directly, no big-M).

**Integer scores, exact for the decision.** CP-SAT needs integer coefficients. The
advantages ``A`` (float log-probability differences) are scaled by a power of two ``s``
(so that ``s * A_ij`` is exact in floating point) with ``s * max_j sum_i |A_ij| <=
2^SCALE_BITS``, and rounded: ``a_ij = round(s A_ij)``, rounding error ``e_ij``. Per place,
``delta_j = ceil(sum_i |e_ij|) + 1`` when some ``e_ij != 0`` (the ``+ 1`` covers the
floating-point error of :func:`~vispriv.plugins.album.pruning.protected_k`'s sum, below
``N 2^-52 2^SCALE_BITS < 1`` scaled unit), else ``0``: a column that scales exactly is
decided exactly, exact ties included (they count as beating, eq. 2). Then for every keep
mask, ``protected_k``'s float test "``sum_kept A_ij >= 0``" implies
``sum_kept a_ij >= -delta_j`` (the *relaxed* row) and is implied by
``sum_kept a_ij >= delta_j`` (the *strict* row). The relaxed model's proven optimum is
therefore a bound on the float problem's optimum (an upper bound on protected-k, (4), or
on the photos kept, (3)). Every returned mask is re-checked with ``protected_k``:

* it reaches the relaxed bound -> ``optimal`` (the common case; always when every
  column scales exactly);
* otherwise (a place within ``delta_j / s`` of a tie) the strict model is solved: its
  masks are feasible for the float problem; equal to the relaxed bound -> ``optimal``,
  else the better verified mask is returned as ``feasible`` (unproven) with a warning.

**Reductions, all exact** (computed on the integers; each keeps an optimal solution):
places that cannot beat under any admissible mask are dropped, places that beat under
every admissible mask (strict row) are counted once (budget); a photo with ``a_ij >= 0``
on every open place is never deleted (budget); a place whose column is entry-wise at
least another's, threshold and always-kept photos included, beats whenever that one
does: ``h_j >= h_j'``; a photo that is entry-wise at least as good to delete as another
(identical photos: the lower index) is deleted whenever that one is, ``x_i >= x_i'``
(swapping two such photos never lowers a place's total; this also breaks the symmetry
between identical photos). The budget model adds each place's cover row: with deficit
``D_j > 0`` (kept total of all photos below ``-delta_j``), ``h_j`` needs at least ``m_j``
deletions among the photos with ``a_ij < 0``, ``m_j`` the fewest whose entries cover
``D_j``. The top-k model keeps only places whose integer
cap (supplement B) reaches the best known count, with ``h_j => sum z <= c_j``. The
heuristic masks of :mod:`vispriv.plugins.album.milp` are the hint (``AddHint``); in the
top-k model their count is also a lower bound on the photos kept.

**Determinism.** Fixed ``random_seed`` and an explicit ``num_workers`` (1 by default);
with several workers the search is interleaved (``interleave_search``), which CP-SAT runs
deterministically. The budget mask is then made minimal: deleted photos are restored,
lowest index first, while protected-k does not drop (the top-k objective already counts
deletions). A finished search returns the same mask on every run with the same OR-Tools
version and parameters, whatever the machine's load. A limit that stops the search
returns the best verified mask as ``feasible`` (never ``optimal``): a wall-clock limit
(``time_limit``) stops at a point that depends on the machine's load, a deterministic
one (``deterministic_limit``, CP-SAT's ``max_deterministic_time``) at the same point on
every machine.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from vispriv.plugins.album.pruning import PruneResult, greedy_budget, keep_mask_or_none, protected_k

#: ``s * max_j sum_i |A_ij|`` is at most ``2^SCALE_BITS`` (far inside CP-SAT's int64 sums).
SCALE_BITS = 30
#: Seed of CP-SAT's search (fixed: the same mask on every run).
RANDOM_SEED = 0
#: CP-SAT workers per album (interleaved, so deterministic, when more than one).
NUM_WORKERS = 1


@dataclass
class IntegerScores:
    """``a`` (N, M') int64: ``round(s A)``; ``delta`` (M',) int64: per-place margin."""

    a: np.ndarray
    delta: np.ndarray
    scale: float


def integer_scores(A: np.ndarray) -> IntegerScores:
    """Scale ``A`` by a power of two and round, with each place's margin (module docstring)."""
    A = np.asarray(A, dtype=np.float64)
    largest = float(np.abs(A).sum(axis=0).max(initial=0.0))
    exponent = SCALE_BITS - (int(np.ceil(np.log2(largest))) if largest > 0 else 0)
    scale = float(2.0**exponent)
    scaled = A * scale
    a = np.rint(scaled)
    err = np.abs(scaled - a).sum(axis=0)
    inexact = np.any(scaled != a, axis=0)
    delta = np.where(inexact, np.ceil(err) + 1, 0).astype(np.int64)
    return IntegerScores(a.astype(np.int64), delta, scale)


def _dominated_pairs(M: np.ndarray) -> list[tuple[int, int]]:
    """Pairs ``(p, q)`` of rows with ``M[p] >= M[q]`` entry-wise, ``p < q`` when equal, no
    cycles (a strict partial order refined by index): row ``p`` is at least as good."""
    ge = np.all(M[:, None, :] >= M[None, :, :], axis=2)
    np.fill_diagonal(ge, False)
    equal = ge & ge.T
    lower = np.arange(len(M))[:, None] < np.arange(len(M))[None, :]
    keep = ge & (~equal | lower)
    return list(zip(*(v.tolist() for v in np.nonzero(keep))))


@dataclass
class _Outcome:
    """A model's verified mask (or ``None``) and its proven optimum (``None`` unless proven).

    ``bound`` is the model's optimum in the problem's own units: protected-k (budget) or
    photos kept (top-k); for the relaxed model it bounds the float problem's optimum.
    ``infeasible`` marks a model proven to have no solution.
    """

    keep: np.ndarray | None
    bound: int | None
    infeasible: bool = False


@dataclass
class Limits:
    """What may stop one album's CP-SAT solves: a wall-clock ``deadline`` (``math.inf``:
    none) and ``deterministic`` seconds left (CP-SAT's ``max_deterministic_time``, a work
    measure that is the same on every machine; ``None``: none). ``work`` adds up the
    deterministic seconds the solves spent."""

    deadline: float
    deterministic: float | None
    num_workers: int = NUM_WORKERS
    random_seed: int = RANDOM_SEED
    work: float = 0.0

    def left(self) -> bool:
        """Whether another solve may start."""
        return time.perf_counter() < self.deadline and (self.deterministic is None or self.work < self.deterministic)

    def solve(self, model: cp_model.CpModel) -> tuple[cp_model.CpSolver, int]:
        """Solve ``model`` within what is left; returns the solver and its status."""
        solver = cp_model.CpSolver()
        p = solver.parameters
        p.random_seed = self.random_seed
        p.num_workers = self.num_workers
        p.interleave_search = self.num_workers > 1
        if math.isfinite(self.deadline):
            p.max_time_in_seconds = max(self.deadline - time.perf_counter(), 0.01)
        if self.deterministic is not None:
            p.max_deterministic_time = max(self.deterministic - self.work, 0.0)
        status = solver.Solve(model)
        self.work += solver.deterministic_time
        return solver, status


def _limits(time_limit: float | None, deterministic_limit: float | None, num_workers: int, random_seed: int) -> Limits:
    deadline = math.inf if time_limit is None else time.perf_counter() + time_limit
    return Limits(deadline, deterministic_limit, num_workers, random_seed)


def _budget_model(
    ints: IntegerScores, d: int, fixed: np.ndarray, strict: bool, hint: np.ndarray | None,
) -> tuple[cp_model.CpModel, dict[int, cp_model.IntVar], int]:
    """Model (7) on the open places: deletion literals of the candidate photos, and the
    number of places beating under every admissible mask (counted outside the model)."""
    a = ints.a
    bar = ints.delta if strict else -ints.delta  # h_j => sum_kept a_ij >= bar_j
    free = np.flatnonzero(~fixed)
    tot = a.sum(axis=0)
    most_relief = np.sort(np.minimum(a[free], 0), axis=0)[:d].sum(axis=0)
    most_harm = np.sort(np.maximum(a[free], 0), axis=0)[::-1][:d].sum(axis=0)
    always = tot - most_harm >= ints.delta  # the strict row holds under every admissible mask
    places = np.flatnonzero((tot - most_relief >= bar) & ~always)
    B = a[:, places]
    cand = free[np.any(B[free] < 0, axis=1)]
    model = cp_model.CpModel()
    x = {int(i): model.NewBoolVar(f"x{i}") for i in cand}
    h = [model.NewBoolVar(f"h{j}") for j in places]
    model.Add(sum(x.values()) <= d)
    need = bar[places] - tot[places]  # h_j => sum_deleted a_ij <= -need_j
    for col in range(len(places)):
        model.Add(sum(int(B[i, col]) * x[i] for i in x if B[i, col] != 0) <= -int(need[col])).OnlyEnforceIf(h[col])
        if need[col] > 0:
            relief = -np.cumsum(np.sort(B[cand, col]))
            fewest = int(np.searchsorted(relief, need[col])) + 1
            model.Add(sum(x[i] for i in x if B[i, col] < 0) >= fewest).OnlyEnforceIf(h[col])
    # Kept total = sum over kept candidates + the rest's constant: compare both.
    constant = tot[places] - B[cand].sum(axis=0) - bar[places]
    for p, q in _dominated_pairs(np.vstack([B[cand], constant[None, :]]).T):
        model.AddImplication(h[q], h[p])
    for p, q in _dominated_pairs(-B[cand]):
        model.AddImplication(x[int(cand[q])], x[int(cand[p])])
    model.Maximize(sum(h))
    if hint is not None:
        for i in x:
            model.AddHint(x[i], int(not hint[i]))
        kept = a[hint].sum(axis=0)[places]
        for col in range(len(places)):
            model.AddHint(h[col], int(kept[col] >= bar[places[col]]))
    return model, x, int(always.sum())


def _solve_budget(
    ints: IntegerScores, A: np.ndarray, d: int, fixed: np.ndarray, strict: bool, hint: np.ndarray | None,
    limits: Limits,
) -> _Outcome:
    model, x, n_always = _budget_model(ints, d, fixed, strict, hint)
    solver, status = limits.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return _Outcome(None, None)
    keep = np.ones(len(A), dtype=bool)
    keep[[i for i in x if solver.Value(x[i])]] = False
    bound = n_always + int(round(solver.ObjectiveValue())) if status == cp_model.OPTIMAL else None
    return _Outcome(keep, bound)


def _best(A: np.ndarray, masks: list[np.ndarray | None], value) -> np.ndarray | None:
    """The mask of highest ``value`` (first on ties), ``None`` if there is none."""
    masks = [m for m in masks if m is not None]
    return max(masks, key=value) if masks else None


def _fewest_deletions(A: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Restore deleted photos, lowest index first, while protected-k does not drop: the
    returned set is minimal (no deletion can be undone) and a function of ``keep`` alone."""
    keep = keep.copy()
    target = protected_k(A, keep)
    for i in np.flatnonzero(~keep):
        keep[i] = True
        if protected_k(A, keep) < target:
            keep[i] = False
    return keep


def cpsat_budget(
    A: np.ndarray, d: int, fixed=None, time_limit: float | None = 60.0, hints: list[np.ndarray | None] = (),
    num_workers: int = NUM_WORKERS, random_seed: int = RANDOM_SEED, deterministic_limit: float | None = None,
) -> PruneResult:
    """Maximum protected-k under a budget of ``d`` deletions (4)/(7) by CP-SAT.

    ``hints``: keep masks to start from (those over the budget or deleting a fixed photo
    are skipped); the best is CP-SAT's hint and the fallback. ``optimal`` only when a
    verified mask reaches the relaxed model's proven optimum (module docstring); the mask
    returned deletes no photo it could restore without lowering protected-k.
    ``time_limit`` (wall-clock seconds) and ``deterministic_limit`` (CP-SAT deterministic
    seconds, the same stop on every machine), ``None``: none; ``work`` of the result is
    the deterministic seconds spent.
    """
    fixed = keep_mask_or_none(fixed, len(A))
    start = time.perf_counter()
    limits = _limits(time_limit, deterministic_limit, num_workers, random_seed)
    d = min(int(d), int((~fixed).sum()))
    ints = integer_scores(A)
    admissible = [m for m in [np.ones(len(A), dtype=bool), *hints] if m is not None and (~m).sum() <= d and not np.any(fixed & ~m)]
    hint = _best(A, admissible, lambda m: protected_k(A, m))
    relaxed = _solve_budget(ints, A, d, fixed, False, hint, limits)
    keep = _best(A, [relaxed.keep, hint], lambda m: protected_k(A, m))
    if relaxed.bound is not None and protected_k(A, keep) < relaxed.bound and limits.left():
        strict = _solve_budget(ints, A, d, fixed, True, keep, limits)
        keep = _best(A, [strict.keep, keep], lambda m: protected_k(A, m))
    proven = relaxed.bound is not None and protected_k(A, keep) >= relaxed.bound
    if relaxed.bound is not None and not proven:
        warnings.warn("CP-SAT: a place ties within the integer scaling's margin; budget result not proven optimal", stacklevel=2)
    status = "optimal" if proven else "feasible"
    return PruneResult(_fewest_deletions(A, keep), status, time.perf_counter() - start, limits.work)


def _relaxed_caps(ints: IntegerScores, fixed: np.ndarray, bar: np.ndarray) -> np.ndarray:
    """Per place, the most photos keepable with ``sum_kept a_ij >= bar_j`` (supplement B on
    the integers; ``-1``: never), fixed photos always kept."""
    a = ints.a
    base = a[fixed].sum(axis=0)
    free = np.sort(a[~fixed], axis=0)[::-1]
    totals = base[None, :] + np.vstack([np.zeros((1, a.shape[1]), dtype=np.int64), np.cumsum(free, axis=0)])
    ok = totals >= bar[None, :]
    last = np.where(ok.any(axis=0), ok.shape[0] - 1 - np.argmax(ok[::-1], axis=0), -1)
    return np.where(last >= 0, last + int(fixed.sum()), -1)


def _solve_topk(
    ints: IntegerScores, A: np.ndarray, k: int, fixed: np.ndarray, strict: bool, hint: np.ndarray | None,
    limits: Limits,
) -> _Outcome:
    """Model (6) on the places whose cap reaches the best known count."""
    a = ints.a
    bar = ints.delta if strict else -ints.delta
    c = _relaxed_caps(ints, fixed, bar)
    lower = int(hint.sum()) if hint is not None else int(fixed.sum())
    places = np.flatnonzero(c >= lower)
    if len(places) < k:
        return _Outcome(None, None, infeasible=hint is None)
    free = np.flatnonzero(~fixed)
    base = a[fixed].sum(axis=0)[places]
    B = a[:, places]
    model = cp_model.CpModel()
    z = {int(i): model.NewBoolVar(f"z{i}") for i in free}
    h = [model.NewBoolVar(f"h{j}") for j in places]
    kept = sum(z.values())
    model.Add(sum(h) >= k)
    model.Add(kept >= lower - int(fixed.sum()))
    for col, j in enumerate(places):
        model.Add(sum(int(B[i, col]) * z[i] for i in z if B[i, col] != 0) >= int(bar[j] - base[col])).OnlyEnforceIf(h[col])
        model.Add(kept <= int(c[j]) - int(fixed.sum())).OnlyEnforceIf(h[col])
    for p, q in _dominated_pairs(np.vstack([B[free], -(bar[places] - base)[None, :]]).T):
        model.AddImplication(h[q], h[p])
    for p, q in _dominated_pairs(B[free]):
        model.AddImplication(z[int(free[q])], z[int(free[p])])
    model.Maximize(kept)
    if hint is not None:
        for i in z:
            model.AddHint(z[i], int(hint[i]))
        totals = a[hint].sum(axis=0)[places]
        for col, j in enumerate(places):
            model.AddHint(h[col], int(totals[col] >= bar[j]))
    solver, status = limits.solve(model)
    if status == cp_model.INFEASIBLE:
        return _Outcome(None, None, infeasible=hint is None)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return _Outcome(None, None)
    keep = fixed.copy()
    keep[[i for i in z if solver.Value(z[i])]] = True
    return _Outcome(keep, int(keep.sum()) if status == cp_model.OPTIMAL else None)


def cpsat_topk(
    A: np.ndarray, k: int, fixed=None, time_limit: float | None = 60.0, hints: list[np.ndarray | None] = (),
    num_workers: int = NUM_WORKERS, random_seed: int = RANDOM_SEED, deterministic_limit: float | None = None,
) -> PruneResult:
    """Fewest deletions for a top-k guarantee (3)/(6) by CP-SAT.

    ``hints``: keep masks; the best one with protected-k at least ``k`` (and keeping every
    fixed photo) is CP-SAT's hint, a lower bound (``sum z >= |hint|``) and the fallback.
    Places whose integer cap (supplement B on the relaxed rows) is below that bound are
    left out (a better solution keeps more photos than they allow); each kept place adds
    ``h_j => sum z <= c_j``. ``optimal`` only when a mask passing ``protected_k`` keeps as
    many photos as the relaxed model's proven optimum; ``infeasible`` when the relaxed
    model (a superset of the float problem) has no solution. Limits and ``work`` as in
    :func:`cpsat_budget`.
    """
    fixed = keep_mask_or_none(fixed, len(A))
    start = time.perf_counter()
    limits = _limits(time_limit, deterministic_limit, num_workers, random_seed)
    ints = integer_scores(A)
    feasible = [m for m in hints if m is not None and protected_k(A, m) >= k and not np.any(fixed & ~m)]
    hint = _best(A, feasible, lambda m: int(m.sum()))
    relaxed = _solve_topk(ints, A, k, fixed, False, hint, limits)
    if relaxed.infeasible:
        return PruneResult(None, "infeasible", time.perf_counter() - start, limits.work)
    ok = [m for m in (relaxed.keep, hint) if m is not None and protected_k(A, m) >= k]
    keep = _best(A, ok, lambda m: int(m.sum()))
    if relaxed.bound is not None and (keep is None or keep.sum() < relaxed.bound) and limits.left():
        strict = _solve_topk(ints, A, k, fixed, True, keep, limits)
        ok = [m for m in (strict.keep, keep) if m is not None and protected_k(A, m) >= k]
        keep = _best(A, ok, lambda m: int(m.sum()))
    proven = relaxed.bound is not None and keep is not None and keep.sum() >= relaxed.bound
    if relaxed.bound is not None and not proven:
        warnings.warn("CP-SAT: a place ties within the integer scaling's margin; top-k result not proven optimal", stacklevel=2)
    seconds = time.perf_counter() - start
    if keep is None:
        return PruneResult(None, "unknown", seconds, limits.work)
    return PruneResult(keep, "optimal" if proven else "feasible", seconds, limits.work)


def solve_topk(
    A: np.ndarray, k: int, fixed=None, time_limit: float | None = 60.0, num_workers: int = NUM_WORKERS,
    deterministic_limit: float | None = None,
) -> PruneResult:
    """:func:`cpsat_topk` started from the fast formulation's joint heuristics
    (:func:`vispriv.plugins.album.milp.heuristic_topk`)."""
    from vispriv.plugins.album.milp import heuristic_topk

    fixed = keep_mask_or_none(fixed, len(A))
    start = time.perf_counter()
    hint = heuristic_topk(A, k, fixed)
    result = cpsat_topk(A, k, fixed, _time_left(time_limit, start), [hint], num_workers, deterministic_limit=deterministic_limit)
    result.seconds = time.perf_counter() - start
    return result


def _time_left(time_limit: float | None, start: float) -> float | None:
    return None if time_limit is None else time_limit - (time.perf_counter() - start)


def solve_budget(
    A: np.ndarray, d: int, S_true: np.ndarray, fixed=None, time_limit: float | None = 60.0, num_workers: int = NUM_WORKERS,
    deterministic_limit: float | None = None,
) -> PruneResult:
    """:func:`cpsat_budget` started from the fast formulation's local search
    (:func:`vispriv.plugins.album.milp.heuristic_budget` from keep-all and greedy-budget;
    ``S_true`` is the true place's score column)."""
    from vispriv.plugins.album.milp import heuristic_budget

    fixed = keep_mask_or_none(fixed, len(A))
    start = time.perf_counter()
    d_free = min(int(d), int((~fixed).sum()))
    greedy = greedy_budget(np.column_stack([S_true, S_true]), 0, d_free, fixed).keep
    hint = heuristic_budget(A, d_free, fixed, [np.ones(len(A), dtype=bool), greedy])
    result = cpsat_budget(
        A, d, fixed, _time_left(time_limit, start), [hint, greedy], num_workers, deterministic_limit=deterministic_limit
    )
    result.seconds = time.perf_counter() - start
    return result
