"""The budget branch and bound split among worker processes, with the result of one process.

:func:`vispriv.plugins.album.budget_search.branch_and_bound` with ``workers > 1`` runs its
depth-first search here. The search first runs in this process for :data:`SPLIT_AFTER` nodes
(most albums are proven before that, and then nothing changes); what is left -- its stack --
is split into at least :data:`SPLIT_TASKS` subtrees, by expanding the shallowest node left
(the largest subtree, as the photos are ordered) until there are that many, and the subtrees
are searched by ``workers`` processes (``spawn``: no state of this process is inherited),
started after :data:`START_AFTER` nodes so that they are ready by the split (the search goes
on from its stack meanwhile: the same search).

**The same answer as one process.** Every subtree starts from the same best count, the one
the search had at the split, and the results are read in the depth-first order of the
search: the leaf children of a node before its child nodes, subtrees in the order the
search would pop them. The answer is the first set in that order with the highest count:
the set a single depth-first search returns, since it records a set only when it beats
every count before it. A subtree cannot use a better count found in another (no shared
state), so where the search improves on its starting count after the split, it expands
more nodes than in one process; the split does not depend on ``workers``, so neither do the
nodes (``stats["nodes"]``: this process's nodes, the expanded ones included, plus every
subtree's). A deadline stops every subtree (results unproven). A node limit counts those
nodes: each subtree is capped at what the split left, the subtrees' results are read in
order until their nodes pass the limit (the search is then unproven, with the best set read
before that subtree; the subtrees still running are stopped), and a limit the split's own
expansions pass returns the best of the first phase and of the expanded nodes' leaf
children, unproven, without starting a process. Since all of that is counted in the
search's order, a limited search stops at the same point on every machine and for any
``workers > 1``, though not where one process stops.
"""

from __future__ import annotations

import math
import multiprocessing
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from vispriv.plugins.album.budget_search import Prepared, best_leaf, paused_collector, search

#: Nodes expanded in this process before the rest is split (about a second or two; most
#: albums of examples/album.yaml are proven within it).
SPLIT_AFTER = 50_000
#: Nodes after which the worker processes are started, so that they have imported the package
#: and received the arrays by the split (a process takes about a second to start; the
#: albums of examples/album.yaml that need more than this are the two that split).
START_AFTER = 10_000
#: Subtrees the rest is split into, at least (where the tree has that many): a fixed number,
#: so that the nodes expanded do not depend on the number of workers.
SPLIT_TASKS = 256


def split_search(
    prepared: Prepared, best_rows: np.ndarray | None, best_count: int, deadline: float,
    count: Callable[[np.ndarray], int], stats: dict[str, int], workers: int, node_limit: float = math.inf,
) -> tuple[np.ndarray | None, int, bool]:
    """:func:`vispriv.plugins.album.budget_search.branch_and_bound`'s search on ``workers``
    processes after :data:`SPLIT_AFTER` nodes here (module docstring); returns ``(rows or
    None, count, proven)`` as it does, with ``stats["nodes"]`` the split search's nodes. The
    processes are started after :data:`START_AFTER` nodes, so that they are ready at the split."""
    stack = [prepared.root()]
    stats["nodes"] = 0
    finished = False

    def go_on(until: float) -> bool:
        """The search (resumed from ``stack``) up to ``until`` nodes in all; whether it must stop
        here (finished, past the deadline or at the node limit)."""
        nonlocal best_rows, best_count, finished
        more: dict[str, int] = {}
        with paused_collector():
            best_rows, best_count, finished = search(prepared, stack, best_rows, best_count, deadline,
                                                     min(until, node_limit) - stats["nodes"], count, more)
        stats["nodes"] += more["nodes"]
        return finished or time.perf_counter() >= deadline or stats["nodes"] >= node_limit

    if go_on(min(START_AFTER, SPLIT_AFTER)):
        return best_rows, best_count, finished
    with _Workers(prepared, count, deadline, workers) as pool:
        if go_on(SPLIT_AFTER):
            return best_rows, best_count, finished
        return _split_and_search(prepared, stack, best_rows, best_count, count, stats, node_limit, pool)


def _split_and_search(
    prepared: Prepared, stack: list[list], best_rows: np.ndarray | None, best_count: int,
    count: Callable[[np.ndarray], int], stats: dict[str, int], node_limit: float, pool: _Workers,
) -> tuple[np.ndarray | None, int, bool]:
    """The rest of the search (``stack``, popped last first) split (:func:`_split`), its
    subtrees searched on ``pool``, the results read in the search's order (module docstring)."""
    items, expanded = _split(prepared, stack[::-1], best_count, count)
    used = stats["nodes"] + expanded
    found = [(best_count, best_rows)]
    if used > node_limit:  # the expanded nodes passed the limit: their leaves are all there is
        stats["nodes"] = used
        found += [item for kind, item in items if kind == "leaves"]  # type: ignore[misc]
        return (*_first_best(found), False)
    subtrees = [item for kind, item in items if kind == "subtree"]
    outcomes = pool.search(subtrees, best_count, node_limit - used)
    proven = True
    for kind, item in items:
        if kind == "leaves":
            found.append(item)  # type: ignore[arg-type]
            continue
        outcome = next(outcomes, None)
        if outcome is None:  # the node limit passed in an earlier subtree
            proven = False
            break
        rows, subtree_count, subtree_nodes, done = outcome
        used += subtree_nodes
        if not done or used > node_limit:
            proven = False
            break
        found.append((subtree_count, rows))
    outcomes.close()
    stats["nodes"] = used
    return (*_first_best(found), proven)


