"""Album pruning (album pruning (AAAI 2020) sections 2 and 4): delete photos so that
the true place leaves the top-k of a location classifier.

Modes: ``greedy`` / ``greedy-budget`` (the paper's baseline, section 3), ``top1-exact``
(the polynomial algorithm of supplement B), ``milp-topk`` (problem 3/6) and
``milp-budget`` (problem 4/7), solved exactly in the ``fast`` formulation (HiGHS MILPs
behind exact filters, and a branch and bound for the budget), the paper's ``naive`` MILP
(:mod:`vispriv.plugins.album.milp`) or ``cpsat`` (OR-Tools CP-SAT,
:mod:`vispriv.plugins.album.cpsat`). An album that an exact mode does not prove optimal
within its limits keeps its best mask found, counted in ``unproven_share`` (not in
``optimal_share``), and the cell warns. The limits: ``time_limit`` (wall clock, per
album; ``null``: none), and the work limits whose stop falls at the same point on every
machine -- ``node_limit`` (branch-and-bound nodes: the ``fast`` budget search's own, and
HiGHS's over the album's MILPs, for ``fast`` and ``naive``) and ``deterministic_limit``
(CP-SAT's deterministic seconds). With ``time_limit: null`` a
cell's masks and ``optimal_share`` do not depend on the machine or its load. Scores come from the defender's proxy
classifier with the black-box margin ``theta`` (eq. 8) added to the true place, or from
the adversary's own model (``scores_from: adversary``, the white-box setting).

User preference (section 2): photos flagged in ``Albums.keep``, and with
``keep_rank: r`` the photo ranked r-th by its true-place score (the protocol of Figure
2), are never deleted. An album that cannot be protected under them is released whole
and counted in ``infeasible_share``.

The release carries the defense's public settings (``KeptAlbums.protocol``,
:mod:`vispriv.plugins.album.protocol`): an attacker who knows the defense knows them
(``adaptive-geolocator``); the masks and scores stay with the defense.

Every cell logs the kept mask of each album (:data:`~vispriv.harness.artifacts.KEPT_MASKS`:
album id, photo position, kept 0/1): the deletion sets that Table 4 of the paper compares
between two deletion budgets (``vispriv report --budget-deletions``).
"""

from __future__ import annotations

import warnings
from typing import Literal

import numpy as np
from pydantic import Field

from vispriv.harness import CellContext, Defense, Labels, PluginConfig, Protected
from vispriv.harness.artifacts import KEPT_MASKS, kept_masks_csv
from vispriv.harness.errors import InputError
from vispriv.plugins.album.payloads import Albums, GeoModels, KeptAlbums
from vispriv.plugins.album.protocol import (
    TOPK_MODES,
    UNPROVEN_STATUSES,
    fixed_photos,
    prune,
    public_protocol,
    stopped_by_limit,
)
from vispriv.plugins.album.pruning import advantage, check_k, check_scores, protected_k

SCENARIO = "album-sharing"


def _release(albums: Albums, keeps: list[np.ndarray], protocol: dict) -> KeptAlbums:
    """The kept photos of every album, with the defense's public protocol (never its masks)."""
    parts = [albums.album(a)[keep] for a, keep in enumerate(keeps)]
    sizes = [len(p) for p in parts]
    features = np.concatenate(parts) if parts else np.zeros((0, albums.features.shape[1]), np.float32)
    return KeptAlbums(features, np.concatenate([[0], np.cumsum(sizes)]), list(albums.ids), protocol=protocol)


def _models(public) -> GeoModels:
    if not isinstance(public, GeoModels):
        raise InputError(f"album pruning needs the public GeoModels of album-world; got {type(public).__name__}")
    return public


class NoPruning(Defense):
    """Releases every album whole (the unprotected baseline of Table 1)."""

    name = "none"
    version = "1.0"
    scenario = SCENARIO
    headline = ("kept_fraction",)
    consumes = (Albums,)
    produces = (KeptAlbums,)

    def protect(self, private: Albums, public, ctx: CellContext) -> Protected:
        keeps = [np.ones(int(n), dtype=bool) for n in np.diff(private.offsets)]
        return Protected(
            release=_release(private, keeps, public_protocol(self.name, None)),
            truth={"place": Labels(private.places, ids=list(private.ids))},
            utility={"kept_fraction": 1.0},
            artifacts={KEPT_MASKS: kept_masks_csv(private.ids, keeps)},
        )


_SOLVER = frozenset({"formulation", "solver", "time_limit", "node_limit", "deterministic_limit", "workers"})
#: The settings each album-pruning mode does not read (left out of its label).
IGNORED_BY_MODE: dict[str, frozenset[str]] = {
    "greedy": _SOLVER | {"budget"},
    "greedy-budget": _SOLVER,
    "top1-exact": _SOLVER | {"budget"},
    "milp-topk": frozenset({"budget"}),
    "milp-budget": frozenset(),
}


def _limits_text(cfg) -> str:
    """The limits a cell's solves ran under, for its warning."""
    parts = [f"time_limit {'none' if cfg.time_limit is None else f'{cfg.time_limit:g} s'}"]
    if cfg.formulation != "cpsat":
        default = "default" if cfg.formulation == "fast" and cfg.mode == "milp-budget" else "none"
        parts.append(f"node_limit {cfg.node_limit if cfg.node_limit is not None else default}")
    if cfg.formulation == "cpsat":
        parts.append(f"deterministic_limit {cfg.deterministic_limit if cfg.deterministic_limit is not None else 'none'}")
    return ", ".join(parts)


