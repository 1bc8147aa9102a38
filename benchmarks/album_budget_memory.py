"""Peak memory and time of the budget branch and bound against the nodes it expands.

Runs :func:`vispriv.plugins.album.milp.fast_budget` (no wall-clock limit, ``node_limit`` as
given) on user albums of examples/album.yaml's ``milp-budget`` cell, each run in a fresh
process, and prints its peak resident memory (``ru_maxrss``), seconds, nodes expanded, status
and protected-k. With ``--old-module`` (a ``budget_search.py`` from git) every run is repeated
with that module in place of the package's, the two alternating, so that both see the same
load: the baseline of the ratios. The search's decisions do not depend on the module's
look-ahead order, so both must report the same nodes, status and protected-k.

    git show 1e3ecb7:plugins/album/budget_search.py > /tmp/old_budget_search.py
    .venv/bin/python benchmarks/album_budget_memory.py --albums 10:200000 10:1200000 12:0 \\
        --old-module /tmp/old_budget_search.py --repeats 2

A module from before ``KeptCount`` and ``workers`` (ce0f1c0 and older) is adapted to the
current milp (:func:`_adapt`); the search itself is the old one.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def child(data: str, album: int, nodes: int, old_module: str) -> None:
    if old_module:  # in place of the package's, before milp imports it
        sys.path.insert(0, str(Path(__file__).parent))
        from dictionary_memory import load_module

        from vispriv.plugins.album.budget_search import KeptCount

        _adapt(load_module(old_module, "vispriv.plugins.album.budget_search"), KeptCount)
    from vispriv.plugins.album import milp
    from vispriv.plugins.album.pruning import protected_k

    with np.load(Path(data) / f"album_{album}.npz") as arrays:  # plain arrays: no pickle
        A, d, S = arrays["A"], int(arrays["d"]), arrays["S"]
    start = time.perf_counter()
    result = milp.fast_budget(A, d, S, time_limit=None, node_limit=nodes or None)
    print(json.dumps(dict(seconds=time.perf_counter() - start, nodes=int(result.work), status=result.status,
                          protected_k=int(protected_k(A, result.keep)),
                          peak_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)))


def _adapt(module, kept_count: type) -> None:  # type: ignore[no-untyped-def]
    """Give a ``budget_search.py`` from before ``KeptCount`` and ``workers`` (commit ce0f1c0
    and older) what milp imports and passes now: the package's own ``KeptCount`` (it only
    counts) and a ``branch_and_bound`` that takes ``workers`` (always 1 here) and calls the
    old one."""
    if hasattr(module, "KeptCount"):
        return
    search = module.branch_and_bound

    def branch_and_bound(*args, workers: int = 1, **kwargs):  # type: ignore[no-untyped-def]
        return search(*args, **kwargs)

    module.KeptCount = kept_count
    module.branch_and_bound = branch_and_bound


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--albums", nargs="+", default=["10:200000", "10:1200000", "12:0"],
                        help="ALBUM:NODES (user album of examples/album.yaml; NODES 0 = no node limit)")
    parser.add_argument("--old-module", default="", help="a budget_search.py to compare with (the baseline)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        data, album, nodes, old = args.child
        child(data, int(album), int(nodes), old if old != "-" else "")
        return
    sys.path.insert(0, str(Path(__file__).parent))
    from album_budget_gap import budget_albums

    albums, _ = budget_albums("examples/album.yaml", "albums")
    data = Path(tempfile.mkdtemp())
    for a in {int(spec.split(":")[0]) for spec in args.albums}:
        A, d, S = albums[a]
        np.savez(data / f"album_{a}.npz", A=A, d=d, S=S)
    paths = [("HEAD", "-")] + ([("old", args.old_module)] if args.old_module else [])
    rows = []
    for spec in args.albums:
        album, nodes = spec.split(":")
        runs: dict[str, list[dict]] = {name: [] for name, _ in paths}
        for _ in range(args.repeats):
            for name, module in paths:
                out = subprocess.run([sys.executable, __file__, "--child", str(data), album, nodes, module],
                                     capture_output=True, text=True, check=True)
                runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(f"  album {album}, node limit {nodes or 'none'}, {name}: {runs[name][-1]}", flush=True)
        for name, _ in paths:
            last = runs[name][-1]
            rows.append((album, nodes, name, last["status"], last["nodes"], last["protected_k"],
                         statistics.median(r["seconds"] for r in runs[name]),
                         max(r["peak_mib"] for r in runs[name])))
    print("\n| album | node limit | code | status | nodes | protected-k | seconds (median) | peak RSS (MiB) | time / baseline | peak / baseline |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for album, nodes, name, status, n, k, seconds, peak in rows:
        base = next(r for r in rows if r[:2] == (album, nodes) and r[2] == paths[-1][0])
        limit = f"{int(nodes):,}" if int(nodes) else "none"
        print(f"| {album} | {limit} | {name} | {status} | {n:,} | {k} | {seconds:.1f} | {peak:.0f} | "
              f"{seconds / base[6]:.2f} | {peak / base[7]:.2f} |")


if __name__ == "__main__":
    main()
