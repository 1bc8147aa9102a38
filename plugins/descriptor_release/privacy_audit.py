"""Attack-agnostic empirical privacy audit of mechanisms whose release is a finite set.

None of the papers ships one; the check follows the standard DP-auditing recipe (the
definition of eps-LDP, LDP-Feat (ICCV 2023) Eq. (3)): a mechanism M is eps-LDP only if, for any two
inputs x1, x2 and any event E of its outputs, ``Pr[M(x1) in E] <= e^eps Pr[M(x2) in E]``.
So any event whose probabilities can be bounded from samples gives a lower bound on the
true eps:

1. Run M on two neighbouring inputs (two different descriptors) ``n_trials`` times each.
2. On the first half of the trials (*selection*), score every candidate event -- "element
   e is in the released set" and "e is not in it", for every element e seen, and "a is in
   and b is not" for the 16 elements whose frequencies differ most, in both directions
   (x1 vs x2 and x2 vs x1) -- and keep the one with the best bound.
3. On the second half (*measurement*, independent of the choice), count the event under
   both inputs and bound ``p1`` from below and ``p2`` from above with Clopper-Pearson
   intervals at ``alpha / 2`` each: with probability >= ``1 - alpha``,
   ``eps >= eps_lb = log(p1_lo / p2_hi)``.

``eps_lb`` never exceeds a correct mechanism's eps except with probability ``alpha``; a
mechanism that leaks (one that always releases ``d'``, or affine lifting, whose subspace
contains d) gets a large ``eps_lb`` (up to about ``log(n_trials)``, the most a finite
sample can show). A defense that claims no bound is reported with a note saying so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from vispriv.harness.errors import InputError

#: M(x, n, rng) -> (n, s) int64 element ids, one released set per row (-1 pads smaller sets).
SetMechanism = Callable[[Any, int, np.random.Generator], np.ndarray]

#: Elements (most different in frequency between x1 and x2) whose pair events are scored.
PAIR_CANDIDATES = 16

NO_BOUND_NOTE = "the defense claims no epsilon bound: epsilon_empirical_lb only shows how much it leaks at least"


@dataclass(frozen=True)
class AuditResult:
    """Outcome of :func:`audit_finite_set`.

    ``epsilon_lb`` is the conservative lower bound (holds with probability ``confidence``),
    ``epsilon_point`` the plug-in estimate ``log(p1/p2)`` of the chosen event on the
    measurement half (counts smoothed by +0.5 so it stays finite), ``epsilon_ub`` the upper
    end of the same interval (``inf`` when the event never occurred under x2).
    ``violated`` is True when ``epsilon_lb`` exceeds the claimed epsilon.
    """

    epsilon_lb: float
    epsilon_point: float
    epsilon_ub: float
    claimed_epsilon: float | None
    event: str
    counts: tuple[int, int]
    n_trials: int
    confidence: float
    violated: bool
    note: str

    def metrics(self, prefix: str = "epsilon_empirical") -> dict[str, float]:
        """The scalars a matrix cell logs (names documented in docs/ldp_feat.md)."""
        return {
            f"{prefix}_lb": self.epsilon_lb,
            f"{prefix}_point": self.epsilon_point,
            f"{prefix}_violation": float(self.violated),
        }


def clopper_pearson(successes: np.ndarray, trials: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided Clopper-Pearson interval of a binomial proportion at level ``1 - alpha``.

    Vectorised over ``successes``; ``lo = 0`` at 0 successes and ``hi = 1`` at ``trials``.
    """
    from scipy.stats import beta
    k = np.asarray(successes, dtype=np.float64)
    lo = np.where(k > 0, beta.ppf(alpha / 2, np.maximum(k, 1e-300), trials - k + 1), 0.0)
    hi = np.where(k < trials, beta.ppf(1 - alpha / 2, k + 1, np.maximum(trials - k, 1e-300)), 1.0)
    return lo, hi


def _membership_counts(sets: np.ndarray) -> dict[int, int]:
    flat = sets[sets >= 0]
    values, counts = np.unique(flat, return_counts=True)
    return dict(zip(values.tolist(), counts.tolist()))


def _members(sets: np.ndarray, elements: np.ndarray) -> np.ndarray:
    """(n, len(elements)) bool: is element j in release i."""
    return np.stack([np.any(sets == e, axis=1) for e in elements.tolist()], axis=1)


def _log_ratio_bound(a: np.ndarray, b: np.ndarray, n: int, alpha: float) -> np.ndarray:
    lo_a, _ = clopper_pearson(a, n, alpha)
    _, hi_b = clopper_pearson(b, n, alpha)
    with np.errstate(divide="ignore"):
        return np.log(lo_a) - np.log(hi_b)


def _check_sets(sets: np.ndarray, n: int) -> np.ndarray:
    s = np.asarray(sets)
    if s.ndim != 2 or len(s) != n or s.dtype.kind not in "iu":
        raise InputError(f"a set mechanism must return ({n}, s) integer ids; got {s.dtype} {s.shape}")
    return s.astype(np.int64)


