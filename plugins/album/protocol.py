"""The public pruning protocol and its application to one album (album pruning (AAAI 2020), sections 2 and 4).

A protocol is the defense's *settings* -- mode, k, budget, theta, scores_from,
keep_rank and the solver's -- never anything of a user's album (its scores, its true
place, its deletion mask). It travels in the release (:attr:`KeptAlbums.protocol`) so an
attacker who knows the defense (Kerckhoffs; "On Evaluating Adversarial Robustness",
Carlini et al., 2019) can run the same algorithm on albums of its own, and it is what
:class:`~vispriv.plugins.defenses.album_pruning.AlbumPruning` itself runs, so the two can
never drift apart.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from vispriv.harness.errors import InputError
from vispriv.plugins.album.pruning import PruneResult, advantage, greedy_budget, greedy_topk, top1_exact

#: The keys of a pruning protocol (all public settings of ``album-pruning``).
PROTOCOL_KEYS = (
    "mode", "k", "budget", "formulation", "solver", "time_limit", "node_limit", "deterministic_limit", "theta", "scores_from",
    "keep_rank",
)
#: Modes that delete to a top-k guarantee (problem 3); the others work to a budget (problem 4).
TOPK_MODES = frozenset({"greedy", "top1-exact", "milp-topk"})
#: Statuses of an exact solve stopped at a limit (with its best mask, or none): not proven optimal.
UNPROVEN_STATUSES = ("feasible", "unknown")


def stopped_by_limit(mode: str, status: str) -> bool:
    """Whether a solve of ``mode`` ended at a time or work limit: a MILP mode not proven (the
    heuristic modes prove nothing and stop at no limit)."""
    return mode.startswith("milp") and status in UNPROVEN_STATUSES


def public_protocol(defense: str, settings: dict[str, Any] | None) -> dict[str, Any]:
    """The release's protocol: the defense's name and its public settings (``None``: deletes nothing)."""
    out: dict[str, Any] = {"defense": defense}
    if settings is not None:
        out.update({key: settings[key] for key in PROTOCOL_KEYS})
    return out


def deletes(protocol: dict[str, Any]) -> bool:
    """Whether the protocol deletes photos at all (``none``, or a release without a protocol, does not)."""
    return protocol.get("defense") == "album-pruning"


def fixed_photos(S: np.ndarray, t: int, keep_rank: int | None, user_keep: np.ndarray | None = None) -> np.ndarray:
    """Photos that may not be deleted: the user's flags and the ``keep_rank``-th by true-place score (Fig. 2)."""
    fixed = np.zeros(len(S), dtype=bool)
    if user_keep is not None:
        fixed |= user_keep
    if keep_rank is not None:
        if keep_rank > len(S):
            raise InputError(f"keep_rank {keep_rank} exceeds an album of {len(S)} photos")
        fixed[np.argsort(-S[:, t], kind="stable")[keep_rank - 1]] = True
    return fixed


def prune(S: np.ndarray, t: int, protocol: dict[str, Any], fixed: np.ndarray, workers: int = 1) -> PruneResult:
    """Run the protocol's algorithm on one album's scores ``S`` (N, M) with true place ``t``.

    ``greedy`` / ``greedy-budget``: section 3's baseline; ``top1-exact``: supplement B;
    ``milp-topk`` / ``milp-budget``: problems (6) / (7) in the ``fast`` or ``naive``
    formulation, or (3) / (4) by CP-SAT (``cpsat``). The budget is ``d = floor(budget * N)``.
    ``workers``: processes for the ``fast`` budget search (not part of the protocol: it
    changes how long a solve takes, not its result).
    """
    from vispriv.plugins.album import cpsat, milp

    mode, k, theta = protocol["mode"], int(protocol["k"]), float(protocol["theta"])
    solver, time_limit = protocol["solver"], protocol["time_limit"]
    node_limit, deterministic = protocol.get("node_limit"), protocol.get("deterministic_limit")
    A, _ = advantage(S, t, theta)
    d = int(np.floor(float(protocol["budget"]) * len(S)))
    start = time.perf_counter()
    if mode == "greedy":
        result = greedy_topk(S, A, t, k, fixed)
    elif mode == "greedy-budget":
        result = greedy_budget(S, t, d, fixed)
    elif mode == "top1-exact":
        result = top1_exact(A, fixed)
    elif mode == "milp-topk" and protocol["formulation"] == "cpsat":
        result = cpsat.solve_topk(A, k, fixed, time_limit=time_limit, deterministic_limit=deterministic)
    elif mode == "milp-topk":
        solve = milp.fast_topk if protocol["formulation"] == "fast" else milp.naive_topk
        result = solve(A, k, fixed, solver=solver, time_limit=time_limit, node_limit=node_limit)
    elif protocol["formulation"] == "cpsat":
        result = cpsat.solve_budget(A, d, S[:, t], fixed, time_limit=time_limit, deterministic_limit=deterministic)
    elif protocol["formulation"] == "fast":
        result = milp.fast_budget(A, d, S[:, t], fixed, solver=solver, time_limit=time_limit, node_limit=node_limit,
                                  workers=workers)
    else:
        result = milp.naive_budget(A, d, fixed, solver=solver, time_limit=time_limit, node_limit=node_limit)
    result.seconds = time.perf_counter() - start
    return result
