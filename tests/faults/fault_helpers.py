"""Helpers of the fault-injection suite: tiny configs, the driver subprocess, reading the store with sqlite3."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import yaml
from cli_fork import run_vispriv

DRIVER = Path(__file__).parent / "driver.py"

#: Two descriptor-release cells that each write cache entries of their own (SIFT of two image
#: sizes, a k-means dictionary each): small enough for seconds per cell. Utility (RANSAC
#: matching) is off: it writes no other kind of entry and would triple the time.
DESCRIPTOR = {
    "name": "faults-descriptor",
    "seed": 0,
    "datasets": [{"name": "bundled-images", "size": [48, 56], "sift": {"max_keypoints": 48}}],
    "defenses": [{"name": "affine-lifting", "mode": "random", "m": 4, "database_size": 32,
                  "database_augment": 0, "kmeans_niter": 4, "utility": False}],
    "attacks": [{"name": "nearest", "database_size": 32, "database_augment": 0, "kmeans_niter": 4}],
    "metrics": ["descriptor-recovery"],
}

#: Two image-release cells whose metric writes a per-image CSV artifact (for the artifact kill).
IMAGES = {
    "name": "faults-images",
    "seed": 0,
    "datasets": [{"name": "sample-images", "size": 16, "n_private": 2}],
    "defenses": [{"name": "pixelate", "block": [2, 4]}],
    "attacks": [{"name": "as-released"}],
    "metrics": ["ssim"],
}


def write_config(folder: Path, config: dict) -> Path:
    path = folder / f"{config['name']}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def vispriv(
    folder: Path, config: Path, *args: str, fault: str = "none", preexec: Callable[[], None] | None = None,
    wrap: list[str] | None = None, env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """``vispriv matrix CONFIG`` with the store and cache in ``folder``, through the fault driver."""
    driver_args = [fault, "matrix", str(config), "--quiet",
                   "--tracking-uri", f"sqlite:///{folder / 'mlflow.db'}", "--cache-dir", str(folder / "cache"), *args]
    full_env = {**os.environ, "VISPRIV_PLUGINS": "descriptor-release,image-release,metrics", **(env or {})}
    if wrap is None and preexec is None:  # a process of its own, forked from the warm test server
        return run_vispriv(driver_args, cwd=folder, env=full_env, timeout=300, script=DRIVER)
    return subprocess.run([*(wrap or []), sys.executable, str(DRIVER), *driver_args], cwd=folder, env=full_env,
                          capture_output=True, text=True, timeout=300, preexec_fn=preexec)


def copy_store(empty_store: Path, folder: Path) -> None:
    """A freshly migrated store in ``folder`` (migrating one takes seconds: done once per session)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(empty_store, folder / "mlflow.db")


def cell_runs(db: Path) -> list[tuple[str, str, str]]:
    """(run id, cell hash, status) of every cell run of the store."""
    with sqlite3.connect(db) as con:
        return con.execute(
            "select r.run_uuid, t.value, r.status from runs r join tags t on r.run_uuid = t.run_uuid "
            "join tags k on r.run_uuid = k.run_uuid "
            "where t.key = 'vispriv.cell_hash' and k.key = 'vispriv.kind' and k.value = 'cell'"
        ).fetchall()


def statuses(db: Path) -> dict[str, Counter]:
    """Per cell hash, how many of its runs have each status."""
    out: dict[str, Counter] = {}
    for _, cell, status in cell_runs(db):
        out.setdefault(cell, Counter())[status] += 1
    return out


def finished_metrics(db: Path) -> dict[str, dict[str, float]]:
    """Per cell hash, the metrics of its FINISHED run (exactly one per cell is asserted)."""
    out: dict[str, dict[str, float]] = {}
    with sqlite3.connect(db) as con:
        for run_id, cell, status in cell_runs(db):
            if status != "FINISHED":
                continue
            assert cell not in out, f"cell {cell} has more than one FINISHED run"
            rows = con.execute("select key, value from latest_metrics where run_uuid = ?", (run_id,)).fetchall()
            out[cell] = dict(rows)
    return out


def artifact_root(db: Path, run_id: str) -> Path:
    with sqlite3.connect(db) as con:
        (uri,) = con.execute("select artifact_uri from runs where run_uuid = ?", (run_id,)).fetchone()
    return Path(uri.removeprefix("file://"))


def stderr_lines(proc: subprocess.CompletedProcess, prefix: str) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith(prefix)]
