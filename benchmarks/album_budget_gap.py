"""Diagnostic: why a deletion-budget album (problem 4) of examples/album.yaml stays unproven.

Solves every album of the ``milp-budget`` cell of one collection with
:func:`vispriv.plugins.album.milp.fast_budget` (the cell's `time_limit` by default -- none in the shipped example, so every album is proven; `--time-limit` sets one) and,
for each album it does not prove, prints the bounds around the optimum:

* ``caps`` -- places with a single-place cap ``c_j >= N - d`` (supplement B): the upper
  bound fast_budget starts from;
* ``groups`` -- conflict cliques meeting those places (the branch and bound's root bound,
  :func:`vispriv.plugins.album.budget_search.conflict_groups`);
* ``lp`` / ``milp`` -- the LP relaxation and the HiGHS dual bound after ``--milp-seconds``
  of a strengthened form of MILP (7) on the open places: per-place big-M from the worst
  total under the budget, the knapsack row ``sum_i min(g_ij, delta_j) x_i >= delta_j h_j``
  and the cardinality row ``sum_{i: A_ij < 0} x_i >= m_j h_j`` for each place with deficit
  ``delta_j = -tot_j > 0`` (``g_ij = max(-A_ij, 0)``, ``m_j`` the fewest deletions that
  cover ``delta_j``), one row ``sum h <= 1`` per conflict clique; warm-started from the
  best mask found. Not used by the package: a measure of how loose the bounds are;
* ``best`` -- protected-k of fast_budget's mask, and of HiGHS's incumbent;
* with ``--prove-seconds S``: fast_budget again on that album with ``S`` seconds, its
  status (``optimal`` only if its search finished), protected-k and solve time.

    .venv/bin/python benchmarks/album_budget_gap.py --collection albums --milp-seconds 60
    .venv/bin/python benchmarks/album_budget_gap.py --collection albums --milp-seconds 60 --prove-seconds 600
"""

from __future__ import annotations

import argparse

import highspy
import numpy as np

from vispriv.harness import Cache, CellContext
from vispriv.harness.config import load_config
from vispriv.harness.matrix import build_matrix
from vispriv.harness.registry import load_registry
from vispriv.plugins.album import milp
from vispriv.plugins.album.budget_search import conflict_groups
from vispriv.plugins.album.pruning import advantage, caps, protected_k
from vispriv.plugins.album.surrogate import pair_compatibility, worst_totals


def budget_albums(config: str, collection: str) -> tuple[list[tuple[np.ndarray, int, np.ndarray]], float]:
    """(A, d, true-place scores) of every album of the config's milp-budget cell for ``collection``, and its time limit."""
    for cell in build_matrix(load_config(config), load_registry()).cells:
        cfg, ds = cell.defense.instance().config, cell.dataset.instance()
        if getattr(cfg, "mode", None) != "milp-budget" or ds.config.collection != collection:
            continue
        scene = ds.load(CellContext(seed=cell.stage_seeds()[0], cache=Cache(".vispriv-cache"), quiet=True))
        out = []
        for a in range(len(scene.private)):
            S = scene.public.log_probs(scene.private.album(a), cfg.scores_from)
            t = int(scene.private.places[a])
            out.append((advantage(S, t, cfg.theta)[0], int(np.floor(cfg.budget * len(S))), S[:, t]))
        return out, cfg.time_limit
    raise SystemExit(f"no milp-budget cell for collection {collection} in {config}")


