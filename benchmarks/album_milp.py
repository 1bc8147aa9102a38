"""Benchmark: the paper's naive MILP (supplement C, correct per-place big-M) versus this
package's fast exact formulations (plugins/album/milp.py): the top-k guarantee, problem
(3), and the deletion budget, problem (4).

For R-16..R-128, k in {1, 5} and budgets d = fraction * N (default 25 %), on two score
sources:

* ``default`` -- the SIMULATED 512-cell world of album-world (adversary's model, white-box);
  top-k rows use only albums whose true place is in the top-k before pruning (the others
  need no solve);
* ``hard`` -- hard synthetic scores: per-photo logits ~ N(0, 2^2), +3 on the true place,
  512 places.

Budget rows take only instances whose optimum is **non-zero**: some place can beat the
true one with at most d deletions, i.e. its exact single-place cap (supplement B) is at
least N - d. An instance with optimum 0 is settled by the caps alone and measures
nothing. Instances are drawn in order (album 0, 1, ... of the world; hard draws 0, 1, ...)
and skipped until ``--albums`` qualify, scanning at most ``--scan`` per row; the row says
how many were scanned.

Prints, per row: median seconds per album and share proven optimal within the time limit
for both formulations, the speed ratio (naive / fast median), and whether both reach the
same optimum (photos kept for top-k, protected-k for the budget) wherever both prove
optimality.

    .venv/bin/python benchmarks/album_milp.py                      # full run, both problems
    .venv/bin/python benchmarks/album_milp.py --problems budget    # budget rows only
    .venv/bin/python benchmarks/album_milp.py --quick              # R-16/R-32, 3 albums, 10 s limit

One album (or every album) of a config's ``milp-budget`` cell, proven alone
(``--example-album``): fast_budget's proof against a baseline in the same process -- the
paper's naive MILP (supplement C) given ``--baseline-seconds``, or, with
``--baseline-commit``, this package's branch and bound as it was at that git commit
(``git show``; also says whether both return the same keep mask):

    .venv/bin/python benchmarks/album_milp.py --example-album 24 --baseline-commit c14eb6f --time-limit 600
    .venv/bin/python benchmarks/album_milp.py --example-album all --collection R-32 --baseline-commit c14eb6f
"""

from __future__ import annotations

import argparse
import subprocess
import time
import types

import numpy as np

from vispriv.harness import Cache, CellContext
from vispriv.plugins.album import milp
from vispriv.plugins.album.dataset import AlbumWorld
from vispriv.plugins.album.pruning import advantage, caps, protected_k


def nonzero_budget_optimum(A: np.ndarray, budget: float) -> bool:
    """Does problem (4) with ``d = floor(budget * N)`` have a non-zero optimum? Exactly when
    some place's single-place cap (supplement B) keeps ``N - d`` photos or more."""
    return bool(np.max(caps(A)) >= len(A) - int(np.floor(budget * len(A))))


def default_instances(coll: str, k: int | None, n: int, seed: int, budget: float | None = None, scan: int = 0) -> tuple[list[np.ndarray], int]:
    """Albums of collection ``coll`` (``R-<N>`` or ``albums``) of the simulated world, and how
    many were scanned: with ``k``, only those whose true place is in the top-k; with
    ``budget``, only those with a non-zero optimum."""
    ctx = CellContext(seed=seed, cache=Cache(".vispriv-cache"), quiet=True)
    scene = AlbumWorld(AlbumWorld.Config(collection=coll, n_albums=max(8 * n, scan))).load(ctx)
    out, scanned = [], 0
    for a in range(len(scene.private)):
        scanned += 1
        S = scene.public.log_probs(scene.private.album(a), "adversary")
        A, _ = advantage(S, int(scene.private.places[a]))
        if (k is None or protected_k(A, np.ones(len(A), bool)) < k) and (budget is None or nonzero_budget_optimum(A, budget)):
            out.append(A)
        if len(out) == n:
            break
    return out, scanned


def hard_instances(size: int, n: int, seed: int, budget: float | None = None, scan: int = 0) -> tuple[list[np.ndarray], int]:
    """Hard synthetic albums, and how many were drawn; with ``budget``, only those with a non-zero optimum."""
    rng = np.random.default_rng([seed, size])
    out, scanned = [], 0
    while len(out) < n and scanned < max(n, scan):
        scanned += 1
        S = rng.normal(0.0, 2.0, (size, 512))
        S[:, 0] += 3.0
        A = advantage(S, 0)[0]
        if budget is None or nonzero_budget_optimum(A, budget):
            out.append(A)
    return out, scanned


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


def _budget_search_at(commit: str):
    """This package's branch and bound as it was at ``commit`` (``git show``), as a module."""
    source = subprocess.run(["git", "show", f"{commit}:plugins/album/budget_search.py"], capture_output=True, text=True, check=True).stdout
    module = types.ModuleType(f"budget_search_{commit}")
    exec(compile(source, f"{commit}:plugins/album/budget_search.py", "exec"), module.__dict__)
    return module


