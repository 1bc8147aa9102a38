"""The budget branch and bound's depth-first loop compiled by numba (optional).

:func:`vispriv.plugins.album.budget_search.search` runs here when numba is installed (the
``fast`` extra: ``pip install 'vispriv[fast]'``) and the count is one of the package's own
(:class:`~vispriv.plugins.album.budget_search.KeptCount`,
:class:`~vispriv.plugins.album.budget_search.TotalsCount`); otherwise it runs its numpy loop.
Both take the same decisions on the same arrays (:class:`~vispriv.plugins.album.budget_search.Prepared`):
a node's children are bounded against the same single-precision thresholds with the same
rounding, leaf children are counted exactly in the same order, child nodes are pushed in the
same order, so the nodes expanded, the set returned and whether it is proven are the same
(tests/album/test_budget_kernel.py compares them). What differs is the cost of a node: the
numpy loop spends most of a node's ~10 us in Python (a list per node, a few dozen array
calls per batch of nodes); here a node is under 1 us on user album 10 of examples/album.yaml,
three quarters of it its children's comparisons (docs/benchmarks.md, "The compiled budget
search"). Only the places' columns are compared (:class:`_Compact`: not the padding of the
numpy loop's words of 8), and a child whose places possible do not exceed the best count (most
of them) is settled by that one pass over its thresholds; the lone places and the conflict
groups are counted only for the others (the bound never exceeds the places possible).

The exact count of a leaf child is computed here as the count classes compute it: the kept
photos' rows summed one after the other in row order (:class:`KeptCount`, numpy's
``A[keep].sum(axis=0)``), or the deleted rows' sum subtracted from the totals
(:class:`TotalsCount`), and compared with 0 (ties beat, eq. 2).

The stack lives in arrays: a node is its first photo ``p``, bound, depth, deleted rows and
the slot of its parent's running totals. Every node on the stack at one depth is a sibling of
the others (depth first, children pushed together), so a node's own totals go to one slot per
depth, which its children read; the nodes handed in (a resumed or split search) keep slots of
their own. A stopped search hands its stack back as the numpy loop's list nodes, so that
either loop can resume it.

``VISPRIV_BUDGET_KERNEL=0`` in the environment turns the compiled loop off (the benchmark's
baseline); the results do not change.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from vispriv.harness.compiled import enabled, jit, numba

if TYPE_CHECKING:
    from vispriv.plugins.album.budget_search import Prepared

#: The compiled loop hands back to Python every this many nodes (a multiple of 256, where the
#: numpy loop looks at its clock), to look at the deadline and at ``halted``.
CHECK_EVERY = 1 << 14

_FINISHED, _AT_LIMIT, _CHECK = 0, 1, 2


def available() -> bool:
    """Whether the compiled loop runs: numba installed and ``VISPRIV_BUDGET_KERNEL`` not ``0``."""
    return enabled("VISPRIV_BUDGET_KERNEL")


def compiled_search(
    prepared: Prepared, stack: list[list], best_rows: np.ndarray | None, best_count: int,
    deadline: float, node_limit: float, count: Callable[[np.ndarray], int], stats: dict[str, int],
    halted: Callable[[], bool] | None = None,
) -> tuple[np.ndarray | None, int, bool] | None:
    """:func:`vispriv.plugins.album.budget_search.search` compiled, with the same arguments and
    result; ``None`` (nothing done) where it cannot run: numba missing or turned off, or a
    ``count`` other than the package's two."""
    from vispriv.plugins.album.budget_search import KeptCount, TotalsCount

    if not available() or type(count) not in (KeptCount, TotalsCount):
        return None
    if isinstance(count, KeptCount):
        mode, count_rows, count_index, count_tot = 1, count.A, count.cand, np.zeros(0)
    else:
        mode, count_rows, count_index, count_tot = 0, count.B, np.zeros(0, dtype=np.int64), count.tot
    d, n = prepared.d, prepared.n
    layout = _Compact.of(prepared)
    state = _Stack(len(stack) + n * (d + 1), d, layout)
    for node in stack:
        state.push(node)
    found = np.zeros(max(d, 1), dtype=np.int64)
    found_len = -1
    limit = int(min(node_limit, np.iinfo(np.int64).max // 2)) if not math.isinf(node_limit) else np.iinfo(np.int64).max // 2
    nodes, next_check, children = 0, CHECK_EVERY, 0
    while True:
        state.top, best_count, found_len, nodes, children, status = _run(
            layout.Bs, layout.tots, layout.child_bar, prepared.tol, d, n, layout.lone, layout.gptr, layout.gcols,
            np.ascontiguousarray(count_rows, dtype=np.float64), np.asarray(count_index, dtype=np.int64),
            np.ascontiguousarray(count_tot, dtype=np.float64), mode,
            state.p, state.bound, state.depth, state.rows, state.src, state.pool, state.top,
            found, found_len, best_count, nodes, limit, next_check, children,
        )
        if status == _CHECK and not (time.perf_counter() >= deadline or (halted is not None and halted())):
            next_check = nodes + 1 + CHECK_EVERY
            continue
        break
    if found_len >= 0:
        best_rows = found[:found_len].copy()
    stats["nodes"] = nodes
    stats["children"] = children
    stack[:] = state.nodes()
    return best_rows, best_count, status == _FINISHED


@dataclass(frozen=True)
class _Compact:
    """The search's arrays without :class:`~vispriv.plugins.album.budget_search.Prepared`'s padding
    columns (a word of 8 per conflict group for the numpy loop's word operations; never a place,
    never possible, running total 0 in every node): the places alone first (``lone`` of them),
    then the larger groups' members, group ``g``'s columns ``gcols[gptr[g]:gptr[g + 1]]``;
    ``columns`` are their indices in the padded layout. About a fifth fewer comparisons per
    child on user album 10 of examples/album.yaml (165 places of 208 columns)."""

    Bs: np.ndarray
    tots: np.ndarray
    child_bar: np.ndarray
    lone: int
    gptr: np.ndarray
    gcols: np.ndarray
    columns: np.ndarray
    width: int

    @classmethod
    def of(cls, prepared: Prepared) -> _Compact:
        from vispriv.plugins.album.budget_search import NEVER

        columns = np.flatnonzero(prepared.tots != NEVER)
        position = np.full(prepared.tots.shape[0], -1)
        position[columns] = np.arange(len(columns))
        single_words, n_groups, extra = prepared.packing
        lone = int(np.sum(columns < 8 * single_words))
        # budget_search._packed_layout: after the lone places' words, word g holds group g's
        # first 8 members; the words beyond a group's first (``extra``) name their group.
        group_of_word = list(range(n_groups)) + [group for _, group in extra]
        members: list[list[int]] = [[] for _ in range(n_groups)]
        for word, group in enumerate(group_of_word):
            first = 8 * (single_words + word)
            members[group] += [c for c in position[first : first + 8].tolist() if c >= 0]
        groups = [np.array(m, dtype=np.int64) for m in members]
        gptr = np.zeros(len(groups) + 1, dtype=np.int64)
        gptr[1:] = np.cumsum([len(g) for g in groups])
        gcols = np.concatenate([*groups, np.zeros(0, dtype=np.int64)]).astype(np.int64)
        return cls(np.ascontiguousarray(prepared.Bs[:, columns]), np.ascontiguousarray(prepared.tots[columns]),
                   np.ascontiguousarray(prepared.child_bar[:, columns]), lone, gptr, gcols, columns,
                   prepared.tots.shape[0])


class _Stack:
    """The compiled loop's stack (module docstring): slots ``0 .. d - 1`` hold the running totals
    of the node expanded last at each depth; the nodes handed in get slots from ``d`` on. Running
    totals are kept in the :class:`_Compact` columns and handed back padded (0 in the padding)."""

    def __init__(self, capacity: int, d: int, layout: _Compact) -> None:
        self.p = np.zeros(capacity, dtype=np.int64)
        self.bound = np.zeros(capacity, dtype=np.int64)
        self.depth = np.zeros(capacity, dtype=np.int64)
        self.rows = np.zeros((capacity, max(d, 1)), dtype=np.int64)
        self.src = np.zeros(capacity, dtype=np.int64)
        self.pool = np.zeros((d + capacity, len(layout.columns)))
        self.layout = layout
        self.d = d
        self.top = 0

    def push(self, node: list) -> None:
        """A list node of the numpy loop, ``[p, bound, parent's running totals, rows, ahead]``."""
        p, bound, removed, rows, _ = node
        at = self.top
        self.p[at], self.bound[at], self.depth[at] = p, bound, len(rows)
        self.rows[at, : len(rows)] = rows
        self.src[at] = self.d + at
        self.pool[self.d + at] = removed[self.layout.columns]
        self.top += 1

    def nodes(self) -> list[list]:
        """The stack as the numpy loop's list nodes, bottom first (unevaluated)."""
        copies: dict[int, np.ndarray] = {}
        out = []
        for at in range(self.top):
            src = int(self.src[at])
            if src not in copies:
                copies[src] = np.zeros(self.layout.width)
                copies[src][self.layout.columns] = self.pool[src]
            depth = int(self.depth[at])
            out.append([int(self.p[at]), int(self.bound[at]), copies[src],
                        tuple(int(r) for r in self.rows[at, :depth]), None])
        return out


def _loop(Bs, tots, child_bar, tol, d, n, lone, gptr, gcols, count_rows, count_index, count_tot, mode,
          sp, sb, sdepth, srows, ssrc, pool, top, found, found_len, best_count, nodes, node_limit, next_check, children):
    """The depth-first search of :func:`vispriv.plugins.album.budget_search.search` on array
    stacks (compiled by numba; module docstring). Returns ``(top, best count, length of the
    best set in found or -1, nodes, children bounded, status)``, status 0 finished, 1 stopped at the node limit,
    2 paused at ``next_check`` nodes or later for the caller to look at its clock (the node is
    back on the stack and not counted, as when stopped)."""
    width = Bs.shape[1]
    n_groups = gptr.shape[0] - 1
    left = np.empty(width, dtype=np.float32)
    bounds = np.empty(n, dtype=np.int64)
    approx = np.empty(n, dtype=np.int64)
    rows_now = np.empty(d, dtype=np.int64)
    sums = np.empty(count_rows.shape[1])
    keep = np.empty(count_rows.shape[0], dtype=np.bool_)
    while top > 0:
        top -= 1
        p = sp[top]
        depth = sdepth[top]
        r = d - depth
        if sb[top] <= best_count or r == 0 or p == n:
            continue
        nodes += 1
        if nodes > node_limit:
            return top + 1, best_count, found_len, nodes - 1, children, 1
        if nodes % 256 == 0 and nodes >= next_check:
            return top + 1, best_count, found_len, nodes - 1, children, 2
        # This node's running totals (its parent's plus its last deletion), in its depth's slot.
        removed = pool[depth]
        parent = pool[ssrc[top]]
        if depth > 0:
            last = Bs[p - 1]
            for j in range(width):
                removed[j] = parent[j] + last[j]
        else:
            for j in range(width):
                removed[j] = parent[j]
        for j in range(width):
            x = (tots[j] + tol) - removed[j]
            left[j] = np.float32(x + (abs(x) * 2.0**-23 + 2.0**-148))  # budget_search._rounded_up
        block = (r - 1) * n
        children += n - p
        most = 0
        for i in range(p, n):
            bar = child_bar[block + i]
            possible = 0
            for j in range(width):
                possible += left[j] >= bar[j]
            bounds[i] = -1
            approx[i] = -1
            if possible <= best_count:  # neither a child node nor a leaf that may beat (bound <= possible)
                continue
            lone_possible = 0
            for j in range(lone):
                lone_possible += left[j] >= bar[j]
            # Groups hit, only where they can lift the bound above the best count (else unused).
            hit = 0
            if possible > lone_possible and lone_possible + n_groups > best_count:
                for g in range(n_groups):
                    for q in range(gptr[g], gptr[g + 1]):
                        if left[gcols[q]] >= bar[gcols[q]]:
                            hit += 1
                            break
            bounds[i] = lone_possible + hit
            # A leaf child that may beat: its places with a non-negative total.
            row = Bs[i]
            a = 0
            for j in range(width):
                a += (((tots[j] - removed[j]) + tol) - row[j]) >= 0
            approx[i] = a
            most = max(most, a)
        rows = srows[top]
        if most > best_count:
            # The leaf children in descending approx (ties: lower photo first), counted exactly
            # while their approx beats the best count (budget_search.best_leaf).
            while True:
                pick, level = -1, best_count
                for i in range(p, n):
                    if approx[i] > level:
                        pick, level = i, approx[i]
                if pick < 0:
                    break
                approx[pick] = -1
                for k in range(depth):
                    rows_now[k] = rows[k]
                rows_now[depth] = pick
                exact = _exact_count(count_rows, count_index, count_tot, mode, rows_now, depth + 1, sums, keep)
                if exact > best_count:
                    best_count = exact
                    found_len = depth + 1
                    for k in range(depth + 1):
                        found[k] = rows_now[k]
        if depth < d - 1:
            for i in range(n - 2, p - 1, -1):  # pushed last to first: the first child is popped first
                if bounds[i] > best_count:
                    sp[top] = i + 1
                    sb[top] = bounds[i]
                    sdepth[top] = depth + 1
                    ssrc[top] = depth
                    for k in range(depth):
                        srows[top, k] = rows[k]
                    srows[top, depth] = i
                    top += 1
    return top, best_count, found_len, nodes, children, 0


def _exact(count_rows, count_index, count_tot, mode, rows, length, sums, keep):
    """Places beating after deleting ``rows[:length]``: :class:`KeptCount` (``mode`` 1: the kept
    rows of ``count_rows`` summed in row order, photo ``count_index[row]`` deleted) or
    :class:`TotalsCount` (``mode`` 0: ``count_tot`` less the deleted rows' sum in their order)."""
    width = count_rows.shape[1]
    if mode == 0:
        for j in range(width):
            sums[j] = 0.0
        for k in range(length):
            row = count_rows[rows[k]]
            for j in range(width):
                sums[j] += row[j]
        beating = 0
        for j in range(width):
            beating += (count_tot[j] - sums[j]) >= 0
        return beating
    keep[:] = True
    for k in range(length):
        keep[count_index[rows[k]]] = False
    started = False
    for j in range(width):
        sums[j] = 0.0
    for i in range(count_rows.shape[0]):
        if keep[i]:
            row = count_rows[i]
            if started:
                for j in range(width):
                    sums[j] += row[j]
            else:
                for j in range(width):
                    sums[j] = row[j]
                started = True
    beating = 0
    for j in range(width):
        beating += sums[j] >= 0
    return beating


if numba is not None:
    _exact_count = jit(_exact)
    _run = jit(_loop)
