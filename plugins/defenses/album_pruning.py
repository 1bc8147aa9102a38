"""Album pruning (album pruning (AAAI 2020) sections 2 and 4): delete photos so that
the true place leaves the top-k of a location classifier.

Modes: ``greedy`` / ``greedy-budget`` (the paper's baseline, section 3), ``top1-exact``
(the polynomial algorithm of supplement B), ``milp-topk`` (problem 3/6) and
``milp-budget`` (problem 4/7), solved exactly in the ``fast`` formulation (HiGHS MILPs
behind exact filters, and a branch and bound for the budget), the paper's ``naive`` MILP
(:mod:`vispriv.plugins.album.milp`) or ``cpsat`` (OR-Tools CP-SAT,
:mod:`vispriv.plugins.album.cpsat`). An album that an exact mode does not prove optimal
within ``time_limit`` keeps its best mask found, counted in ``unproven_share`` (not in
``optimal_share``), and the cell warns. Scores come from the defender's proxy
classifier with the black-box margin ``theta`` (eq. 8) added to the true place, or from
the adversary's own model (``scores_from: adversary``, the white-box setting).

User preference (section 2): photos flagged in ``Albums.keep``, and with
``keep_rank: r`` the photo ranked r-th by its true-place score (the protocol of Figure
2), are never deleted. An album that cannot be protected under them is released whole
and counted in ``infeasible_share``.

Every cell logs the kept mask of each album (:data:`~vispriv.harness.artifacts.KEPT_MASKS`:
album id, photo position, kept 0/1): the deletion sets that Table 4 of the paper compares
between two deletion budgets (``vispriv report --budget-deletions``).
"""

from __future__ import annotations

import time
import warnings
from typing import Literal

import numpy as np
from pydantic import Field

from vispriv.harness import CellContext, Defense, Labels, PluginConfig, Protected
from vispriv.harness.artifacts import KEPT_MASKS, kept_masks_csv
from vispriv.harness.errors import InputError
from vispriv.plugins.album.payloads import Albums, GeoModels, KeptAlbums
from vispriv.plugins.album.pruning import (
    PruneResult,
    advantage,
    check_k,
    check_scores,
    greedy_budget,
    greedy_topk,
    protected_k,
    top1_exact,
)

SCENARIO = "album-sharing"


def _release(albums: Albums, keeps: list[np.ndarray]) -> KeptAlbums:
    parts = [albums.album(a)[keep] for a, keep in enumerate(keeps)]
    sizes = [len(p) for p in parts]
    features = np.concatenate(parts) if parts else np.zeros((0, albums.features.shape[1]), np.float32)
    return KeptAlbums(features, np.concatenate([[0], np.cumsum(sizes)]), list(albums.ids))


def _models(public) -> GeoModels:
    if not isinstance(public, GeoModels):
        raise InputError(f"album pruning needs the public GeoModels of album-world; got {type(public).__name__}")
    return public


class NoPruning(Defense):
    """Releases every album whole (the unprotected baseline of Table 1)."""

    name = "none"
    version = "1.0"
    scenario = SCENARIO
    consumes = (Albums,)
    produces = (KeptAlbums,)

    def protect(self, private: Albums, public, ctx: CellContext) -> Protected:
        keeps = [np.ones(int(n), dtype=bool) for n in np.diff(private.offsets)]
        return Protected(
            release=_release(private, keeps),
            truth={"place": Labels(private.places, ids=list(private.ids))},
            utility={"kept_fraction": 1.0},
            artifacts={KEPT_MASKS: kept_masks_csv(private.ids, keeps)},
        )


_SOLVER = frozenset({"formulation", "solver", "time_limit"})
#: The settings each album-pruning mode does not read (left out of its label).
IGNORED_BY_MODE: dict[str, frozenset[str]] = {
    "greedy": _SOLVER | {"budget"},
    "greedy-budget": _SOLVER,
    "top1-exact": _SOLVER | {"budget"},
    "milp-topk": frozenset({"budget"}),
    "milp-budget": frozenset(),
}


