"""examples/localisation.yaml through `vispriv matrix` (a fresh clone's small localisation run), and the paper configs build."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from vispriv.harness.config import load_config
from vispriv.harness.matrix import build_matrix
from vispriv.harness.registry import load_registry

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PAPER = ("paper/ldp_feat_table2_localisation.yaml", "paper/ldp_feat_table3_ablation.yaml")


def test_localisation_example_runs_through_the_matrix(tmp_path: Path, localisation_cache: Path) -> None:
    env = {**os.environ, "VISPRIV_PLUGINS": "metrics,descriptor-release"}
    run = subprocess.run(
        [sys.executable, "-m", "vispriv", "matrix", str(EXAMPLES / "localisation.yaml"), "--quiet",
         "--cache-dir", str(localisation_cache)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "4 cells finished, 0 failed" in run.stdout, run.stdout[-2000:]
    with sqlite3.connect(tmp_path / "mlflow.db") as db:
        rows = db.execute("SELECT key, value FROM latest_metrics WHERE key LIKE 'utility/locali%'").fetchall()
    names = {k for k, _ in rows}
    assert {"utility/localised_0.25m_2deg", "utility/localised_5m_10deg_se", "utility/localisation_median_inliers"} <= names
    rates = [v for k, v in rows if k == "utility/localised_5m_10deg"]
    assert len(rates) == 4 and all(0.0 <= v <= 100.0 for v in rates)
    assert max(rates) > 0.0, "no defense localised a single query of the small room"


@pytest.mark.parametrize("name", PAPER)
def test_paper_localisation_configs_build(name: str, tmp_path: Path) -> None:
    registry = load_registry(strict=True)
    mx = build_matrix(load_config(EXAMPLES / name), registry)
    assert mx.cells and all(cell.metrics for cell in mx.cells)
    root_set = build_matrix(load_config(EXAMPLES / name, [f"datasets.0.root={tmp_path}"]), registry)
    assert len(root_set.cells) == len(mx.cells)
