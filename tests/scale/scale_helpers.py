"""Helpers of the scale-out tests: the core's toy plugin distribution, stores, matrices."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from vispriv.harness.config import validate_config
from vispriv.harness.execute import clear_memo
from vispriv.harness.matrix import build_matrix
from vispriv.harness.registry import load_registry
from vispriv.harness.runner import MatrixResult, run_matrix
from vispriv.harness.tracking import Tracker

# One copy of the toy distribution's path and of the mlflow-server helper: the core's.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from core_helpers import SITE_OK, mlflow_server

__all__ = ["SITE_OK", "mlflow_server"]

#: Entry points these tests load: the toy scenario and the image metrics.
PLUGINS = "toy,metrics,image-release"


def toy_config(**overrides: object) -> dict:
    config: dict = {
        "name": "toy-scale",
        "seed": 3,
        "datasets": [{"name": "toy-images", "n": 3}],
        "defenses": [{"name": "toy-noise", "sigma": [0.05, 0.2]}, {"name": "toy-histogram"}],
        "attacks": [{"name": "toy-denoise"}],
    }
    config.update(overrides)
    return config


def toy_registry():  # type: ignore[no-untyped-def]
    if str(SITE_OK) not in sys.path:
        sys.path.insert(0, str(SITE_OK))
    return load_registry(only=PLUGINS.split(","))


def new_tracker(folder: Path) -> Tracker:
    folder.mkdir(parents=True, exist_ok=True)
    return Tracker(f"sqlite:///{folder / 'mlflow.db'}")


def run_toy(config: dict, tracker: Tracker, cache: Path, executor: str = "local", resume: bool = False,
            **options: object) -> MatrixResult:
    clear_memo()
    cfg = validate_config(config)
    matrix = build_matrix(cfg, toy_registry())
    return run_matrix(cfg, matrix, tracker, resume=resume, executor=executor, executor_options=options,
                      quiet=True, cache_dir=str(cache))


def metrics_by_hash(tracker: Tracker, experiment: str) -> dict[str, dict[str, float]]:
    exp = tracker.experiment_id(experiment, create=False)
    return {r.data.tags["vispriv.cell_hash"]: dict(r.data.metrics) for r in tracker.cell_runs(exp, "FINISHED")}


def run_cli(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(SITE_OK), "VISPRIV_PLUGINS": PLUGINS, "RAY_USAGE_STATS_ENABLED": "0"}
    return subprocess.run([sys.executable, "-m", "vispriv", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst
