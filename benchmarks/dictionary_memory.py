"""Peak memory of building a two-level descriptor dictionary against the number of descriptors.

Each size runs in a fresh process and prints its peak resident memory (``ru_maxrss``: the
interpreter, numpy, faiss and everything the build touched) and its time:

* ``new``: the streaming path of ``build_dictionary`` -- a SYNTHETIC SIFT-like stream
  (COLMAP-quantised rows around 4,096 random centres, made a chunk at a time) written to an
  on-disk store (``descriptor_store``, a temporary file), then ``dictionary_from_store``: the
  k-means on at most ``KMEANS_SAMPLE`` rows, the top level assigned in chunks;
  ``--sample`` lowers the bound, to show at a small N what happens beyond it;
* ``old`` (``--old-module``, e.g. the dictionary module before streaming, from git): the same
  stream as the one (N, 128) float32 array the old SIFT stage handed over (a list of
  blocks, concatenated), then that module's in-memory ``hierarchical_kmeans``.

Neither includes rendering or SIFT of images (the old SIFT stage also held every view as
float32 and float64 at once; the streamed one holds one view). The "limit" column is what
the new path must hold: the sample (512 bytes a row), its assignment and sort order (16
bytes a row), one chunk and the words.

    git show <old-commit>:plugins/descriptor_release/dictionary.py > /tmp/old_dictionary.py
    nice .venv/bin/python benchmarks/dictionary_memory.py --sizes 1 2 4 --old-sizes 0.25 \\
        --old-module /tmp/old_dictionary.py --k 65536 --niter 10
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import subprocess
import sys
import time
from collections.abc import Iterator

import numpy as np

ROOM_DESCRIPTORS = 4_500_000  # the localisation room's dictionary K (docs/localisation.md)
CENTRES = 4096


def synthetic_blocks(n: int, seed: int = 0, rows: int = 65536) -> Iterator[np.ndarray]:
    """``n`` SIFT-like rows (non-negative, COLMAP lattice, unit norm) in blocks of ``rows``, deterministic."""
    from vispriv.plugins.descriptor_release.sift import quantize_colmap

    centres = (np.abs(np.random.default_rng(seed).normal(size=(CENTRES, 128))) ** 2).astype(np.float32)
    for start in range(0, n, rows):
        m = min(rows, n - start)
        rng = np.random.default_rng([seed, start])
        noise = np.abs(rng.normal(size=(m, 128)).astype(np.float32))
        yield quantize_colmap(centres[rng.integers(0, CENTRES, m)] + noise)


def load_module(path: str, name: str = "dictionary_under_test"):  # type: ignore[no-untyped-def]
    """The Python file ``path`` imported as module ``name`` (e.g. a module's version from git, as the baseline)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def child(args: argparse.Namespace) -> None:
    import faiss  # noqa: F401 -- loaded before the baseline reading, as both paths use it

    from vispriv.harness import Cache
    from vispriv.plugins.descriptor_release.descriptor_store import descriptor_store
    from vispriv.plugins.descriptor_release.dictionary import dictionary_from_store

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    if args.path == "old":
        mod = load_module(args.old_module)
        x = np.concatenate(list(synthetic_blocks(args.n)))
        t1 = time.perf_counter()
        words = mod.hierarchical_kmeans(x, args.k, 0, niter=args.niter)
    else:
        with descriptor_store(Cache(None), "bench", args.n, synthetic_blocks(args.n)) as store:
            t1 = time.perf_counter()
            words = dictionary_from_store(store, args.k, 0, niter=args.niter, method="hierarchical", sample=args.sample)
    t2 = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"n": args.n, "path": args.path, "before_mib": before / 1024, "peak_mib": peak / 1024,
                      "stream_s": t1 - t0, "kmeans_s": t2 - t1, "words": len(words)}))


def run(path: str, n: int, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--child", "--path", path, "--n", str(n), "--k", str(args.k), "--niter", str(args.niter),
           "--sample", str(args.sample)]
    if args.old_module:
        cmd += ["--old-module", args.old_module]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=float, nargs="+", default=[1, 2, 4], help="multiples of the room's 4.5M (new path)")
    p.add_argument("--old-sizes", type=float, nargs="*", default=[], help="multiples run by both paths (the baseline)")
    p.add_argument("--old-module", default="", help="a dictionary.py from before streaming (needed for --old-sizes)")
    p.add_argument("--k", type=int, default=262144, help="words (Table 2's largest K: 262,144)")
    p.add_argument("--niter", type=int, default=20)
    p.add_argument("--sample", type=int, default=0, help="the k-means sample bound (0 = KMEANS_SAMPLE, the code's)")
    p.add_argument("--child", action="store_true")
    p.add_argument("--path", choices=["old", "new"], default="new")
    p.add_argument("--n", type=int, default=0)
    args = p.parse_args()
    from vispriv.plugins.descriptor_release.dictionary import KMEANS_SAMPLE

    args.sample = args.sample or KMEANS_SAMPLE
    if args.child:
        child(args)
        return

    jobs = [(s, "old") for s in args.old_sizes] + [(s, "new") for s in sorted(set(args.old_sizes) | set(args.sizes))]
    rows = {}
    for size, path in jobs:
        n = int(round(size * ROOM_DESCRIPTORS))
        rows[(size, path)] = r = run(path, n, args)
        print(json.dumps(r), flush=True)
    print(f"\nk = {args.k}, niter = {args.niter}, sample bound = {args.sample:,} (KMEANS_SAMPLE = {KMEANS_SAMPLE:,})\n")
    print("| N (x 4.5M) | path | peak RSS (GiB) | limit (GiB) | stream + k-means (s) | peak / old |")
    print("|---|---|---|---|---|---|")
    for (size, path), r in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1] == "new")):
        s = min(r["n"], args.sample)
        limit = (s * (512 + 16) + 65536 * 512 + args.k * 512) / 2**30 if path == "new" else float("nan")
        old = rows.get((size, "old"))
        ratio = f"{r['peak_mib'] / old['peak_mib']:.2f}" if old and path == "new" else "-"
        print(f"| {r['n']:,} ({size:g}) | {path} | {r['peak_mib'] / 1024:.2f} | "
              f"{'-' if path == 'old' else f'{limit:.2f}'} | {r['stream_s']:.0f} + {r['kmeans_s']:.0f} | {ratio} |")


if __name__ == "__main__":
    main()
