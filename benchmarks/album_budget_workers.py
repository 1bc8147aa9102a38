"""Time to proof of the budget search in one process against ``workers`` processes.

Runs :func:`vispriv.plugins.album.milp.fast_budget` (no wall-clock or node limit: every album
is proven) on user albums of examples/album.yaml's ``milp-budget`` cell (its seed-0 draw)
with ``workers=1`` (the baseline, one process) and with each ``--workers`` value, the runs
of one album one after the other so that they see the same load, and prints per album and
run: seconds, status, protected-k, nodes, whether the mask is the baseline's, the speed-up
over the baseline and the parallel efficiency (speed-up / workers; 1.0 is the physical
limit of that many processes, a search that loses nothing to the split).

    .venv/bin/python benchmarks/album_budget_workers.py --albums 10 12 --workers 2
    .venv/bin/python benchmarks/album_budget_workers.py --albums all --workers 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--albums", nargs="+", default=["10", "12"], help="user album indices, or 'all'")
    parser.add_argument("--workers", nargs="+", type=int, default=[2])
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    from album_budget_gap import budget_albums

    from vispriv.plugins.album import milp
    from vispriv.plugins.album.pruning import protected_k

    albums, _ = budget_albums("examples/album.yaml", "albums")
    chosen = range(len(albums)) if args.albums == ["all"] else [int(a) for a in args.albums]
    rows = []
    for a in chosen:
        A, d, S_true = albums[a]
        runs = {}
        for workers in [1, *args.workers]:
            start = time.perf_counter()
            result = milp.fast_budget(A, d, S_true, time_limit=None, workers=workers)
            runs[workers] = (time.perf_counter() - start, result)
            print(f"  album {a} (N = {len(A)}, d = {d}), workers {workers}: {result.status}, protected-k "
                  f"{protected_k(A, result.keep)}, {int(result.work):,} nodes, {runs[workers][0]:.2f} s", flush=True)
        base_seconds, base = runs[1]
        for workers, (seconds, result) in runs.items():
            rows.append((a, len(A), d, workers, seconds, result.status, protected_k(A, result.keep), int(result.work),
                         np.array_equal(result.keep, base.keep), base_seconds / seconds))
    print("\n| album | N | d | workers | seconds | status | protected-k | nodes | same mask | speed-up | efficiency |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for a, n, d, workers, seconds, status, k, nodes, same, speedup in rows:
        print(f"| {a} | {n} | {d} | {workers} | {seconds:.2f} | {status} | {k} | {nodes:,} | {'yes' if same else 'NO'} | "
              f"{speedup:.2f}x | {speedup / workers:.2f} |")
    for workers in [1, *args.workers]:
        times = [r[4] for r in rows if r[3] == workers]
        proven10 = sum(1 for r in rows if r[3] == workers and r[5] == "optimal" and r[4] <= 10)
        print(f"workers {workers}: median {statistics.median(times):.2f} s, max {max(times):.2f} s, "
              f"proven in <= 10 s: {proven10}/{len(times)}")


if __name__ == "__main__":
    main()