def _baseline(args: argparse.Namespace, A: np.ndarray, d: int, St: np.ndarray):
    """The baseline's result on one album, and its label."""
    if not args.baseline_commit:
        return milp.naive_budget(A, d, time_limit=args.baseline_seconds), f"naive MILP (supplement C), {args.baseline_seconds:g} s limit"
    current = milp.branch_and_bound
    milp.branch_and_bound = _budget_search_at(args.baseline_commit).branch_and_bound
    try:
        return milp.fast_budget(A, d, St, time_limit=args.time_limit), f"fast_budget at {args.baseline_commit}"
    finally:
        milp.branch_and_bound = current


def example_album(args: argparse.Namespace) -> None:
    """Prove one album (or ``all``) of the config's milp-budget cell with fast_budget, against
    a baseline in the same process; reports whether both reach the same protected-k and,
    for a commit baseline, the same keep mask (so the config's metrics cannot move)."""
    from album_budget_gap import budget_albums

    albums, _ = budget_albums(args.config, args.collection)
    indices = range(len(albums)) if args.example_album == "all" else [int(args.example_album)]
    totals = [0.0, 0.0]
    same_mask = 0
    for index in indices:
        A, d, St = albums[index]
        n_beat = int(np.sum(caps(A) >= len(A) - d))
        print(f"{args.config} {args.collection} album {index}: N = {len(A)}, d = {d}, places with c_j >= N - d: {n_beat}")
        start = time.perf_counter()
        fast = milp.fast_budget(A, d, St, time_limit=args.time_limit)
        fast_s = time.perf_counter() - start
        print(f"  fast_budget (this tree): {fast.status}, protected-k {protected_k(A, fast.keep)}, {fast_s:.2f} s", flush=True)
        start = time.perf_counter()
        base, label = _baseline(args, A, d, St)
        base_s = time.perf_counter() - start
        base_k = protected_k(A, base.keep) if base.keep is not None else -1
        print(f"  baseline, {label}: {base.status}, protected-k {base_k}, {base_s:.2f} s", flush=True)
        both = fast.status == "optimal" and base.status == "optimal"
        ratio = f"{base_s / fast_s:.2f}x" if base.status == "optimal" else f">= {base_s / fast_s:.2f}x (baseline unproven)"
        same = "yes" if protected_k(A, fast.keep) == base_k else ("NO" if both else "n/a")
        identical = base.keep is not None and bool(np.array_equal(fast.keep, base.keep))
        same_mask += identical
        totals[0] += fast_s
        totals[1] += base_s
        print(f"  ratio baseline / this tree: {ratio}; same optimum: {same}; same keep mask: {'yes' if identical else 'no'}")
    if len(indices) > 1:
        print(f"all {len(indices)} albums: this tree {totals[0]:.1f} s, baseline {totals[1]:.1f} s (ratio {totals[1] / totals[0]:.2f}x); same keep mask on {same_mask}/{len(indices)}")


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
    parser.add_argument("--user-albums", action="store_true", help="also the simulated world's user albums (collection albums), default data only")
    parser.add_argument("--scan", type=int, default=200, help="budget rows: instances scanned at most for a non-zero optimum")
    parser.add_argument("--example-album", default=None, help="prove this album (an index, or all) of the config's milp-budget cell")
    parser.add_argument("--config", default="examples/album.yaml")
    parser.add_argument("--collection", default="albums")
    parser.add_argument("--baseline-seconds", type=float, default=120.0, help="--example-album: naive MILP time limit")
    parser.add_argument("--baseline-commit", default=None, help="--example-album: baseline = fast_budget with this commit's budget_search.py")
    args = parser.parse_args()
    if args.example_album is not None:
        example_album(args)
        return
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
        colls = [f"R-{size}" for size in args.sizes] + (["albums"] if args.user_albums and data == "default" else [])
        for coll in colls:
            size = int(coll[2:]) if coll != "albums" else 0
            for problem, param, label in rows:
                if problem not in args.problems:
                    continue
                k = int(param) if problem == "topk" else None
                budget = param if problem == "budget" else None
                if data == "default":
                    inst, scanned = default_instances(coll, k, args.albums, args.seed, budget, args.scan)
                else:
                    inst, scanned = hard_instances(size, args.albums, args.seed, budget, args.scan)
                if not inst:
                    why = "a non-zero optimum" if budget is not None else "pruning"
                    print(f"{data:8} {coll:6} {label:9} (no album of {scanned} scanned has {why})")
                    continue
                s = run(inst, problem, param, args.time_limit)
                ratio = s["naive_median"] / max(s["fast_median"], 1e-9)
                print(
                    f"{data:8} {coll:6} {label:9} {s['naive_median']:11.3f} {s['naive_optimal']:9.2f} "
                    f"{s['fast_median']:10.3f} {s['fast_max']:10.3f} {s['fast_optimal']:8.2f} {ratio:6.1f}x  "
                    f"{'yes' if s['same'] else 'NO'} ({s['both']}/{s['n']} both proven)"
                    + (f", optimum > 0 on {s['nonzero']}/{s['n']} ({scanned} scanned)" if problem == "budget" else ""),
                    flush=True,
                )


if __name__ == "__main__":
    main()
