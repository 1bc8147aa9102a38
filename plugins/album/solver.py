"""Options passed to the cvxpy solver by every album LP and MILP.

HiGHS keeps one thread scheduler per process: once a solve without ``threads`` has
started it with all cores, a later solve asking for ``threads=1`` fails ("the scheduler
has already been initialized"). Every HiGHS call of this package therefore passes the
same ``threads=1`` (one thread, as docs/album.md states), LPs included.
"""

from __future__ import annotations

import functools
import math
import os
import sys
from dataclasses import dataclass


def solver_options(solver: str, time_limit: float | None = None, node_limit: int | None = None) -> dict:
    """cvxpy ``solve`` keyword arguments: HiGHS gets one thread, a zero MIP gap, the time
    limit (seconds, at least 0.01; none when ``None`` or infinite) and the node limit
    (``mip_max_nodes``; none when ``None``); other solvers get none (their defaults)."""
    if solver.upper() != "HIGHS":
        return {}
    silence_highs_banner()
    opts: dict = {"threads": 1, "mip_rel_gap": 0.0}
    if time_limit is not None and math.isfinite(time_limit):
        opts["time_limit"] = max(float(time_limit), 0.01)
    if node_limit is not None:
        opts["mip_max_nodes"] = int(node_limit)
    return opts


@dataclass
class NodeBudget:
    """The HiGHS branch-and-bound nodes one album's MILPs may spend in all, and those spent.

    HiGHS on one thread (:func:`solver_options`) explores the same nodes on every machine, so
    a solve stopped by what is left of ``limit`` (each MILP gets it as ``mip_max_nodes``)
    stops at the same point whatever the machine's speed or load: a work limit, like the
    budget search's own nodes. Only MILPs spend nodes: once the limit is spent, a level that
    the exact filters settle without a MILP is still settled, the first one that needs a MILP
    is not. ``limit`` ``None``: no limit (``spent`` still counts).
    """

    limit: int | None = None
    spent: int = 0

    def left(self) -> int | None:
        """Nodes the next MILP may explore (``None``: no limit)."""
        return None if self.limit is None else max(self.limit - self.spent, 0)

    def exhausted(self) -> bool:
        """Whether the limit is spent (no MILP may start)."""
        return self.limit is not None and self.spent >= self.limit

    def charge(self, extra_stats: object) -> None:
        """Add the nodes of a finished HiGHS solve (cvxpy's ``solver_stats.extra_stats``; others count 0)."""
        self.spent += int(getattr(extra_stats, "mip_node_count", 0) or 0)


@functools.cache
def silence_highs_banner() -> None:
    """Make the process's first HiGHS instance with stdout pointed at ``/dev/null``.

    HiGHS writes its licence banner once per process, to the C-level stdout, when its first
    instance is made -- before any option (``log_to_console``) can be set -- so it would print
    in the middle of a run's output. Later instances print nothing unless ``verbose``.
    """
    try:
        import highspy
    except ImportError:
        return
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
