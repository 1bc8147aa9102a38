"""Score algebra and the combinatorial (non-MILP) pruning algorithms.

Paper: Yang, Chakrabarti & Vorobeychik, AAAI 2020, section 2 ("Location Privacy by Selecting Images for
Deletion") and section 4. Notation used throughout this package:

* ``S`` -- per-photo log-probabilities over the M places, shape (N, M) (``S_i^j`` of eq. 1);
* ``t`` -- index of the true place;
* ``A`` -- advantage matrix, shape (N, M-1): ``A[i, j] = S_i^j - (S_i^t + theta)`` for every
  other place ``j`` (the reference code's MILP input; ``theta`` is the black-box margin
  of eq. 8, added to the true place's column);
* ``z`` -- boolean keep mask over the N photos (``z_i = 1``: kept, as in section 4).

Place ``j`` *beats* the true place when ``A[:, j] @ z >= 0`` (ties count as beating, as
eq. 2 and the reference code). The protected-k of ``z`` is the number of beating places.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import numpy as np

from vispriv.harness.errors import ConfigError, InputError


@dataclass
class PruneResult:
    """Outcome of one album's pruning.

    ``keep`` is the keep mask (``None`` when no admissible deletion set exists),
    ``status`` one of ``optimal`` (proven), ``feasible`` (heuristic, or a time or work
    limit hit), ``infeasible`` (no deletion set satisfies the constraints), ``seconds``
    the solve time, and ``work`` the solver's machine-independent measure of effort where
    it has one (``0`` otherwise): branch-and-bound nodes for the ``fast`` budget search,
    deterministic seconds for CP-SAT.
    """

    keep: np.ndarray | None
    status: str
    seconds: float = 0.0
    work: float = 0.0


def check_scores(S: np.ndarray, t: int) -> np.ndarray:
    """Validate per-photo scores ``S`` (N, M) and the true place index ``t``."""
    S = np.asarray(S, dtype=np.float64)
    if S.ndim != 2:
        raise InputError(f"scores must have shape (photos, places); got {S.shape}")
    n, m = S.shape
    if n < 2:
        raise InputError(f"album pruning needs an album of at least 2 photos; got {n}")
    if m < 2:
        raise InputError(f"album pruning needs at least 2 places; got {m}")
    if not np.all(np.isfinite(S)):
        raise InputError("scores contain NaN or -inf/+inf; log-probabilities must be finite (clip them first)")
    if not 0 <= t < m:
        raise InputError(f"true place {t} is outside 0..{m - 1}")
    return S


def check_k(k: int, n_places: int) -> None:
    """A top-k guarantee needs ``1 <= k <= M - 1`` (k other places must outrank the true one)."""
    if not 1 <= k <= n_places - 1:
        raise ConfigError(f"k={k} is impossible with {n_places} places; allowed 1 <= k <= {n_places - 1}")


def advantage(S: np.ndarray, t: int, theta: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """``A`` of the module docstring and the place index of each of its columns."""
    others = np.delete(np.arange(S.shape[1]), t)
    A = S[:, others] - (S[:, [t]] + theta)
    return A, others


def keep_mask_or_none(fixed: np.ndarray | None, n: int) -> np.ndarray:
    """Normalise the user-preference mask (``True``: the user keeps this photo, section 2)."""
    if fixed is None:
        return np.zeros(n, dtype=bool)
    fixed = np.asarray(fixed, dtype=bool).reshape(-1)
    if len(fixed) != n:
        raise InputError(f"user-preference mask has {len(fixed)} entries for an album of {n} photos")
    return fixed


def protected_k(A: np.ndarray, keep: np.ndarray) -> int:
    """Number of places that beat the true place with the kept photos (``|H(c_t, S')|``, eq. 2)."""
    return int(np.sum(A[np.asarray(keep, dtype=bool)].sum(axis=0) >= 0))


def caps(A: np.ndarray, fixed: np.ndarray | None = None) -> np.ndarray:
    """Exact single-place caps ``c_j``: most photos keepable with place ``j`` beating the true one.

    This is problem (9) of section 4 solved by sorting (supplement B), with the user's
    fixed photos always kept: the free photos enter in descending ``A[:, j]``; the prefix
    sums are unimodal, so the last prefix with a non-negative total is the cap. ``-1``
    marks places that cannot beat the true place at all under the fixed photos.
    """
    n = len(A)
    fixed = keep_mask_or_none(fixed, n)
    base = A[fixed].sum(axis=0)
    free = np.sort(A[~fixed], axis=0)[::-1]
    totals = base[None, :] + np.vstack([np.zeros((1, A.shape[1])), np.cumsum(free, axis=0)])
    ok = totals >= 0
    last = np.where(ok.any(axis=0), ok.shape[0] - 1 - np.argmax(ok[::-1], axis=0), -1)
    return np.where(last >= 0, last + int(fixed.sum()), -1)


def keep_for_place(A: np.ndarray, j: int, fixed: np.ndarray | None = None) -> np.ndarray:
    """The keep mask attaining ``caps(A, fixed)[j]`` (largest-advantage free photos kept)."""
    fixed = keep_mask_or_none(fixed, len(A))
    cap = int(caps(A[:, [j]], fixed)[0])
    keep = fixed.copy()
    free = np.flatnonzero(~fixed)
    order = free[np.argsort(-A[free, j], kind="stable")]
    keep[order[: cap - int(fixed.sum())]] = True
    return keep


def top1_exact(A: np.ndarray, fixed: np.ndarray | None = None) -> PruneResult:
    """Minimum deletions for a top-1 guarantee in O(M N log N) (section 4, supplement B)."""
    c = caps(A, fixed)
    j = int(np.argmax(c))
    if c[j] < 0:
        return PruneResult(None, "infeasible")
    return PruneResult(keep_for_place(A, j, fixed), "optimal")


def greedy_topk(S: np.ndarray, A: np.ndarray, t: int, k: int, fixed: np.ndarray | None = None) -> PruneResult:
    """The paper's greedy baseline for (3): delete by descending true-place score ``S_i^t``.

    Stops as soon as the true place leaves the top-k (checked for the configured k, not
    only top-1 as in the reference code). Photos the user keeps are skipped.
    """
    fixed = keep_mask_or_none(fixed, len(A))
    keep = np.ones(len(A), dtype=bool)
    if protected_k(A, keep) >= k:
        return PruneResult(keep, "feasible")
    for i in np.argsort(-S[:, t], kind="stable"):
        if fixed[i]:
            continue
        keep[i] = False
        if protected_k(A, keep) >= k:
            return PruneResult(keep, "feasible")
    return PruneResult(None, "infeasible")


def greedy_budget(S: np.ndarray, t: int, d: int, fixed: np.ndarray | None = None) -> PruneResult:
    """The paper's greedy baseline for (4): delete the ``d`` photos with the highest ``S_i^t``."""
    fixed = keep_mask_or_none(fixed, len(S))
    keep = np.ones(len(S), dtype=bool)
    order = [i for i in np.argsort(-S[:, t], kind="stable") if not fixed[i]]
    keep[order[:d]] = False
    return PruneResult(keep, "feasible")


def brute_force_topk(A: np.ndarray, k: int, fixed: np.ndarray | None = None) -> int:
    """Optimum of (3) as the most photos kept, by enumeration (tests only; -1 if infeasible)."""
    fixed = keep_mask_or_none(fixed, len(A))
    best = -1
    for bits in product((False, True), repeat=len(A)):
        keep = np.array(bits)
        if np.any(fixed & ~keep):
            continue
        if protected_k(A, keep) >= k:
            best = max(best, int(keep.sum()))
    return best


def brute_force_budget(A: np.ndarray, d: int, fixed: np.ndarray | None = None) -> int:
    """Optimum of (4), the largest protected-k with at most ``d`` deletions (tests only)."""
    fixed = keep_mask_or_none(fixed, len(A))
    best = -1
    for bits in product((False, True), repeat=len(A)):
        keep = np.array(bits)
        if np.any(fixed & ~keep) or (~keep).sum() > d:
            continue
        best = max(best, protected_k(A, keep))
    return best