class AlbumPruning(Defense):
    """Deletes as few photos as possible to push the true place out of the top-k."""

    class Config(PluginConfig):
        mode: Literal["greedy", "greedy-budget", "top1-exact", "milp-topk", "milp-budget"] = "milp-topk"
        k: int = Field(1, ge=1, description="top-k guarantee (greedy, top1-exact, milp-topk)")
        budget: float = Field(0.25, gt=0, le=1, description="deletion budget d as a fraction of the album (budget modes)")
        formulation: Literal["fast", "naive", "cpsat"] = "fast"
        solver: str = "HIGHS"
        time_limit: float | None = Field(60.0, gt=0, description="wall-clock seconds per album for the MILP modes (null: none)")
        node_limit: int | None = Field(
            None, ge=1, description="branch-and-bound nodes per album: the fast budget search's own, and HiGHS's over the "
            "album's MILPs (formulations fast and naive; null: the defaults)"
        )
        deterministic_limit: float | None = Field(
            None, gt=0, description="CP-SAT deterministic seconds per album, formulation cpsat (null: none)"
        )
        workers: int = Field(
            1, ge=1, description="processes for the fast budget search (milp-budget, formulation fast): a search not "
            "finished after its first 50,000 nodes is split among them; the same masks and status for any value"
        )
        theta: float = Field(0.0, ge=0, description="black-box margin added to the true place's proxy scores (eq. 8)")
        scores_from: Literal["proxy", "adversary"] = "proxy"
        keep_rank: int | None = Field(None, ge=1, description="keep the photo ranked r-th by true-place score (Fig. 2)")

        def ignored_fields(self) -> frozenset[str]:
            """The settings ``mode`` does not read (the solver's in the greedy and exact modes, the budget in
            the top-k ones), and the work limit of the formulations not chosen."""
            other = frozenset({"node_limit"} if self.formulation == "cpsat" else set())
            other |= frozenset({"deterministic_limit"} if self.formulation != "cpsat" else set())
            other |= frozenset({"workers"} if (self.mode, self.formulation) != ("milp-budget", "fast") else set())
            return IGNORED_BY_MODE[self.mode] | other

    name = "album-pruning"
    version = "1.1"
    scenario = SCENARIO
    headline = ("kept_fraction",)
    consumes = (Albums,)
    produces = (KeptAlbums,)

    def protect(self, private: Albums, public, ctx: CellContext) -> Protected:
        cfg = self.config
        models = _models(public)
        if cfg.mode == "top1-exact" and cfg.k != 1:
            raise InputError(f"mode top1-exact guarantees top-1 only; got k={cfg.k} (use milp-topk for k > 1)")
        if cfg.mode in TOPK_MODES:
            check_k(cfg.k, models.n_places)
        protocol = public_protocol(self.name, cfg.model_dump())
        keeps, statuses, seconds, deleted_needed, own_pk = [], [], [], [], []
        for a in ctx.progress(range(len(private)), desc="album pruning", total=len(private), unit="album"):
            S = check_scores(models.log_probs(private.album(a), cfg.scores_from), int(private.places[a]))
            t = int(private.places[a])
            user_keep = None if private.keep is None else private.keep[private.offsets[a] : private.offsets[a + 1]]
            if cfg.keep_rank is not None and cfg.keep_rank > len(S):
                raise InputError(f"keep_rank {cfg.keep_rank} exceeds album {private.ids[a]} of {len(S)} photos")
            result = prune(S, t, protocol, fixed_photos(S, t, cfg.keep_rank, user_keep), workers=cfg.workers)
            keep = result.keep if result.keep is not None else np.ones(len(S), dtype=bool)
            A, _ = advantage(S, t, cfg.theta)
            if protected_k(A, np.ones(len(S), bool)) < cfg.k and result.keep is not None:
                deleted_needed.append(1.0 - keep.mean())
            keeps.append(keep)
            statuses.append(result.status)
            seconds.append(result.seconds)
            own_pk.append(protected_k(A, keep))
        statuses_arr = np.array(statuses)
        unproven = sum(stopped_by_limit(cfg.mode, s) for s in statuses)
        if unproven:
            warnings.warn(
                f"album-pruning {cfg.mode} ({cfg.formulation}): {unproven} of {len(statuses)} albums not proven optimal "
                f"within their limits ({_limits_text(cfg)}); their masks are the best found (utility/unproven_share)",
                stacklevel=2,
            )
        utility = {
            "kept_fraction": float(np.mean([k.mean() for k in keeps])),
            "deleted_fraction_needed": float(np.mean(deleted_needed)) if deleted_needed else 0.0,
            "solve_seconds_mean": float(np.mean(seconds)),
            "solve_seconds_median": float(np.median(seconds)),
            "optimal_share": float(np.mean(statuses_arr == "optimal")),
            "infeasible_share": float(np.mean(statuses_arr == "infeasible")),
            "unproven_share": float(np.mean(np.isin(statuses_arr, UNPROVEN_STATUSES))),
            "defender_protected_k": float(np.mean(own_pk)),
        }
        directions = {
            "solve_seconds_mean": False,
            "solve_seconds_median": False,
            "infeasible_share": False,
            "unproven_share": False,
        }
        return Protected(
            release=_release(private, keeps, protocol),
            truth={"place": Labels(private.places, ids=list(private.ids))},
            utility=utility,
            utility_directions=directions,
            artifacts={KEPT_MASKS: kept_masks_csv(private.ids, keeps)},
        )
