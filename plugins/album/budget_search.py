"""Exact branch and bound over deletion sets for the deletion budget (problem 4).

The budget problem asks for a deletion set ``D`` of free photos, ``|D| <= d``, maximising
the number of places ``j`` whose total stays non-negative: ``tot_j - sum_{i in D} A_ij >= 0``
(ties count as beating, eq. 2). Its MILP (7) is hard for the solver when many places are
in play (user albums: over a hundred places beat the true one), because the LP relaxation
of the indicator rows is weak. Here the deletion sets are enumerated instead, depth first
in increasing photo order, with a per-place bound: a node that has deleted ``D`` among
the first ``p`` candidate photos, with ``r`` deletions left, can at best make place ``j``
beat when ``tot_j - sum_D A_ij - R[p, r, j] >= 0``, where ``R[p, r, j]`` is the sum of the
``r`` most negative entries ``A_ij`` (clipped at 0) of the photos after ``p`` -- the
single-place relaxation of supplement B's caps. A node whose bound does not exceed the
best count found is pruned.

Two exact reductions come first: places that beat (or cannot beat) under every
admissible deletion set are counted (dropped) once, and a photo with ``A_ij >= 0`` on every
remaining place is never deleted (dropping it from any ``D`` cannot make a place lose).
"""

from __future__ import annotations

import time

import numpy as np

#: The search stops (result not proven) after this many nodes.
NODE_LIMIT = 2_000_000


def suffix_relief(B: np.ndarray, d: int) -> np.ndarray:
    """``R[p, r, j]``: sum of the ``r`` most negative entries (clipped at 0) of ``B[p:, j]``."""
    n, m = B.shape
    R = np.zeros((n + 1, d + 1, m))
    for p in range(n):
        ordered = np.sort(np.minimum(B[p:], 0.0), axis=0)[:d]
        R[p, 1 : len(ordered) + 1] = np.cumsum(ordered, axis=0)
        R[p, len(ordered) + 1 :] = R[p, len(ordered)]
    return R


def branch_and_bound(
    B: np.ndarray, tot: np.ndarray, d: int, best_count: int, deadline: float, node_limit: int = NODE_LIMIT
) -> tuple[np.ndarray | None, int, bool]:
    """Deletion set (row indices of ``B``) beating ``best_count`` places, if one exists.

    ``B`` (n, m): candidate photos' advantages on the open places; ``tot`` (m,): the
    places' totals with every photo kept. Returns ``(rows or None, count, proven)``:
    the best deletion set found with more than ``best_count`` places beating (``None``
    if none), its count, and whether the search finished (so that nothing better exists).
    """
    n = len(B)
    R = suffix_relief(B, d)
    best_rows: np.ndarray | None = None
    if n == 0 or d == 0:
        return best_rows, best_count, True
    stack: list[tuple[int, int, np.ndarray, tuple[int, ...]]] = [(0, len(tot), np.zeros_like(tot), ())]
    nodes = 0
    while stack:
        p, bound, removed, rows = stack.pop()
        r = d - len(rows)
        if bound <= best_count or r == 0 or p == n:
            continue
        nodes += 1
        if nodes > node_limit or (nodes % 256 == 0 and time.perf_counter() >= deadline):
            return best_rows, best_count, False
        children = removed[None, :] + B[p:]
        left = tot[None, :] - children
        counts = np.sum(left >= 0, axis=1)
        top = int(np.argmax(counts))
        if counts[top] > best_count:
            best_count, best_rows = int(counts[top]), np.array([*rows, p + top])
        bounds = np.sum(left - R[np.arange(p + 1, n + 1), r - 1] >= 0, axis=1)
        for q in np.flatnonzero(bounds > best_count)[::-1]:
            stack.append((p + int(q) + 1, int(bounds[q]), children[q], (*rows, p + int(q))))
    return best_rows, best_count, True
