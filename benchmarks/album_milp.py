"""Benchmark: the paper's naive MILP (supplement C, correct per-place big-M) versus this
package's fast exact formulations (plugins/album/milp.py): the top-k guarantee, problem
(3), and the deletion budget, problem (4).

For R-16..R-128, k in {1, 5} and budgets d = fraction * N (default 25 %), on two score
sources:

* ``default`` -- the SIMULATED 512-cell world of album-world (adversary's model, white-box);
  top-k rows use only albums whose true place is in the top-k before pruning (the others
  need no solve), budget rows every album (the paper's Table 3 averages over all);
* ``hard`` -- the issue's hard synthetic scores: per-photo logits ~ N(0, 2^2), +3 on the
  true place, 512 places.

Prints, per row: median seconds per album and share proven optimal within the time limit
for both formulations, the speed ratio (naive / fast median), and whether both reach the
same optimum (photos kept for top-k, protected-k for the budget) wherever both prove
optimality.

    .venv/bin/python benchmarks/album_milp.py                      # full run, both problems
    .venv/bin/python benchmarks/album_milp.py --problems budget    # budget rows only
    .venv/bin/python benchmarks/album_milp.py --quick              # R-16/R-32, 3 albums, 10 s limit
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from vispriv.harness import Cache, CellContext
from vispriv.plugins.album import milp
from vispriv.plugins.album.dataset import AlbumWorld
from vispriv.plugins.album.pruning import advantage, protected_k


def default_instances(size: int, k: int | None, n: int, seed: int) -> list[np.ndarray]:
    """Albums of the simulated world; with ``k``, only those whose true place is in the top-k."""
    ctx = CellContext(seed=seed, cache=Cache(".vispriv-cache"), quiet=True)
    scene = AlbumWorld(AlbumWorld.Config(collection=f"R-{size}", n_albums=8 * n)).load(ctx)
    out = []
    for a in range(len(scene.private)):
        S = scene.public.log_probs(scene.private.album(a), "adversary")
        A, _ = advantage(S, int(scene.private.places[a]))
        if k is None or protected_k(A, np.ones(size, bool)) < k:
            out.append(A)
        if len(out) == n:
            break
    return out


def hard_instances(size: int, n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng([seed, size])
    out = []
    for _ in range(n):
        S = rng.normal(0.0, 2.0, (size, 512))
        S[:, 0] += 3.0
        out.append(advantage(S, 0)[0])
    return out


def _solvers(problem: str, param: float):
    """(naive, fast) solvers of one album and the optimum a result reaches."""
    if problem == "topk":
        return (
            lambda A, limit: milp.naive_topk(A, int(param), time_limit=limit),
            lambda A, limit: milp.fast_topk(A, int(param), time_limit=limit),
            lambda A, keep: -1 if keep is None else int(keep.sum()),
        )
    budget = lambda A: int(np.floor(param * len(A)))  # noqa: E731
    return (
        lambda A, limit: milp.naive_budget(A, budget(A), time_limit=limit),
        lambda A, limit: milp.fast_budget(A, budget(A), np.zeros(len(A)), time_limit=limit),
        lambda A, keep: -1 if keep is None else protected_k(A, keep),
    )


def run(instances: list[np.ndarray], problem: str, param: float, limit: float) -> dict:
    naive, fast, optimum = _solvers(problem, param)
    rows = {"naive": [], "fast": []}
    for A in instances:
        for name, solve in (("naive", naive), ("fast", fast)):
            start = time.perf_counter()
            result = solve(A, limit)
            seconds = time.perf_counter() - start
            rows[name].append((seconds, result.status == "optimal", optimum(A, result.keep)))
    same = all(n[2] == f[2] for n, f in zip(rows["naive"], rows["fast"]) if n[1] and f[1])
    both = sum(n[1] and f[1] for n, f in zip(rows["naive"], rows["fast"]))
    summary = {"same": same, "both": both, "n": len(instances), "nonzero": sum(f[2] > 0 for f in rows["fast"])}
    for name, vals in rows.items():
        summary[f"{name}_median"] = float(np.median([v[0] for v in vals]))
        summary[f"{name}_max"] = float(np.max([v[0] for v in vals]))
        summary[f"{name}_optimal"] = float(np.mean([v[1] for v in vals]))
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="R-16/R-32, 3 albums, 10 s limit")
    parser.add_argument("--albums", type=int, default=5)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 32, 64, 128])
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--budgets", type=float, nargs="+", default=[0.25], help="deletion budgets as fractions of N")
    parser.add_argument("--problems", nargs="+", default=["topk", "budget"], choices=["topk", "budget"])
    parser.add_argument("--data", nargs="+", default=["default", "hard"], choices=["default", "hard"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.albums, args.time_limit = [16, 32], 3, 10.0
    print(f"albums per row: {args.albums}, time limit {args.time_limit:.0f} s per album, HiGHS single thread")
    header = (
        f"{'data':8} {'coll':6} {'problem':9} {'naive med s':>11} {'naive opt':>9} {'fast med s':>10} "
        f"{'fast max s':>10} {'fast opt':>8} {'ratio':>7}  same optimum"
    )
    print(header)
    rows = [("topk", k, f"top-{k}") for k in args.ks] + [("budget", b, f"d={b:.3g}N") for b in args.budgets]
    for data in args.data:
        for size in args.sizes:
            for problem, param, label in rows:
                if problem not in args.problems:
                    continue
                k = int(param) if problem == "topk" else None
                if data == "default":
                    inst = default_instances(size, k, args.albums, args.seed)
                else:
                    inst = hard_instances(size, args.albums, args.seed)
                if not inst:
                    print(f"{data:8} R-{size:<4} {label:9} (no album needs pruning)")
                    continue
                s = run(inst, problem, param, args.time_limit)
                ratio = s["naive_median"] / max(s["fast_median"], 1e-9)
                print(
                    f"{data:8} R-{size:<4} {label:9} {s['naive_median']:11.3f} {s['naive_optimal']:9.2f} "
                    f"{s['fast_median']:10.3f} {s['fast_max']:10.3f} {s['fast_optimal']:8.2f} {ratio:6.1f}x  "
                    f"{'yes' if s['same'] else 'NO'} ({s['both']}/{s['n']} both proven)"
                    + (f", optimum > 0 on {s['nonzero']}/{s['n']}" if problem == "budget" else ""),
                    flush=True,
                )


if __name__ == "__main__":
    main()