def audit_finite_set(
    mechanism: SetMechanism,
    x1: Any,
    x2: Any,
    n_trials: int,
    rng: np.random.Generator,
    claimed_epsilon: float | None = None,
    confidence: float = 0.95,
) -> AuditResult:
    """Empirical epsilon lower bound of ``mechanism`` on the neighbouring inputs ``x1``, ``x2``.

    Args:
        mechanism: ``M(x, n, rng)`` returning n independent releases of x as (n, s) ids.
        x1, x2: two different inputs (for LDP-Feat: two descriptors).
        n_trials: releases per input (half select the event, half measure it).
        rng: randomness of the audit.
        claimed_epsilon: the epsilon the defense claims, or ``None`` if it claims none.
        confidence: level of the Clopper-Pearson bound (``1 - alpha``).
    """
    if n_trials < 20:
        raise InputError(f"n_trials must be >= 20 for a meaningful audit; got {n_trials}")
    if not 0.5 <= confidence < 1:
        raise InputError(f"confidence must be in [0.5, 1); got {confidence}")
    alpha = 1 - confidence
    half = n_trials // 2
    runs = {}
    for name, x in (("x1", x1), ("x2", x2)):
        sets = _check_sets(mechanism(x, 2 * half, rng), 2 * half)
        runs[name] = (sets[:half], sets[half:])

    # Selection half: every membership / non-membership event, both directions, plus the
    # pair events "a in and b not in" among the PAIR_CANDIDATES most discriminating elements
    # (for an omega-subset with m > 1 the optimal event is of that form).
    sel1, sel2 = runs["x1"][0], runs["x2"][0]
    c1, c2 = _membership_counts(sel1), _membership_counts(sel2)
    elements = np.array(sorted(set(c1) | set(c2)), np.int64)
    if len(elements) == 0:
        raise InputError("the mechanism released only empty sets; nothing to audit")
    a = np.array([c1.get(e, 0) for e in elements.tolist()], np.float64)
    b = np.array([c2.get(e, 0) for e in elements.tolist()], np.float64)
    events: list[tuple[int | None, int | None]] = []
    scores: list[np.ndarray] = []
    directions: list[str] = []
    for first, (p, q) in (("x1", (a, b)), ("x2", (b, a))):
        for event_list, (num, den) in (
            ([(int(e), None) for e in elements], (p, q)),
            ([(None, int(e)) for e in elements], (half - p, half - q)),
        ):
            events += event_list
            scores.append(_log_ratio_bound(num, den, half, alpha))
            directions += [first] * len(event_list)
    top = elements[np.argsort(-np.abs(a - b), kind="stable")[:PAIR_CANDIDATES]]
    m1, m2 = _members(sel1, top), _members(sel2, top)
    for first, (p, q) in (("x1", (m1, m2)), ("x2", (m2, m1))):
        num = (p.T.astype(np.float64) @ (~p).astype(np.float64)).ravel()  # [i, j]: i in and j not in
        den = (q.T.astype(np.float64) @ (~q).astype(np.float64)).ravel()
        events += [(int(i), int(j)) for i in top for j in top]
        scores.append(_log_ratio_bound(num, den, half, alpha))
        directions += [first] * len(top) ** 2
    best = int(np.argmax(np.concatenate(scores)))
    include, exclude = events[best]
    first = directions[best]

    # Measurement half: count the chosen event afresh.
    def hits(sets: np.ndarray) -> int:
        ok = np.ones(len(sets), bool)
        if include is not None:
            ok &= np.any(sets == include, axis=1)
        if exclude is not None:
            ok &= ~np.any(sets == exclude, axis=1)
        return int(ok.sum())

    second = "x2" if first == "x1" else "x1"
    k1, k2 = hits(runs[first][1]), hits(runs[second][1])
    lo1, hi1 = clopper_pearson(np.array(k1), half, alpha)
    lo2, hi2 = clopper_pearson(np.array(k2), half, alpha)
    with np.errstate(divide="ignore"):
        eps_lb = max(0.0, float(np.log(lo1) - np.log(hi2)))
        eps_ub = float(np.log(hi1) - np.log(lo2))
    eps_point = math.log((k1 + 0.5) / (half + 1)) - math.log((k2 + 0.5) / (half + 1))
    violated = claimed_epsilon is not None and eps_lb > claimed_epsilon
    if claimed_epsilon is None:
        note = NO_BOUND_NOTE
    elif violated:
        note = f"VIOLATION: epsilon_lb={eps_lb:.3g} exceeds the claimed epsilon={claimed_epsilon:g}"
    else:
        note = f"consistent with the claimed epsilon={claimed_epsilon:g}"
    described = " and ".join(
        [f"element {include} in release"] * (include is not None) + [f"element {exclude} not in release"] * (exclude is not None)
    )
    return AuditResult(
        epsilon_lb=eps_lb,
        epsilon_point=eps_point,
        epsilon_ub=eps_ub,
        claimed_epsilon=claimed_epsilon,
        event=f"{described}; Pr under {first} vs {second}",
        counts=(k1, k2),
        n_trials=2 * half,
        confidence=confidence,
        violated=bool(violated),
        note=note,
    )


class VectorIds:
    """Encodes releases of vectors, (n, s, D), as element ids, (n, s): equal vectors, equal ids.

    The encoding persists across calls, so the runs on x1 and on x2 share it. Lets any
    defense whose release is a finite set of descriptors (float or uint8) be audited with
    :func:`audit_finite_set`: wrap its sampler as ``lambda x, n, rng: ids(sampler(x, n, rng))``.
    """

    def __init__(self) -> None:
        self._ids: dict[bytes, int] = {}

    def __call__(self, releases: np.ndarray) -> np.ndarray:
        r = np.ascontiguousarray(releases)
        if r.ndim != 3:
            raise InputError(f"releases must be (n, s, D); got {r.shape}")
        n, s, d = r.shape
        keys = r.reshape(n * s, d).view(np.dtype((np.void, r.dtype.itemsize * d))).ravel()
        unique, inverse = np.unique(keys, return_inverse=True)
        lookup = np.array([self._ids.setdefault(k.tobytes(), len(self._ids)) for k in unique], np.int64)
        return lookup[inverse.reshape(n, s)]
