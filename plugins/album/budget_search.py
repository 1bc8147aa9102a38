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

Speed (the search's decisions are unchanged): nodes are evaluated ahead of the depth-first
search in batches of up to :data:`AHEAD_NODES` (the nodes created last and not evaluated
yet), all their children's bounds in one array operation instead of a few small ones per
node; the places are laid out in 8-byte words per group so that a boolean row read as
``uint64`` gives the group hits in a few word operations, and the place counts are row sums
of bytes (``einsum``, several times faster than ``sum(axis=1)`` on short rows); and the
bound test runs in single precision with the running totals rounded up and the thresholds
rounded down, so it can only find more places possible than in double precision. Each
node's children are compared in place with their block of thresholds (contiguous per
depth), and the cyclic garbage collector is paused during the search (one list per node,
no reference cycles).

Two exact reductions come first: places that beat (or cannot beat) under every
admissible deletion set are counted (dropped) once, and a photo with ``A_ij >= 0`` on every
remaining place is never deleted (dropping it from any ``D`` cannot make a place lose).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from vispriv.plugins.album.pruning import protected_k

#: The search stops (result not proven) after this many nodes, unless the caller passes
#: ``node_limit=None`` (the deadline alone; :func:`vispriv.plugins.album.milp.fast_budget`
#: does when the search is the one it runs first).
NODE_LIMIT = 2_000_000
#: Slack (relative to the largest column magnitude) on running totals: candidates and bounds only.
TIE_TOLERANCE = 1e-9
#: Total of the padding columns (never a place): finite in single precision, never possible.
NEVER = -3e38


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
    node_limit: int | None = NODE_LIMIT,
    groups: np.ndarray | None = None,
    count: Callable[[np.ndarray], int] | None = None,
    stats: dict[str, int] | None = None,
    workers: int = 1,
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
    finished (so that nothing better exists) before ``deadline`` and ``node_limit`` nodes
    (``None``: no node limit). ``deadline`` may be ``math.inf`` (no wall-clock stop): the
    node limit alone then stops the search, after the same nodes on every machine.
    ``stats["nodes"]`` (when given) receives the number of nodes expanded, the search's
    machine-independent measure of work.

    ``workers > 1``: the search runs in this process for
    :data:`vispriv.plugins.album.parallel_search.SPLIT_AFTER` nodes and, if it has not finished,
    splits what is left among that many processes
    (:func:`vispriv.plugins.album.parallel_search.split_search`). A search that finishes
    returns the same rows, count and status as in one process, after more nodes where a best
    count found in one subtree would have pruned another; the node limit counts the split
    search's nodes (the same for any ``workers > 1``), so a search it stops is stopped on
    every machine, though not at the node where one process stops. ``count`` must then be
    picklable (:class:`KeptCount`; the default is).
    """
    n = len(B)
    stats = {} if stats is None else stats
    stats["nodes"] = 0
    if count is None:
        count = TotalsCount(B, tot)
    best_rows: np.ndarray | None = None
    if count(np.zeros(0, dtype=int)) > best_count:
        best_count, best_rows = count(np.zeros(0, dtype=int)), np.zeros(0, dtype=int)
    if n == 0 or d == 0:
        return best_rows, best_count, True
    prepared = Prepared.of(B, tot, d, groups)
    limit = float("inf") if node_limit is None else node_limit
    if workers > 1:
        from vispriv.plugins.album.parallel_search import split_search

        return split_search(prepared, best_rows, best_count, deadline, count, stats, workers, limit)
    with paused_collector():
        return search(prepared, [prepared.root()], best_rows, best_count, deadline, limit, count, stats)


@dataclass(frozen=True)
class TotalsCount:
    """Places beating after deleting ``rows``: ``tot - B[rows].sum(0) >= 0`` (picklable)."""

    B: np.ndarray
    tot: np.ndarray

    def __call__(self, rows: np.ndarray) -> int:
        return int(np.sum(self.tot - self.B[rows].sum(axis=0) >= 0))


@dataclass(frozen=True)
class KeptCount:
    """Places of ``A`` (photos x places) beating after deleting photos ``cand[rows]``, by
    :func:`vispriv.plugins.album.pruning.protected_k` (exact ties beat), picklable."""

    A: np.ndarray
    cand: np.ndarray

    def keep(self, rows: np.ndarray) -> np.ndarray:
        keep = np.ones(len(self.A), dtype=bool)
        keep[self.cand[rows]] = False
        return keep

    def __call__(self, rows: np.ndarray) -> int:
        return protected_k(self.A, self.keep(rows))


@dataclass(frozen=True)
class Prepared:
    """The search's arrays: ``Bs``/``tots`` (places in :func:`_packed_layout` order, padding
    columns never possible), ``child_bar`` (single precision, rounded down: row ``(r - 1) n +
    i`` holds the running-total threshold per place of the child that deletes photo ``i``
    with ``r - 1`` deletions left, ``left_j - B_ij >= R[i + 1, r - 1, j]``), the tolerance
    ``tol``, ``d``, ``n``, the packing and the number of places."""

    Bs: np.ndarray
    tots: np.ndarray
    child_bar: np.ndarray
    tol: float
    d: int
    n: int
    packing: tuple[int, int, list[tuple[int, int]]]
    n_places: int

    @classmethod
    def of(cls, B: np.ndarray, tot: np.ndarray, d: int, groups: np.ndarray | None) -> Prepared:
        n = len(B)
        tol = TIE_TOLERANCE * max(1.0, float(np.abs(B).sum(axis=0).max(initial=0.0)), float(np.abs(tot).max(initial=0.0)))
        groups = np.arange(len(tot)) if groups is None else np.asarray(groups)
        columns, packing = _packed_layout(groups)
        Bs = np.zeros((n, len(columns)))
        Bs[:, columns >= 0] = B[:, columns[columns >= 0]]
        tots = np.where(columns >= 0, tot[columns], NEVER)
        R = suffix_relief(Bs, d)
        child_bar = _rounded_down(np.stack([Bs + R[1:, k] for k in range(d)]).reshape(d * n, -1))
        return cls(Bs, tots, child_bar, tol, d, n, packing, len(tot))

    def root(self) -> list:
        """The search's first node (nothing deleted; bound: every place)."""
        return [0, self.n_places, np.zeros_like(self.tots), (), None]

    def evaluate(self, node: list, frontier: list[list], best_count: int) -> None:
        """:func:`_evaluate` on these arrays."""
        _evaluate(node, frontier, self.child_bar, self.Bs, self.tots, self.tol, self.d, self.n, self.packing, best_count)


