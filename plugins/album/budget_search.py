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
single-place relaxation of supplement B's caps. The places that can still beat are
counted once per group of pairwise-conflicting places (:func:`conflict_groups`: at most
one place of a group beats). A node whose bound does not exceed the best count found is
pruned.

Two exact reductions come first: places that beat (or cannot beat) under every
admissible deletion set are counted (dropped) once, and a photo with ``A_ij >= 0`` on every
remaining place is never deleted (dropping it from any ``D`` cannot make a place lose).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

#: The search stops (result not proven) after this many nodes.
NODE_LIMIT = 2_000_000
#: Slack (relative to the largest column magnitude) on running totals: candidates and bounds only.
TIE_TOLERANCE = 1e-9


def suffix_relief(B: np.ndarray, d: int) -> np.ndarray:
    """``R[p, r, j]``: sum of the ``r`` most negative entries (clipped at 0) of ``B[p:, j]``."""
    n, m = B.shape
    R = np.zeros((n + 1, d + 1, m))
    for p in range(n):
        ordered = np.sort(np.minimum(B[p:], 0.0), axis=0)[:d]
        R[p, 1 : len(ordered) + 1] = np.cumsum(ordered, axis=0)
        R[p, len(ordered) + 1 :] = R[p, len(ordered)]
    return R


def conflict_groups(compatible: np.ndarray | None, n_places: int) -> np.ndarray:
    """Label per place such that places sharing a label cannot all beat together (pairwise).

    A greedy partition of the conflict graph (``~compatible``, the surrogate pair test of
    :func:`vispriv.plugins.album.surrogate.pair_compatibility`) into cliques, highest degree
    first: at most one place of each clique can beat under an admissible mask, so the
    number of cliques meeting the still-possible places bounds the count. ``None`` (the
    pair test was skipped) gives every place its own label.
    """
    labels = np.full(n_places, -1)
    if compatible is None:
        return np.arange(n_places)
    conflict = ~compatible
    np.fill_diagonal(conflict, False)
    for v in np.argsort(-conflict.sum(axis=1), kind="stable"):
        if labels[v] >= 0:
            continue
        members = [v]
        labels[v] = v
        for u in np.flatnonzero(conflict[v] & (labels < 0)):
            if conflict[u, members].all():
                members.append(u)
                labels[u] = v
    return labels


def branch_and_bound(
    B: np.ndarray,
    tot: np.ndarray,
    d: int,
    best_count: int,
    deadline: float,
    node_limit: int = NODE_LIMIT,
    groups: np.ndarray | None = None,
    count: Callable[[np.ndarray], int] | None = None,
) -> tuple[np.ndarray | None, int, bool]:
    """Deletion set (row indices of ``B``) beating ``best_count`` places, if one exists.

    ``B`` (n, m): candidate photos' advantages on the open places; ``tot`` (m,): the
    places' totals with every photo kept; ``groups`` (m,): labels of :func:`conflict_groups`
    (default: one per place), the node bound being the number of groups with a place that
    can still beat. ``count(rows)`` is the exact number of places beating after deleting
    ``rows`` (default: ``tot - B[rows].sum(0) >= 0``); the caller passes its own
    (:func:`vispriv.plugins.album.pruning.protected_k` on the kept photos) so that exact
    ties (ties count as beating) are judged exactly as everywhere else. The running totals
    ``tot - removed`` only select candidates and bound nodes, with a tolerance
    :data:`TIE_TOLERANCE` (relative) on the generous side, so rounding can neither prune
    a solution nor inflate the best count.

    Returns ``(rows or None, count, proven)``: the best deletion set found with more than
    ``best_count`` places beating (``None`` if none), its count, and whether the search
    finished (so that nothing better exists).
    """
    n = len(B)
    if count is None:
        count = lambda rows: int(np.sum(tot - B[rows].sum(axis=0) >= 0))  # noqa: E731
    best_rows: np.ndarray | None = None
    if count(np.zeros(0, dtype=int)) > best_count:
        best_count, best_rows = count(np.zeros(0, dtype=int)), np.zeros(0, dtype=int)
    if n == 0 or d == 0:
        return best_rows, best_count, True
    tol = TIE_TOLERANCE * max(1.0, float(np.abs(B).sum(axis=0).max(initial=0.0)), float(np.abs(tot).max(initial=0.0)))
    groups = np.arange(len(tot)) if groups is None else np.asarray(groups)
    order, n_single, ends = _group_layout(groups)
    Bs, tots = B[:, order], tot[order]
    RT = np.ascontiguousarray(suffix_relief(Bs, d).transpose(1, 0, 2))
    stack: list[tuple[int, int, np.ndarray, tuple[int, ...]]] = [(0, len(tot), np.zeros_like(tots), ())]
    nodes = 0
    while stack:
        p, bound, removed, rows = stack.pop()
        r = d - len(rows)
        if bound <= best_count or r == 0 or p == n:
            continue
        nodes += 1
        if nodes > node_limit or (nodes % 256 == 0 and time.perf_counter() >= deadline):
            return best_rows, best_count, False
        slack = (tots - removed + tol)[None, :] - Bs[p:]
        approx = np.count_nonzero(slack >= 0, axis=1)
        if approx.max() > best_count:
            for q in np.argsort(-approx, kind="stable"):
                if approx[q] <= best_count:
                    break
                exact = count(np.array([*rows, p + q]))
                if exact > best_count:
                    best_count, best_rows = exact, np.array([*rows, p + q])
        bounds = _groups_hit(slack >= RT[r - 1, p + 1 : n + 1], n_single, ends)
        for q in np.flatnonzero(bounds > best_count)[::-1]:
            stack.append((p + int(q) + 1, int(bounds[q]), removed + Bs[p + q], (*rows, p + int(q))))
    return best_rows, best_count, True


def _group_layout(groups: np.ndarray) -> tuple[np.ndarray, int, np.ndarray]:
    """Column order for :func:`_groups_hit`: places alone in their group first, then the
    members of each larger group side by side; their count, and the last column of each
    larger group (relative to the first grouped column)."""
    _, inverse, sizes = np.unique(groups, return_inverse=True, return_counts=True)
    alone = sizes[inverse] == 1
    grouped = np.flatnonzero(~alone)
    grouped = grouped[np.argsort(inverse[grouped], kind="stable")]
    order = np.concatenate([np.flatnonzero(alone), grouped])
    tail = inverse[grouped]
    ends = np.flatnonzero(np.r_[tail[1:] != tail[:-1], True]) if len(tail) else np.zeros(0, dtype=int)
    return order, int(alone.sum()), ends


def _groups_hit(possible: np.ndarray, n_single: int, ends: np.ndarray) -> np.ndarray:
    """Per row of ``possible`` (columns in :func:`_group_layout` order), the number of groups
    with at least one possible place: a count for the lone places plus, for the larger
    groups, the groups whose running count of possible members rises."""
    hit = np.count_nonzero(possible[:, :n_single], axis=1)
    if len(ends):
        running = np.cumsum(possible[:, n_single:], axis=1, dtype=np.int32)[:, ends]
        hit += np.count_nonzero(np.diff(running, axis=1, prepend=0), axis=1)
    return hit
