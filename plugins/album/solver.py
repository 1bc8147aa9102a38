"""Options passed to the cvxpy solver by every album LP and MILP.

HiGHS keeps one thread scheduler per process: once a solve without ``threads`` has
started it with all cores, a later solve asking for ``threads=1`` fails ("the scheduler
has already been initialized"). Every HiGHS call of this package therefore passes the
same ``threads=1`` (one thread, as docs/album.md states), LPs included.
"""

from __future__ import annotations


def solver_options(solver: str, time_limit: float | None = None) -> dict:
    """cvxpy ``solve`` keyword arguments: HiGHS gets one thread, a zero MIP gap and the time
    limit (seconds, at least 0.01); other solvers get none (their defaults)."""
    if solver.upper() != "HIGHS":
        return {}
    opts: dict = {"threads": 1, "mip_rel_gap": 0.0}
    if time_limit is not None:
        opts["time_limit"] = max(float(time_limit), 0.01)
    return opts