@contextmanager
def paused_collector() -> Iterator[None]:
    """The cyclic garbage collector paused: the search creates about one list per node and no
    reference cycles, so collections, triggered by those allocations, would only rescan the
    growing stack."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def best_leaf(count: Callable[[np.ndarray], int], rows: tuple, p: int, leaves: np.ndarray, approx: np.ndarray,
              best_count: int) -> tuple[np.ndarray | None, int]:
    """A node's leaf children (deleting photo ``p + leaves[k]`` last) in descending ``approx``
    (their count of places with a non-negative running total, an upper bound), each counted
    exactly while its bound beats the best count: the first reaching the highest count above
    ``best_count`` and that count (``None`` and ``best_count`` if none beats it)."""
    found = None
    for k in np.argsort(-approx, kind="stable"):
        if approx[k] <= best_count:
            break
        exact = count(np.array([*rows, p + leaves[k]]))
        if exact > best_count:
            best_count, found = exact, np.array([*rows, p + leaves[k]])
    return found, best_count


def search(
    prepared: Prepared, stack: list[list], best_rows: np.ndarray | None, best_count: int,
    deadline: float, node_limit: float, count: Callable[[np.ndarray], int], stats: dict[str, int],
    halted: Callable[[], bool] | None = None,
) -> tuple[np.ndarray | None, int, bool]:
    """The depth-first search of :func:`branch_and_bound` from the nodes of ``stack`` (the last
    first), nodes expanded counted in ``stats["nodes"]``. Stopped by ``node_limit``,
    ``deadline`` or ``halted()``, it leaves ``stack`` holding every node it has not expanded,
    so that the search can go on from there. Compiled where numba is installed
    (:mod:`vispriv.plugins.album.budget_kernel`: the same nodes, set and status, about ten
    times faster on long proofs), else :func:`numpy_search`."""
    from vispriv.plugins.album.budget_kernel import compiled_search

    done = compiled_search(prepared, stack, best_rows, best_count, deadline, node_limit, count, stats, halted)
    if done is not None:
        return done
    return numpy_search(prepared, stack, best_rows, best_count, deadline, node_limit, count, stats, halted)


def numpy_search(
    prepared: Prepared, stack: list[list], best_rows: np.ndarray | None, best_count: int,
    deadline: float, node_limit: float, count: Callable[[np.ndarray], int], stats: dict[str, int],
    halted: Callable[[], bool] | None = None,
) -> tuple[np.ndarray | None, int, bool]:
    """:func:`search` in numpy: ``deadline`` and ``halted()`` are looked at every 256 nodes."""
    # A node is [p, bound, parent's removed, rows, ahead] (its removed adds row p - 1 of Bs to
    # its parent's); ``ahead`` (None until evaluated, :func:`_evaluate`) holds the highest
    # count of places with a non-negative running total over its leaf children (those that
    # may beat the best count), their offsets and counts, and its child nodes whose bound
    # beat the best count when it was evaluated.
    d, n = prepared.d, prepared.n
    frontier: list[list] = []
    nodes = 0
    while stack:
        node = stack.pop()
        p, bound, _, rows, ahead = node
        r = d - len(rows)
        if bound <= best_count or r == 0 or p == n:
            continue
        nodes += 1
        if nodes > node_limit or (nodes % 256 == 0 and (time.perf_counter() >= deadline or (halted is not None and halted()))):
            stack.append(node)
            stats["nodes"] = nodes - 1
            return best_rows, best_count, False
        if ahead is None:
            prepared.evaluate(node, frontier, best_count)
            ahead = node[4]
        # Done with: a caller that still holds the node (a subtree's root, held by the task that
        # searches it) would otherwise keep every node below it alive through the kids' lists.
        node[4] = None
        most, leaves, approx, kids = ahead
        if most > best_count:
            found, best_count = best_leaf(count, rows, p, leaves, approx, best_count)
            best_rows = best_rows if found is None else found
        stack.extend(kid for kid in reversed(kids) if kid[1] > best_count)
    stats["nodes"] = nodes
    return best_rows, best_count, True


#: Nodes evaluated ahead together, at most (one array operation per level of the subtree).
AHEAD_NODES = 256
#: Children (rows of places) in one array operation, at most.
AHEAD_ROWS = 4096
#: Nodes kept as candidates for look-ahead, at most (the newest; older ones are evaluated
#: when popped). Without the cap every node created stayed referenced by the frontier: about
#: 2 kB a node, 1 GB per 500,000 nodes, so a proof of millions of nodes ran out of memory.
FRONTIER_NODES = 16_384


def _evaluate(
    node: list, frontier: list[list], child_bar: np.ndarray, Bs: np.ndarray, tots: np.ndarray, tol: float,
    d: int, n: int, packing: tuple[int, int, list[tuple[int, int]]], best_count: int,
) -> None:
    """Evaluate ``node`` and, ahead of the depth-first search, up to :data:`AHEAD_NODES` - 1
    more nodes with it in one array operation (:func:`_evaluate_level`): the nodes created
    last by earlier evaluations and not evaluated yet (``frontier``, a stack; those the
    best count has pruned meanwhile are dropped). Every decision stays the search's: a
    node evaluated ahead is used when it is popped, its leaf children are counted and its
    child nodes are pushed (bound above the best count) against the best count of that
    moment, so the nodes expanded and the result are those of evaluating each node when it
    is popped; only evaluations of nodes that a risen best count prunes are wasted. The
    frontier keeps its newest :data:`FRONTIER_NODES` nodes (older ones are evaluated when
    popped), and it is filled in the order the depth-first search pops (each level's nodes
    from the last to the popped one, each node's children from the last to the first), so the
    newest frontier node is the next node the search will pop: the look-ahead follows the
    search's own path and the evaluated nodes it holds are those about to be used, and the
    search's memory does not grow with the nodes expanded. (Filled in creation order, the
    newest was the last child of the last node evaluated, the subtree the search visits last:
    the look-ahead ran down it far ahead of the search, and every node it evaluated there
    stayed referenced until the search arrived, about 1.2 kB per node expanded, 1.6 GB after
    1.2 million nodes on user album 10 of examples/album.yaml; now flat at the start's
    memory, and the proofs no slower.)"""
    level, rows = [node], n - node[0]
    while frontier and len(level) < AHEAD_NODES and rows < AHEAD_ROWS:
        other = frontier.pop()
        if other[4] is None and other[1] > best_count and other is not node:
            level.append(other)
            rows += n - other[0]
    _evaluate_level(level, frontier, child_bar, Bs, tots, tol, d, n, packing, best_count)
    if len(frontier) > FRONTIER_NODES:
        del frontier[: len(frontier) - FRONTIER_NODES]


def _evaluate_level(
    level: list[list], frontier: list[list], child_bar: np.ndarray, Bs: np.ndarray, tots: np.ndarray, tol: float,
    d: int, n: int, packing: tuple[int, np.ndarray | None], best_count: int,
) -> None:
    """Bounds of the children of every node of ``level`` in one array operation: per node, the
    most places possible over its leaf children, each leaf child's number of possible places
    (an upper bound on the places beating after that deletion) and its child nodes with a
    bound above ``best_count`` (unevaluated)."""
    firsts = np.array([e[0] for e in level])
    counts = n - firsts
    offsets = np.cumsum(counts) - counts
    owner = np.repeat(np.arange(len(level)), counts)
    photo = np.arange(int(counts.sum())) - offsets[owner] + firsts[owner]
    depth = np.array([len(e[3]) for e in level])
    removed = np.stack([e[2] for e in level])
    moved = np.flatnonzero(depth)
    removed[moved] += Bs[firsts[moved] - 1]
    left = _rounded_up(tots + tol - removed)
    # Per node, its children's thresholds are one contiguous block of ``child_bar`` (photos
    # ``first .. n - 1`` at its depth): compared in place, with no gathered copies.
    possible = np.empty((len(photo), child_bar.shape[1]), dtype=bool)
    starts = ((d - depth - 1) * n + firsts).tolist()
    for row, start, a, c in zip(left, starts, offsets.tolist(), counts.tolist()):
        np.greater_equal(row, child_bar[start : start + c], out=possible[a : a + c])
    bounds, n_possible = _packed_hits(possible, packing)
    # Leaf children that may beat the best count: their number of places with a non-negative
    # running total after the deletion (exactly as the search without look-ahead computes it).
    leaf = np.flatnonzero(n_possible > best_count)
    leaf_owner = owner[leaf]
    slack = (tots - removed + tol)[leaf_owner] - Bs[photo[leaf]]
    approx = _row_counts(slack >= 0)
    cuts = np.searchsorted(leaf_owner, np.arange(len(level) + 1))
    grow = (bounds > best_count) & (photo < n - 1) & (depth[owner] < d - 1)
    sel = np.flatnonzero(grow)
    kid_bound = bounds[sel].tolist()
    kid_photo = photo[sel].tolist()
    kid_owner = owner[sel].tolist()
    kids: list[list[list]] = [[] for _ in level]
    parent_removed = [row.copy() for row in removed]  # not views: a view keeps its whole block alive
    parent_rows = [e[3] for e in level]
    for o, i, b in zip(kid_owner, kid_photo, kid_bound):
        kids[o].append([i + 1, b, parent_removed[o], (*parent_rows[o], i), None])
    for ks in reversed(kids):  # the search's popping order: level[0]'s first child newest
        frontier.extend(reversed(ks))
    leaf_child = photo[leaf] - firsts[leaf_owner]
    most = np.zeros(len(level), dtype=np.intp)
    some = np.flatnonzero(cuts[1:] > cuts[:-1])
    if len(some):
        most[some] = np.maximum.reduceat(approx, cuts[some])
    for e, mx, a, b, ks in zip(level, most.tolist(), cuts[:-1].tolist(), cuts[1:].tolist(), kids):
        e[4] = (mx, leaf_child[a:b], approx[a:b], ks)


def _rounded_down(x: np.ndarray) -> np.ndarray:
    """``x`` in single precision, rounded down: comparing a running total rounded up
    (:func:`_rounded_up`) with a threshold rounded down can only find more places possible,
    so the bounds stay valid (never below the double-precision ones) at half the memory traffic."""
    single = x.astype(np.float32)
    return np.where(single > x, np.nextafter(single, np.float32(-np.inf)), single)


def _rounded_up(x: np.ndarray) -> np.ndarray:
    """``x`` in single precision, rounded up: raised by ``|x| 2^-23 + 2^-148`` first, more
    than rounding to the nearest single (at most ``|x| 2^-24`` or ``2^-150``) can lower it."""
    return (x + (np.abs(x) * 2.0**-23 + 2.0**-148)).astype(np.float32)


def _packed_layout(groups: np.ndarray) -> tuple[np.ndarray, tuple[int, int, list[tuple[int, int]]]]:
    """Column layout of the search's place arrays, for :func:`_packed_hits`, in 8-byte words
    (a boolean row read as ``uint64`` words tells per word whether a member is possible): the
    places alone in their group first, then one word per larger group holding its first 8
    members, then the words of the members beyond 8; ``-1`` marks padding columns (a place
    that can never beat). Also the number of words of lone places, the number of larger
    groups and, per word beyond a group's first, (that word, its group), both counted from
    the first group word."""
    _, inverse, sizes = np.unique(groups, return_inverse=True, return_counts=True)
    alone = np.flatnonzero(sizes[inverse] == 1)
    larger = [np.flatnonzero(inverse == g) for g in np.flatnonzero(sizes > 1)]

    def words(members: np.ndarray) -> list[np.ndarray]:
        return [members, np.full(-len(members) % 8, -1)]

    columns = words(alone)
    for members in larger:
        columns += words(members[:8])
    extra = []
    for g, members in enumerate(larger):
        for start in range(8, len(members), 8):
            extra.append((len(larger) + len(extra), g))
            columns += words(members[start : start + 8])
    return np.concatenate(columns).astype(np.intp), ((len(alone) + 7) // 8, len(larger), extra)


def _packed_hits(possible: np.ndarray, packing: tuple[int, int, list[tuple[int, int]]]) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``possible`` (columns in :func:`_packed_layout` order, padding never possible):
    the number of groups with a possible place (a group's word, its members' 0/1 bytes read
    as one ``uint64``, is non-zero) and the number of possible places (:func:`_row_counts`)."""
    single_words, n_groups, extra = packing
    lone = _row_counts(possible[:, : 8 * single_words])
    n_possible = lone + _row_counts(possible[:, 8 * single_words :])
    grouped = possible.view(np.uint64)[:, single_words:]
    hit = grouped[:, :n_groups].copy() if extra else grouped[:, :n_groups]
    for word, group in extra:
        hit[:, group] |= grouped[:, word]
    return lone + _row_counts(hit != 0), n_possible


#: Columns summed at once as bytes by :func:`_row_counts`: their count fits in a byte.
_BYTE_COLUMNS = 255


def _row_counts(flags: np.ndarray) -> np.ndarray:
    """Number of ``True`` per row of a 2-D boolean array: the bytes summed as bytes by
    ``einsum`` (along a short row several times faster than ``sum(axis=1)``, which loops per
    row, and with no widening copy) in chunks of :data:`_BYTE_COLUMNS` columns, whose count
    cannot overflow a byte."""
    as_bytes = flags.view(np.uint8)
    total = np.zeros(len(flags), dtype=np.intp)
    for start in range(0, flags.shape[1], _BYTE_COLUMNS):
        total += np.einsum("ij->i", as_bytes[:, start : start + _BYTE_COLUMNS])
    return total


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