def open_places(A: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Places with ``c_j >= N - d`` that lose under some admissible mask, their worst totals
    (negative), and the number that beat under every admissible mask (as fast_budget)."""
    J = np.flatnonzero(caps(A) >= len(A) - d)
    worst = worst_totals(A[:, J], np.zeros(len(A), dtype=bool), len(A) - d, at_least=True)
    return J[worst < 0], worst[worst < 0], int(np.sum(worst >= 0))


def strengthened_bounds(A: np.ndarray, d: int, best: np.ndarray, seconds: float) -> tuple[float, float, int]:
    """(LP bound, MILP dual bound after ``seconds``, incumbent) of the strengthened MILP of the
    module docstring, on the open places (add the always-beating ones for the album's count)."""
    fixed = np.zeros(len(A), dtype=bool)
    places, worst, _ = open_places(A, d)
    B = A[:, places]
    tot, bigm = B.sum(axis=0), -worst
    n, m = B.shape
    model = highspy.Highs()
    model.setOptionValue("output_flag", False)
    model.setOptionValue("threads", 1)
    x = [model.addBinary() for _ in range(n)]
    h = [model.addBinary(obj=-1.0) for _ in range(m)]
    model.addConstr(sum(x) <= d)
    for j in range(m):
        model.addConstr(sum(float(B[i, j]) * x[i] for i in range(n)) + float(bigm[j]) * h[j] <= float(tot[j] + bigm[j]))
        if tot[j] < 0:
            gain = np.clip(-B[:, j], 0, None)
            need = int(np.searchsorted(np.cumsum(np.sort(gain)[::-1]), -tot[j]) + 1)
            helps = np.flatnonzero(gain > 0)
            model.addConstr(sum(float(min(gain[i], -tot[j])) * x[i] for i in helps) >= float(-tot[j]) * h[j])
            model.addConstr(sum(x[i] for i in helps) >= need * h[j])
    groups = conflict_groups(pair_compatibility(A, fixed, places, len(A) - d), m)
    for label in np.unique(groups):
        members = np.flatnonzero(groups == label)
        if len(members) > 1:
            model.addConstr(sum(h[j] for j in members) <= 1)
    kinds = np.array([highspy.HighsVarType.kInteger] * (n + m))
    model.setOptionValue("solve_relaxation", True)
    model.run()
    lp = -model.getInfo().objective_function_value
    model.setOptionValue("solve_relaxation", False)
    model.setOptionValue("time_limit", float(seconds))
    model.changeColsIntegrality(n + m, np.arange(n + m, dtype=np.int32), kinds)
    removed = (~best).astype(float)
    start = highspy.HighsSolution()
    start.col_value = list(np.r_[removed, (tot - B.T @ removed >= 0).astype(float)])
    model.setSolution(start)
    model.run()
    info = model.getInfo()
    return lp, -info.mip_dual_bound, int(round(-info.objective_function_value))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="examples/album.yaml")
    parser.add_argument("--collection", default="albums")
    parser.add_argument("--time-limit", type=float, default=None, help="fast_budget seconds (default: the config's)")
    parser.add_argument("--milp-seconds", type=float, default=60.0)
    parser.add_argument("--prove-seconds", type=float, default=None, help="re-run fast_budget with this limit on each unproven album")
    args = parser.parse_args()
    albums, limit = budget_albums(args.config, args.collection)
    limit = args.time_limit or limit
    print(f"{args.collection}: {len(albums)} albums, fast_budget limit {limit:g} s, strengthened MILP {args.milp_seconds:g} s")
    proof = f" {'long run':>18}" if args.prove_seconds else ""
    print(f"{'album':>5} {'N':>4} {'d':>3} {'status':>9} {'caps':>5} {'groups':>6} {'lp':>7} {'milp':>7} {'best':>5} {'highs best':>10}{proof}")
    for a, (A, d, St) in enumerate(albums):
        result = milp.fast_budget(A, d, St, time_limit=limit)
        if result.status == "optimal":
            continue
        places, _, always = open_places(A, d)
        groups = conflict_groups(pair_compatibility(A, np.zeros(len(A), bool), places, len(A) - d), len(places))
        lp, bound, incumbent = strengthened_bounds(A, d, result.keep, args.milp_seconds)
        if args.prove_seconds:
            long = milp.fast_budget(A, d, St, time_limit=args.prove_seconds)
            proof = f" {long.status:>8} {protected_k(A, long.keep):3d} {long.seconds:5.0f}s"
        print(
            f"{a:5d} {len(A):4d} {d:3d} {result.status:>9} {always + len(places):5d} {always + len(np.unique(groups)):6d} "
            f"{always + lp:7.2f} {always + bound:7.2f} {protected_k(A, result.keep):5d} {always + incumbent:10d}{proof}",
            flush=True,
        )


if __name__ == "__main__":
    main()
