"""Peak memory of album-photos ``features: network`` against the number of photos.

Writes ``max(--photos)`` JPEGs (scikit-image's photos, 4:3, ``--source`` px on the long side,
shifted crops so no two are equal), then for each N of ``--photos`` runs
``train_features`` on the first N in a fresh process (``--steps`` optimiser steps, a
fresh cache folder) and prints its peak resident memory (``ru_maxrss``, which counts
everything the process touched: the interpreter, torch, Lightning and the thumbnails)
and the slope between consecutive N: the memory each stored photo costs. Decoding time
is not the point here (benchmarks/pipeline_stages.py times it).

``--module PATH`` loads ``train_features`` from another copy of
``plugins/album/photo_network.py`` (e.g. an older one from git) to compare readers; a
module whose ``train_features`` takes no ``cache`` runs as it is.

    .venv/bin/python benchmarks/album_thumbnail_memory.py --photos 250 1000 2000 --size 128
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def write_photos(folder: Path, n: int, source: int) -> list[Path]:
    from PIL import Image
    from skimage import data

    bases = [np.asarray(Image.fromarray(f()).resize((source + 64, source * 3 // 4 + 48))) for f in
             (data.astronaut, data.coffee, data.chelsea, data.rocket)]
    paths = []
    for i in range(n):
        dy, dx = (i // 4) % 48, (i // 4 // 48) % 64
        crop = bases[i % 4][dy : dy + source * 3 // 4, dx : dx + source]
        path = folder / f"{i:05d}.jpg"
        Image.fromarray(crop).save(path, quality=90)
        paths.append(path)
    return paths


def child(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(1)
    if args.module:
        spec = importlib.util.spec_from_file_location("photo_network_under_test", args.module)
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
    else:
        from vispriv.plugins.album import photo_network as mod
    from vispriv.harness import Cache

    paths = sorted(Path(args.folder).glob("*.jpg"))[: args.n]
    rng = np.random.default_rng(0)
    train = np.sort(rng.choice(len(paths), int(0.9 * len(paths)), replace=False))
    cells = rng.integers(0, 8, len(train))
    settings = mod.NetworkSettings(args.steps, 8, args.size, 0, "cpu")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    kwargs = {}
    if "cache" in inspect.signature(mod.train_features).parameters:
        kwargs = {"cache": Cache(tempfile.mkdtemp(dir=args.folder, prefix="cache-")), "key": f"n{args.n}"}
    feats = mod.train_features(paths, train, cells, 8, settings, True, **kwargs)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"n": len(paths), "before_mib": before / 1024, "peak_mib": peak / 1024, "seconds": seconds,
                      "features": list(feats.shape)}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--photos", type=int, nargs="+", default=[250, 1000, 2000])
    ap.add_argument("--size", type=int, default=128, help="network_input (thumbnail side)")
    ap.add_argument("--source", type=int, default=512, help="long side of the JPEGs written")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--module", default="", help="another photo_network.py to measure")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--folder", default="", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        write_photos(Path(tmp), max(args.photos), args.source)
        print(f"{args.module or 'plugins/album/photo_network.py'}: {args.size} px thumbnails, {args.steps} steps, "
              f"{args.source} px JPEGs")
        print("| photos | peak RSS (MiB) | after imports (MiB) | seconds | per photo vs previous row |")
        print("|---|---|---|---|---|")
        previous = None
        for n in sorted(args.photos):
            cmd = [sys.executable, __file__, "--child", "--folder", tmp, "--n", str(n), "--size", str(args.size),
                   "--steps", str(args.steps), "--module", args.module]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
            r = json.loads(out)
            slope = "" if previous is None else f"{(r['peak_mib'] - previous['peak_mib']) / (n - previous['n']) * 1024:.1f} KiB"
            print(f"| {n} | {r['peak_mib']:.0f} | {r['before_mib']:.0f} | {r['seconds']:.1f} | {slope} |", flush=True)
            previous = r
        row = 3 * args.size * args.size
        print(f"(one thumbnail: {row / 1024:.0f} KiB as uint8, {4 * row / 1024:.0f} KiB as float32)")


if __name__ == "__main__":
    main()
