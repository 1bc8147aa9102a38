"""Wall time of the light CLI commands, as ratios to ``python -c "import numpy"``.

``vispriv --help``, ``vispriv plugins`` and ``vispriv matrix CONFIG --dry-run`` import every
built-in plugin module (registration) but none of torch, lightning or mlflow
(tests/core/test_cli_imports.py asserts that). Measured in one process, interleaved, best
of ``--repeats`` fresh interpreters each:

* floor: ``python -c pass`` (interpreter start, the physical limit of any command);
* baseline: ``python -c "import numpy"``;
* each command, and for scale ``python -c "import torch"`` (what every command paid before).

Also prints this machine's float32 matmul rate (GFLOP/s, numpy) so the absolute times can
be compared across machines. Usage::

    .venv/bin/python benchmarks/cli_startup.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "descriptor_release.yaml"


def matmul_gflops(n: int = 1024, repeats: int = 5) -> float:
    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    b = a.T.copy()
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2 * n**3 / best / 1e9


def _timed(fn) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def run(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    py = sys.executable
    commands = {
        "python -c pass (floor)": [py, "-c", "pass"],
        "python -c 'import numpy' (baseline)": [py, "-c", "import numpy"],
        "vispriv --help": [py, "-m", "vispriv", "--help"],
        "vispriv plugins": [py, "-m", "vispriv", "plugins"],
        "vispriv matrix descriptor_release.yaml --dry-run": [py, "-m", "vispriv", "matrix", str(EXAMPLE), "--dry-run"],
        "python -c 'import torch' (for scale)": [py, "-c", "import torch"],
    }
    for cmd in commands.values():  # warm the file cache and __pycache__
        run(cmd)
    times: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(args.repeats):
        for name, cmd in commands.items():
            times[name].append(run(cmd))
    best = {k: min(v) for k, v in times.items()}
    base = best["python -c 'import numpy' (baseline)"]
    floor = best["python -c pass (floor)"]
    print(f"machine: float32 matmul {matmul_gflops():.0f} GFLOP/s (numpy, n = 1024); best of {args.repeats}")
    print(f"{'command':52} {'seconds':>8} {'x numpy import':>15} {'x python start':>15}")
    for name, t in best.items():
        print(f"{name:52} {t:8.2f} {t / base:15.1f} {t / floor:15.1f}")


if __name__ == "__main__":
    main()
