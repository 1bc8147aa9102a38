"""Scaling: wall time of one matrix with the local executor vs Ray with N workers.

The matrix is the toy scenario of the core's tests with a CPU-bound attack (``toy-denoise``
with ``work`` seconds of busy arithmetic per cell, no sleep), so the ratio measures how
well cells spread over cores, including Ray's start-up and per-task overhead. Both runs
log to their own fresh sqlite store, in this process, one after the other.

    .venv/bin/python benchmarks/scaling.py --cells 8 --work 2.0 --workers 2
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "scale"))

from scale_helpers import new_tracker, run_toy, toy_config  # noqa: E402


def _config(cells: int, work: float) -> dict:
    sigmas = [round(0.01 * (i + 1), 3) for i in range(cells)]
    return toy_config(name="scaling", defenses=[{"name": "toy-noise", "sigma": sigmas}],
                      attacks=[{"name": "toy-denoise", "work": work}])


def _timed(config: dict, folder: Path, executor: str, **options: object) -> tuple[float, int]:
    start = time.perf_counter()
    result = run_toy(config, new_tracker(folder), folder / "cache", executor=executor, **options)
    return time.perf_counter() - start, len(result.finished)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=8)
    parser.add_argument("--work", type=float, default=2.0, help="CPU seconds of busy work per cell")
    parser.add_argument("--workers", type=int, default=2, help="CPUs of the local Ray instance")
    args = parser.parse_args()
    config = _config(args.cells, args.work)
    with tempfile.TemporaryDirectory() as tmp:
        local_s, n_local = _timed(config, Path(tmp) / "local", "local")
        ray_s, n_ray = _timed(config, Path(tmp) / "ray", "ray", num_cpus=args.workers)
    assert n_local == n_ray == args.cells, (n_local, n_ray)
    print(f"machine: {os.cpu_count()} CPUs; {args.cells} cells x {args.work:.1f} s of CPU work each")
    print(f"local executor      : {local_s:7.1f} s")
    print(f"ray, {args.workers} workers      : {ray_s:7.1f} s (includes starting and stopping Ray)")
    print(f"speed-up local/ray  : {local_s / ray_s:5.2f}x")


if __name__ == "__main__":
    main()