class AlbumPruning(Defense):
    """Deletes as few photos as possible to push the true place out of the top-k."""

    class Config(PluginConfig):
        mode: Literal["greedy", "greedy-budget", "top1-exact", "milp-topk", "milp-budget"] = "milp-topk"
        k: int = Field(1, ge=1, description="top-k guarantee (greedy, top1-exact, milp-topk)")
        budget: float = Field(0.25, gt=0, le=1, description="deletion budget d as a fraction of the album (budget modes)")
        formulation: Literal["fast", "naive", "cpsat"] = "fast"
        solver: str = "HIGHS"
        time_limit: float = Field(60.0, gt=0, description="seconds per album for the MILP modes")
        theta: float = Field(0.0, ge=0, description="black-box margin added to the true place's proxy scores (eq. 8)")
        scores_from: Literal["proxy", "adversary"] = "proxy"
        keep_rank: int | None = Field(None, ge=1, description="keep the photo ranked r-th by true-place score (Fig. 2)")

        def ignored_fields(self) -> frozenset[str]:
            """The settings ``mode`` does not read: the solver's in the greedy and exact modes, the budget in the top-k ones."""
            return IGNORED_BY_MODE[self.mode]

    name = "album-pruning"
    version = "1.0"
    scenario = SCENARIO
    consumes = (Albums,)
    produces = (KeptAlbums,)

    def _prune(self, S: np.ndarray, t: int, fixed: np.ndarray) -> PruneResult:
        from vispriv.plugins.album import cpsat, milp

        cfg = self.config
        A, _ = advantage(S, t, cfg.theta)
        d = int(np.floor(cfg.budget * len(S)))
        start = time.perf_counter()
        if cfg.mode == "greedy":
            result = greedy_topk(S, A, t, cfg.k, fixed)
        elif cfg.mode == "greedy-budget":
            result = greedy_budget(S, t, d, fixed)
        elif cfg.mode == "top1-exact":
            result = top1_exact(A, fixed)
        elif cfg.mode == "milp-topk" and cfg.formulation == "cpsat":
            result = cpsat.solve_topk(A, cfg.k, fixed, time_limit=cfg.time_limit)
        elif cfg.mode == "milp-topk":
            solve = milp.fast_topk if cfg.formulation == "fast" else milp.naive_topk
            result = solve(A, cfg.k, fixed, solver=cfg.solver, time_limit=cfg.time_limit)
        elif cfg.formulation == "cpsat":
            result = cpsat.solve_budget(A, d, S[:, t], fixed, time_limit=cfg.time_limit)
        elif cfg.formulation == "fast":
            result = milp.fast_budget(A, d, S[:, t], fixed, solver=cfg.solver, time_limit=cfg.time_limit)
        else:
            result = milp.naive_budget(A, d, fixed, solver=cfg.solver, time_limit=cfg.time_limit)
        result.seconds = time.perf_counter() - start
        return result

    def protect(self, private: Albums, public, ctx: CellContext) -> Protected:
        cfg = self.config
        models = _models(public)
        if cfg.mode == "top1-exact" and cfg.k != 1:
            raise InputError(f"mode top1-exact guarantees top-1 only; got k={cfg.k} (use milp-topk for k > 1)")
        if cfg.mode in ("greedy", "top1-exact", "milp-topk"):
            check_k(cfg.k, models.n_places)
        keeps, statuses, seconds, deleted_needed, own_pk = [], [], [], [], []
        for a in ctx.progress(range(len(private)), desc="album pruning", total=len(private)):
            S = check_scores(models.log_probs(private.album(a), cfg.scores_from), int(private.places[a]))
            t = int(private.places[a])
            fixed = np.zeros(len(S), dtype=bool)
            if private.keep is not None:
                fixed |= private.keep[private.offsets[a] : private.offsets[a + 1]]
            if cfg.keep_rank is not None:
                if cfg.keep_rank > len(S):
                    raise InputError(f"keep_rank {cfg.keep_rank} exceeds album {private.ids[a]} of {len(S)} photos")
                fixed[np.argsort(-S[:, t], kind="stable")[cfg.keep_rank - 1]] = True
            result = self._prune(S, t, fixed)
            keep = result.keep if result.keep is not None else np.ones(len(S), dtype=bool)
            A, _ = advantage(S, t, cfg.theta)
            if protected_k(A, np.ones(len(S), bool)) < cfg.k and result.keep is not None:
                deleted_needed.append(1.0 - keep.mean())
            keeps.append(keep)
            statuses.append(result.status)
            seconds.append(result.seconds)
            own_pk.append(protected_k(A, keep))
        statuses_arr = np.array(statuses)
        unproven = int(np.isin(statuses_arr, ("feasible", "unknown")).sum())
        if unproven and cfg.mode.startswith("milp"):
            warnings.warn(
                f"album-pruning {cfg.mode} ({cfg.formulation}): {unproven} of {len(statuses)} albums not proven optimal "
                f"within time_limit {cfg.time_limit:g} s; their masks are the best found (utility/unproven_share)",
                stacklevel=2,
            )
        utility = {
            "kept_fraction": float(np.mean([k.mean() for k in keeps])),
            "deleted_fraction_needed": float(np.mean(deleted_needed)) if deleted_needed else 0.0,
            "solve_seconds_mean": float(np.mean(seconds)),
            "solve_seconds_median": float(np.median(seconds)),
            "optimal_share": float(np.mean(statuses_arr == "optimal")),
            "infeasible_share": float(np.mean(statuses_arr == "infeasible")),
            "unproven_share": float(np.mean(np.isin(statuses_arr, ("feasible", "unknown")))),
            "defender_protected_k": float(np.mean(own_pk)),
        }
        directions = {
            "solve_seconds_mean": False,
            "solve_seconds_median": False,
            "infeasible_share": False,
            "unproven_share": False,
        }
        return Protected(
            release=_release(private, keeps),
            truth={"place": Labels(private.places, ids=list(private.ids))},
            utility=utility,
            utility_directions=directions,
            artifacts={KEPT_MASKS: kept_masks_csv(private.ids, keeps)},
        )
