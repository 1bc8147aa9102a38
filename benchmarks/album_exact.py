"""Benchmark: the three exact album-pruning methods side by side on every album of a config's draw.

For each ``milp-topk`` / ``milp-budget`` cell of the config (default examples/album.yaml;
cells that differ only in the formulation or the time limit are solved once), every album
of the cell's draw is solved by the three exact methods of ``album-pruning``'s
``formulation``, one after the other in this process:

* ``fast`` -- this package's formulation (plugins/album/milp.py): exact filters and HiGHS
  MILPs for the top-k guarantee (3), the descending search or the branch and bound
  (plugins/album/budget_search.py) for the budget (4); the baseline of the ratios;
* ``naive`` -- the paper's MILP (supplement C) through HiGHS, one thread;
* ``cpsat`` -- OR-Tools CP-SAT (plugins/album/cpsat.py), one worker unless ``--workers``.

Top-k rows take only albums whose true place is in the top-k before pruning (the others
need no solve). Prints per cell and method: albums proven optimal within ``--time-limit``,
median and max seconds to proof (an unproven album counts its time, so a max at the limit
means "not proven"), the ratios method / fast of the median and of the max, the median
and max machine-independent work (``fast`` and ``naive``: branch-and-bound nodes, the budget
search's own and HiGHS's over the album's MILPs; ``cpsat``: deterministic seconds), and whether every
album proven by two methods has the same optimum. Then the albums not proven by some
method, and the slowest albums of each budget cell (seconds and work per album).

    .venv/bin/python benchmarks/album_exact.py --time-limit 10
    .venv/bin/python benchmarks/album_exact.py --time-limit 10 --problems budget --collections albums
    .venv/bin/python benchmarks/album_exact.py --problems topk --scores-from proxy --methods fast cpsat
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from vispriv.harness import Cache, CellContext
from vispriv.harness.config import load_config
from vispriv.harness.matrix import build_matrix
from vispriv.harness.registry import load_registry
from vispriv.plugins.album import cpsat, milp
from vispriv.plugins.album.pruning import advantage, protected_k

METHODS = ("fast", "naive", "cpsat")


def cells(
    config: str, problems: list[str], collections: list[str] | None, scores_from: list[str] | None = None
) -> list[tuple[str, object, list[tuple[np.ndarray, np.ndarray]]]]:
    """(label, defense config, [(A, true-place scores)] per album) of each distinct exact cell."""
    out, seen = [], set()
    for cell in build_matrix(load_config(config), load_registry()).cells:
        cfg, ds = cell.defense.instance().config, cell.dataset.instance()
        mode = getattr(cfg, "mode", None)
        if mode not in ("milp-topk", "milp-budget") or mode.removeprefix("milp-") not in problems:
            continue
        if (collections and ds.config.collection not in collections) or (scores_from and cfg.scores_from not in scores_from):
            continue
        param = f"k={cfg.k}" if mode == "milp-topk" else f"d={cfg.budget:g}N"
        label = f"{ds.config.collection} {mode} {param} {cfg.scores_from} theta={cfg.theta:g}"
        if label in seen:
            continue
        seen.add(label)
        scene = ds.load(CellContext(seed=cell.stage_seeds()[0], cache=Cache(".vispriv-cache"), quiet=True))
        albums = []
        for a in range(len(scene.private)):
            S = scene.public.log_probs(scene.private.album(a), cfg.scores_from)
            t = int(scene.private.places[a])
            albums.append((advantage(S, t, cfg.theta)[0], S[:, t]))
        out.append((label, cfg, albums))
    return out


def solve(method: str, cfg, A: np.ndarray, St: np.ndarray, limit: float, workers: int) -> tuple[float, bool, int, float]:
    """(seconds, proven optimal, optimum reached: photos kept for top-k, protected-k for the
    budget, work: nodes or deterministic seconds)."""
    start = time.perf_counter()
    if cfg.mode == "milp-topk":
        if method == "cpsat":
            result = cpsat.solve_topk(A, cfg.k, time_limit=limit, num_workers=workers)
        else:
            result = (milp.fast_topk if method == "fast" else milp.naive_topk)(A, cfg.k, time_limit=limit)
        value = -1 if result.keep is None else int(result.keep.sum())
    else:
        d = int(np.floor(cfg.budget * len(A)))
        if method == "cpsat":
            result = cpsat.solve_budget(A, d, St, time_limit=limit, num_workers=workers)
        elif method == "fast":
            result = milp.fast_budget(A, d, St, time_limit=limit)
        else:
            result = milp.naive_budget(A, d, time_limit=limit)
        value = -1 if result.keep is None else protected_k(A, result.keep)
    return time.perf_counter() - start, result.status in ("optimal", "infeasible"), value, float(result.work)


def _work(method: str, value: float) -> str:
    """Deterministic seconds (``cpsat``) or branch-and-bound nodes (the others)."""
    return f"{value:.3f}" if method == "cpsat" else f"{int(value)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="examples/album.yaml")
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds per album and method")
    parser.add_argument("--problems", nargs="+", default=["topk", "budget"], choices=["topk", "budget"])
    parser.add_argument("--collections", nargs="+", default=None, help="only these collections (default: every one of the config)")
    parser.add_argument("--scores-from", nargs="+", default=None, choices=["adversary", "proxy"], help="only cells with these scores")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--workers", type=int, default=cpsat.NUM_WORKERS, help="CP-SAT workers (interleaved when > 1)")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"{args.config}: {args.time_limit:g} s per album and method; HiGHS 1 thread; CP-SAT {args.workers} worker(s); baseline fast")
    print("| cell | albums | method | proven | median s | max s | median / fast | max / fast | median work | max work | same optimum |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    unproven: list[str] = []
    slowest: list[str] = []
    for label, cfg, drawn in cells(args.config, args.problems, args.collections, args.scores_from):
        index = list(range(len(drawn)))
        if cfg.mode == "milp-topk":
            index = [i for i, (A, _) in enumerate(drawn) if protected_k(A, np.ones(len(A), dtype=bool)) < cfg.k]
        albums = [drawn[i] for i in index]
        rows = {m: [solve(m, cfg, A, St, args.time_limit, args.workers) for A, St in albums] for m in args.methods}
        base = rows.get("fast")
        for m in args.methods:
            seconds = np.array([r[0] for r in rows[m]])
            proven = [r[1] for r in rows[m]]
            same = "n/a"
            if base is not None and m != "fast":
                both = [(r[2], b[2]) for r, b in zip(rows[m], base) if r[1] and b[1]]
                same = f"{'yes' if all(x == y for x, y in both) else 'NO'} ({len(both)} both proven)"
            ratio = "1.00x" if m == "fast" else "n/a"
            ratio_max = ratio
            if base is not None and m != "fast":
                ratio = f"{np.median(seconds) / np.median([b[0] for b in base]):.2f}x"
                ratio_max = f"{seconds.max() / max(b[0] for b in base):.2f}x"
            work = np.array([r[3] for r in rows[m]])
            work_text = [_work(m, np.median(work)), _work(m, work.max())]
            print(
                f"| {label} | {len(albums)} | {m} | {sum(proven)}/{len(albums)} | {np.median(seconds):.3f} | {seconds.max():.3f} "
                f"| {ratio} | {ratio_max} | {work_text[0]} | {work_text[1]} | {same} |",
                flush=True,
            )
            if cfg.mode == "milp-budget":
                top = np.argsort(-seconds, kind="stable")[:3]
                slowest += [f"{label} {m}: album {index[i]} {seconds[i]:.2f} s, work {_work(m, work[i])}" for i in top]
            unproven += [f"{label} album {index[i]}: {m} not proven ({rows[m][i][0]:.1f} s)" for i, p in enumerate(proven) if not p]
    for line in unproven + slowest:
        print(line)
    print(f"wall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
