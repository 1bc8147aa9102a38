"""Surrogate-place reasoning: necessary conditions for several places to beat the true one.

If the places of a set ``K`` all beat the true place under a keep mask ``z`` with ``T``
photos kept (``A[:, j] @ z >= 0`` for ``j`` in ``K``), then so does every convex
combination ``A_K w`` (``w`` in the simplex): its total on ``z`` is a weighted sum of
non-negative totals. Hence the exact single-place cap of the surrogate column ``A_K w``
(:func:`vispriv.plugins.album.pruning.caps`, supplement B) must be at least ``T``. A set for which
some surrogate has a cap below ``T`` can never be part of the beating set of a solution
that keeps ``T`` photos.

The same holds for "at least ``T`` photos kept" (the deletion budget of problem 4, ``T =
N - d``): a set beating under a mask keeping ``T' >= T`` photos has surrogate caps ``>= T'
>= T``. The caps tests are therefore shared; the LP bound and the slack take
``at_least=True`` (``sum z >= T`` instead of ``sum z = T``).

This module turns that into three filters used by the exact solvers
(:func:`vispriv.plugins.album.milp.fast_topk`, :func:`vispriv.plugins.album.milp.fast_budget`):

* :func:`pair_compatibility` -- pairs ``(j, j')`` ruled out by ``w`` in
  :data:`PAIR_WEIGHTS` (the "conflict rows" ``h_j + h_j' <= 1``);
* :func:`surviving_cliques` -- every ``k``-set of candidate places whose pairs are all
  compatible and whose every prefix average ``mean(A_K')`` keeps ``T`` photos, found by
  depth-first enumeration. An empty result proves that no solution keeps ``T`` photos; a
  non-empty one limits the MILP to the places of the surviving sets.
* :func:`lp_bounds` -- the strongest weight per surviving set: the minimum over the
  simplex of the surrogate's top-``T`` total is the LP relaxation of "keep exactly ``T``
  photos with every place of ``K`` beating" (by LP duality), solved for all sets in one
  block-separable LP per chunk of sets. A set is refuted only when the returned ``w`` re-checked in numpy
  gives a negative total, so solver tolerances cannot cut off a solution.

All are exact consequences of the problem, so solutions are never cut off; the weights
and the limits only trade filtering strength against time.
"""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import scipy.sparse as sp

from vispriv.plugins.album.pruning import caps
from vispriv.plugins.album.solver import solver_options

PAIR_WEIGHTS: tuple[float, ...] = (0.25, 0.5, 0.75)
PAIR_LIMIT = 400
CLIQUE_NODE_LIMIT = 300_000
LP_TOLERANCE = 1e-9
LP_CHUNK = 64


def pair_compatibility(A: np.ndarray, fixed: np.ndarray, J: np.ndarray, T: int, weights: tuple[float, ...] = PAIR_WEIGHTS) -> np.ndarray | None:
    """Boolean ``(len(J), len(J))`` matrix: ``False`` where a pair cannot both beat with ``T`` kept.

    ``None`` when ``J`` has more than :data:`PAIR_LIMIT` places (the pair count grows
    quadratically; the caller then goes without the filter).
    """
    n = len(J)
    if n > PAIR_LIMIT:
        return None
    compatible = np.ones((n, n), dtype=bool)
    if n < 2:
        return compatible
    a, b = np.triu_indices(n, k=1)
    for w in weights:
        surrogate = w * A[:, J[a]] + (1.0 - w) * A[:, J[b]]
        bad = caps(surrogate, fixed) < T
        compatible[a[bad], b[bad]] = False
        compatible[b[bad], a[bad]] = False
    return compatible


def surviving_cliques(
    A: np.ndarray, fixed: np.ndarray, J: np.ndarray, T: int, k: int, node_limit: int = CLIQUE_NODE_LIMIT
) -> list[np.ndarray] | None:
    """All ``k``-sets (positions in ``J``) that pass the pair and prefix-average surrogate tests.

    ``None`` when the pair matrix is unavailable or the enumeration would visit more than
    ``node_limit`` partial sets; the caller must then not rely on the result.
    """
    compatible = pair_compatibility(A, fixed, J, T)
    if compatible is None:
        return None
    columns = A[:, J]
    found: list[np.ndarray] = []
    nodes = 0
    stack: list[tuple[list[int], np.ndarray, np.ndarray]] = [([], np.zeros(len(A)), np.arange(len(J)))]
    while stack:
        clique, total, candidates = stack.pop()
        if len(clique) == k:
            found.append(np.array(clique))
            continue
        if len(clique) + len(candidates) < k:
            continue
        nodes += len(candidates)
        if nodes > node_limit:
            return None
        extended = total[:, None] + columns[:, candidates]
        passing = candidates[caps(extended, fixed) >= T] if clique else candidates
        for pos, c in enumerate(passing):
            rest = passing[pos + 1 :]
            rest = rest[compatible[c, rest]]
            stack.append(([*clique, int(c)], total + columns[:, c], rest))
    return found


