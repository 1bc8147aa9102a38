"""Time to proof of the budget search: the numpy loop against the compiled one (numba), one process and several.

Runs :func:`vispriv.plugins.album.milp.fast_budget` (no wall-clock or node limit: every album
is proven) on user albums of examples/album.yaml's ``milp-budget`` cell (its seed-0 draw),
one run after the other per album so that they see the same load:

* ``numpy``: the numpy loop (``VISPRIV_BUDGET_KERNEL=0``), one process: the baseline;
* ``compiled``: the compiled loop (:mod:`vispriv.plugins.album.budget_kernel`), one process;
* ``compiled, N workers``: the compiled loop split among ``--workers`` processes.

Per album: seconds, nodes, whether all runs keep the baseline's mask, the speed-ups, and the
physical limit of the compiled loop: the seconds its children's comparisons alone take (one
child is one single-precision compare per place of the node's running totals with the child's
thresholds, the work no search with this bound can skip), at the rate of a compiled loop that
does only those compares over runs of consecutive rows of the album's own thresholds (a
node's children, as many a run as the search bounds per node), measured in the same run;
``floor share`` is that time over the compiled search's (1.0: nothing but the comparisons).

    .venv/bin/python benchmarks/album_budget_kernel.py --albums 10 12
    .venv/bin/python benchmarks/album_budget_kernel.py --albums all --workers 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numba
import numpy as np


@numba.njit(cache=True)
def _compares(left: np.ndarray, rows: np.ndarray, order: np.ndarray) -> int:
    """The children's comparisons alone: row ``order[k]`` of ``rows`` against ``left``, counted."""
    total = 0
    for k in range(order.shape[0]):
        row = rows[order[k]]
        for j in range(left.shape[0]):
            total += left[j] >= row[j]
    return total


def compare_seconds(prepared: object, per_node: float, samples: int = 2_000_000) -> float:
    """Seconds per child of the comparisons alone, over runs of consecutive rows of the album's
    thresholds as the search reads them (a node's children are one contiguous block of
    ``child_bar``), ``per_node`` rows a run on average."""
    rng = np.random.default_rng(0)
    from vispriv.plugins.album.budget_kernel import _Compact

    rows = _Compact.of(prepared).child_bar  # the places' columns, as the compiled loop reads them  # type: ignore[arg-type]
    left = rows[rng.integers(len(rows))].copy()
    run = max(1, round(per_node))
    starts = rng.integers(0, len(rows) - run + 1, samples // run)
    order = (starts[:, None] + np.arange(run)[None, :]).reshape(-1)
    _compares(left, rows, order[:10])
    start = time.perf_counter()
    _compares(left, rows, order)
    return (time.perf_counter() - start) / len(order)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--albums", nargs="+", default=["10", "12"], help="user album indices, or 'all'")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    from album_budget_gap import budget_albums

    from vispriv.plugins.album import budget_kernel, milp
    from vispriv.plugins.album.pruning import protected_k

    seen: dict[str, object] = {}
    compiled_search = budget_kernel.compiled_search

    def spy(prepared, stack, best_rows, best_count, deadline, node_limit, count, stats, halted=None):
        out = compiled_search(prepared, stack, best_rows, best_count, deadline, node_limit, count, stats, halted)
        seen["prepared"], seen["children"] = prepared, int(seen.get("children", 0)) + stats.get("children", 0)
        return out

    budget_kernel.compiled_search = spy
    albums, _ = budget_albums("examples/album.yaml", "albums")
    chosen = range(len(albums)) if args.albums == ["all"] else [int(a) for a in args.albums]
    runs = [("numpy", "0", 1), ("compiled", "1", 1), (f"compiled, {args.workers} workers", "1", args.workers)]
    rows = []
    for a in chosen:
        A, d, S_true = albums[a]
        out = {}
        seen.clear()
        for name, kernel, workers in runs:
            os.environ["VISPRIV_BUDGET_KERNEL"] = kernel
            start = time.perf_counter()
            result = milp.fast_budget(A, d, S_true, time_limit=None, workers=workers)
            out[name] = (time.perf_counter() - start, result)
            if name == "compiled":
                children, prepared = int(seen.get("children", 0)), seen.get("prepared")
            print(f"  album {a} (N = {len(A)}, d = {d}), {name}: {result.status}, protected-k {protected_k(A, result.keep)}, "
                  f"{int(result.work):,} nodes, {out[name][0]:.2f} s", flush=True)
        per_node = children / max(1, int(out["compiled"][1].work))
        floor = children * compare_seconds(prepared, per_node) if prepared is not None and children else 0.0
        base = out["numpy"][1]
        same = all(np.array_equal(r.keep, base.keep) and r.status == base.status for _, r in out.values())
        rows.append((a, len(A), d, int(base.work), [out[name][0] for name, _, _ in runs], same, children, floor,
                     all(r.status == "optimal" for _, r in out.values())))
    header = " | ".join(f"{name} s" for name, _, _ in runs)
    print(f"\n| album | N | d | nodes (one process) | {header} | compiled / numpy | {args.workers} workers / numpy | "
          f"same mask and status | children bounded | comparisons alone s | floor share |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for a, n, d, nodes, seconds, same, children, floor, _ in rows:
        print(f"| {a} | {n} | {d} | {nodes:,} | " + " | ".join(f"{s:.2f}" for s in seconds)
              + f" | {seconds[1] / seconds[0]:.3f}x | {seconds[2] / seconds[0]:.3f}x | {'yes' if same else 'NO'} | "
              f"{children:,} | {floor:.2f} | {floor / seconds[1] if seconds[1] else 0:.2f} |")
    for k, (name, _, _) in enumerate(runs):
        times = [r[4][k] for r in rows]
        proven10 = sum(1 for r in rows if r[8] and r[4][k] <= 10)
        print(f"{name}: median {statistics.median(times):.2f} s, max {max(times):.2f} s, "
              f"proven in <= 10 s: {proven10}/{len(rows)}")


if __name__ == "__main__":
    main()
