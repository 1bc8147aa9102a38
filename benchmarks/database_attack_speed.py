"""The database attack (LDP-Feat (ICCV 2023) section 4.1) against its full-sort predecessor, same process.

The attack as it stands (:func:`vispriv.plugins.descriptor_release.recovery.database_attack`:
a selection instead of a sort, one product for the scores) against the implementation up
to commit 0bae157 (the ``n_adv + |V|`` nearest rows by top-k, then a (chunk, |V|, n_adv,
128) difference tensor for the scores and a float64 Eq. (1) over all of V), read from git
history, on the same random unit descriptors, lifting (hybrid) and defaults (|V| = |W| / 8,
|U| = 1). Prints for each (|W|, m): seconds per 1,000 subspaces of both, the speed-up, the
largest difference between the two estimates, and the new code's share of the matmul roof
(its FLOPs: the kernel's (m + 1) and the scores' n_adv products per row pair) beside a float32
1024^3 matmul measured in the same process. Needs a git checkout. Usage (about 2 minutes on
2 cores)::

    .venv/bin/python benchmarks/database_attack_speed.py [--sizes 4096 262144] [--m 2 4] [--subspaces 64]

The predecessor's score tensor at |W| = 262,144 and m = 16 (n_adv 8) would be 256 x 32,768 x
8 x 128 float32 = 34 GB, so its m is kept small here.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from vispriv.plugins.attacks.database import default_v_size
from vispriv.plugins.descriptor_release.recovery import database_attack
from vispriv.plugins.descriptor_release.subspace import lift

BEFORE = "0bae157"


def previous_implementation():
    """The module ``recovery.py`` as of :data:`BEFORE`, loaded from git."""
    root = Path(__file__).resolve().parent.parent
    src = subprocess.run(["git", "show", f"{BEFORE}:plugins/descriptor_release/recovery.py"], cwd=root,
                         capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "recovery_before.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("recovery_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def unit_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    x = np.abs(rng.normal(size=(n, 128))).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 262_144])
    ap.add_argument("--m", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--subspaces", type=int, default=64, help="subspaces per run at |W| > 4,096 (1,000 below)")
    args = ap.parse_args()
    before = previous_implementation()
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    a @ b
    t_mm = min(timed(torch.mm, a, b)[0] for _ in range(5))
    roof = 2 * 1024**3 / t_mm / 1e9
    print(f"torch threads {torch.get_num_threads()}; matmul 1024^3 float32 {t_mm * 1e3:.2f} ms = {roof:.1f} GFLOP/s")
    print("| W rows | m | V rows | before (s / 1,000 subspaces) | now | speed-up | largest estimate difference | now, % of matmul roof |")
    print("|---|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for size in args.sizes:
        db = unit_rows(rng, size)
        n_sub = 1000 if size <= 4096 else args.subspaces
        for m in args.m:
            n_adv = m // 2
            v = default_v_size(size, n_adv)
            lifted = lift(unit_rows(rng, n_sub), m, "hybrid", np.random.default_rng(2), database=db)
            database_attack(db, lifted.offsets[:8], lifted.bases[:8], n_adv, v, 1)  # warm-up
            call = (db, lifted.offsets, lifted.bases, n_adv, v, 1)
            t_old, (est_old, _, _) = timed(before.database_attack, *call)
            t_new, rec = timed(database_attack, *call)
            flops = 2.0 * n_sub * (m + 1 + n_adv) * 128 * size
            diff = float(np.abs(est_old - rec.estimates).max())
            print(f"| {size:,} | {m} | {v:,} | {t_old * 1000 / n_sub:.2f} | {t_new * 1000 / n_sub:.2f} | {t_old / t_new:.1f}x "
                  f"| {diff:.1e} | {flops / t_new / 1e9 / roof:.0%} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