def best_totals(columns: np.ndarray, fixed: np.ndarray, T: int, at_least: bool = False) -> np.ndarray:
    """Per column of ``columns`` (N, P): its largest total over keep masks with ``T`` photos
    kept, the fixed ones included (the fixed rows plus the ``T - n_fixed`` largest others).

    With ``at_least``, over masks keeping ``T`` photos or more: the positive free entries
    beyond the ``T - n_fixed`` largest are added too.
    """
    t_free = max(T - int(fixed.sum()), 0)
    ordered = np.sort(columns[~fixed], axis=0)[::-1]
    top = ordered[:t_free].sum(axis=0)
    if at_least:
        top = top + np.clip(ordered[t_free:], 0, None).sum(axis=0)
    return columns[fixed].sum(axis=0) + top


def worst_totals(columns: np.ndarray, fixed: np.ndarray, T: int, at_least: bool = False) -> np.ndarray:
    """Per column: its smallest total over the same keep masks as :func:`best_totals`.

    A column with a non-negative worst total beats the true place under every such mask.
    """
    return -best_totals(-columns, fixed, T, at_least)


def uniform_slack(A: np.ndarray, fixed: np.ndarray, J: np.ndarray, cliques: list[np.ndarray], T: int, at_least: bool = False) -> np.ndarray:
    """Per set, the best total of its uniform average ``mean(A_K)`` with ``T`` photos kept
    (``T`` or more with ``at_least``)."""
    if not cliques:
        return np.zeros(0)
    return best_totals(A[:, J[np.stack(cliques)]].mean(axis=2), fixed, T, at_least)


def lp_bounds(
    A: np.ndarray, fixed: np.ndarray, J: np.ndarray, cliques: list[np.ndarray], T: int, solver: str = "HIGHS", at_least: bool = False
) -> np.ndarray:
    """Per set, an upper bound on how much its weakest place can lead with ``T`` photos kept
    (``T`` or more with ``at_least``).

    A value below ``-LP_TOLERANCE`` certifies that the set cannot all beat the true place.

    Solves ``min_w  base_K w + sum_largest(A_free,K w, T - n_fixed)`` over the simplex for
    each set through cvxpy, :data:`LP_CHUNK` sets per LP (the sets are independent blocks,
    so the joint optimum is each set's optimum; cvxpy's compile time grows faster than
    linearly with the block count), then re-evaluates each ``w`` exactly. With ``at_least``
    the cardinality row is ``sum z >= T - n_fixed``, whose dual ``u`` is non-positive.
    """
    bounds = [_lp_chunk(A, fixed, J, cliques[i : i + LP_CHUNK], T, solver, at_least) for i in range(0, len(cliques), LP_CHUNK)]
    return np.concatenate(bounds) if bounds else np.zeros(0)


def _lp_chunk(A: np.ndarray, fixed: np.ndarray, J: np.ndarray, cliques: list[np.ndarray], T: int, solver: str, at_least: bool) -> np.ndarray:
    """:func:`lp_bounds` for one chunk of sets (one LP)."""
    unbounded = np.full(len(cliques), np.inf)
    t_free = T - int(fixed.sum())
    free = ~fixed
    if not cliques or t_free <= 0:
        return unbounded
    k = len(cliques[0])
    n_free = int(free.sum())
    blocks = [A[free][:, J[K]] for K in cliques]
    base = np.concatenate([A[fixed][:, J[K]].sum(axis=0) for K in cliques])
    w = cp.Variable(len(cliques) * k, nonneg=True)
    u = cp.Variable(len(cliques), nonpos=at_least)
    s = cp.Variable(len(cliques) * n_free, nonneg=True)
    x = sp.block_diag(blocks, format="csr") @ w
    repeat = sp.kron(sp.eye(len(cliques)), np.ones((n_free, 1)), format="csr")
    group = sp.kron(sp.eye(len(cliques)), np.ones((1, k)), format="csr")
    problem = cp.Problem(
        cp.Minimize(base @ w + t_free * cp.sum(u) + cp.sum(s)),
        [s >= x - repeat @ u, group @ w == 1],
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            problem.solve(solver=solver, **solver_options(solver))
    except cp.error.SolverError:
        return unbounded
    if w.value is None:
        return unbounded
    W = np.clip(np.asarray(w.value).reshape(len(cliques), k), 0.0, None)
    W = W / np.maximum(W.sum(axis=1, keepdims=True), 1e-300)
    surrogates = np.einsum("nck,ck->nc", A[:, J[np.stack(cliques)]], W)
    return best_totals(surrogates, fixed, T, at_least)