def _first_best(found: list[tuple[int, np.ndarray | None]]) -> tuple[np.ndarray | None, int]:
    """The first set of ``found`` (``(count, rows)`` in the search's order) with the highest count."""
    top = max(c for c, _ in found)
    return next(r for c, r in found if c == top), top


class _Workers:
    """``workers`` spawned processes holding the search's arrays, started on entering (each
    imports the package and receives the arrays while this process goes on searching);
    leaving stops their subtrees and the processes."""

    def __init__(self, prepared: Prepared, count: Callable[[np.ndarray], int], deadline: float, workers: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.halt = context.Event()
        self.workers = workers
        seconds_left = deadline - time.perf_counter()
        self.pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker,
                                        initargs=(prepared, count, seconds_left, self.halt))

    def __enter__(self) -> _Workers:
        for _ in range(self.workers):  # a process is started per task waiting, up to ``workers``
            self.pool.submit(_ready)
        return self

    def __exit__(self, *exc: object) -> None:
        self.halt.set()
        self.pool.shutdown(wait=True, cancel_futures=True)

    def search(self, subtrees: list, best_count: int, node_budget: float) -> Iterator[tuple[np.ndarray | None, int, int, bool]]:
        """:func:`_search_subtree` of each subtree from ``best_count``, yielded in the subtrees'
        order; a subtree stops after ``node_budget`` nodes, and once the subtrees yielded have
        used up ``node_budget`` together, the others are stopped and nothing more is yielded."""
        # The shallowest (largest) subtrees first, so that no large one is left to run alone at the end.
        order = sorted(range(len(subtrees)), key=lambda i: len(subtrees[i][3]))
        futures = {i: self.pool.submit(_search_subtree, subtrees[i], best_count, node_budget) for i in order}
        spent = 0
        for i in range(len(subtrees)):
            outcome = futures[i].result()
            spent += outcome[2]
            yield outcome
            if spent > node_budget:
                self.halt.set()
                return


def _split(prepared: Prepared, order: list[list], best_count: int, count: Callable[[np.ndarray], int]) -> tuple[list[tuple[str, object]], int]:
    """``order`` (nodes in the order the search would pop them) as items in that order:
    ``("subtree", node)`` to search, ``("leaves", (count, rows))`` for the leaf children of a
    node expanded here (their best set above ``best_count``, ``rows`` ``None`` if none).
    Expands the shallowest subtree (the first of them) while fewer than :data:`SPLIT_TASKS`
    are left and one can be expanded; returns the items and the nodes expanded."""
    d, n = prepared.d, prepared.n
    items: list[tuple[str, object]] = [("subtree", _unevaluated(node)) for node in order if _open(node, best_count, d, n)]
    expanded = 0
    while sum(kind == "subtree" for kind, _ in items) < SPLIT_TASKS:
        depths = [len(item[3]) if kind == "subtree" else math.inf for kind, item in items]  # type: ignore[index]
        if not depths or min(depths) == math.inf:
            break
        at = depths.index(min(depths))
        node = items[at][1]
        prepared.evaluate(node, [], best_count)  # type: ignore[arg-type]
        expanded += 1
        p, _, _, rows, (most, leaves, approx, kids) = node  # type: ignore[misc]
        leaf = best_leaf(count, rows, p, leaves, approx, best_count) if most > best_count else (None, best_count)
        children = [("subtree", kid) for kid in kids if _open(kid, best_count, d, n)]
        items[at : at + 1] = [("leaves", (leaf[1], leaf[0])), *children]
    return items, expanded


def _open(node: list, best_count: int, d: int, n: int) -> bool:
    """Whether the search would expand ``node`` (the test it applies when popping one)."""
    p, bound, _, rows, _ = node
    return bound > best_count and len(rows) < d and p < n


def _unevaluated(node: list) -> list:
    """``node`` without its look-ahead evaluation (re-done where it is searched; it does not
    change the search's decisions), so that it is small to send."""
    return [*node[:4], None]


_WORKER: dict[str, object] = {}


def _start_worker(prepared: Prepared, count: Callable[[np.ndarray], int], seconds_left: float, halt: object) -> None:
    """A worker's state: the arrays, the count, its deadline and the parent's stop signal."""
    _WORKER.update(prepared=prepared, count=count, halt=halt,
                   deadline=time.perf_counter() + seconds_left if math.isfinite(seconds_left) else math.inf)


def _ready() -> None:
    """A task that only gets a worker process started."""


def _search_subtree(node: list, best_count: int, node_budget: float) -> tuple[np.ndarray | None, int, int, bool]:
    """One subtree's search from the split's best count, at most ``node_budget`` nodes: its best
    set (``None`` if none beats that count), its count, its nodes and whether it finished."""
    stats: dict[str, int] = {}
    with paused_collector():
        rows, found, finished = search(_WORKER["prepared"], [node], None, best_count, _WORKER["deadline"],  # type: ignore[arg-type]
                                       node_budget, _WORKER["count"], stats,  # type: ignore[arg-type]
                                       halted=_WORKER["halt"].is_set)  # type: ignore[attr-defined]
    return rows, found, stats["nodes"], finished
