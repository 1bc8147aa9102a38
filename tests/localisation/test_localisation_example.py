"""examples/localisation.yaml through `vispriv matrix` (a fresh clone's small localisation run), and the paper configs build."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from cli_fork import run_vispriv

from vispriv.harness.config import load_config
from vispriv.harness.matrix import build_matrix
from vispriv.harness.registry import load_registry

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PAPER = ("paper/ldp_feat_table2_localisation.yaml", "paper/ldp_feat_table3_ablation.yaml")


def test_localisation_example_runs_through_the_matrix(tmp_path: Path, localisation_cache: Path) -> None:
    env = {**os.environ, "VISPRIV_PLUGINS": "metrics,descriptor-release"}
    run = run_vispriv(["matrix", str(EXAMPLES / "localisation.yaml"), "--quiet", "--cache-dir", str(localisation_cache)],
                      cwd=tmp_path, env=env, timeout=600)
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


#: Fixture scale for the localisation paper configs: sizes only (room, photos, keypoints, RANSAC
#: budget, dictionary), every row and sweep of the table kept.
FIXTURE_SIZES = (
    "datasets.*.scene.width=160", "datasets.*.scene.height=120", "datasets.*.scene.focal=130.0",
    "datasets.*.scene.supersample=1", "datasets.*.scene.n_references=8", "datasets.*.scene.n_queries=3",
    "datasets.*.scene.n_dictionary_views=0", "datasets.*.sift.max_keypoints=512",
    "datasets.*.protocol.query_keypoints=256", "datasets.*.protocol.map_keypoints=512",
    "datasets.*.protocol.ransac_trials=500",
)


def _fixture_overrides(path: Path) -> list[str]:
    """``--set`` lines that shrink every dataset and every ldp-feat dictionary of a paper config."""
    import yaml

    raw = yaml.safe_load(path.read_text())
    sets = [s.replace("*", str(i)) for i in range(len(raw["datasets"])) for s in FIXTURE_SIZES]
    for i, d in enumerate(raw["defenses"]):
        if d["name"] == "ldp-feat":
            size = d["dictionary_size"]
            small = [256 * (j + 1) for j in range(len(size))] if isinstance(size, list) else 256
            sets += [f"defenses.{i}.dictionary_size={small}", f"defenses.{i}.quantiser=exact",
                     f"defenses.{i}.sift.max_keypoints=512"]
    return [a for s in sets for a in ("--set", s)]


@pytest.mark.slow
@pytest.mark.parametrize("name", PAPER)
def test_paper_localisation_configs_run_at_fixture_scale(name: str, tmp_path: Path) -> None:
    """Every row of the paper config runs through `vispriv matrix` (sizes shrunk, rows and sweeps kept)."""
    env = {**os.environ, "VISPRIV_PLUGINS": "metrics,descriptor-release"}
    planned = len(build_matrix(load_config(EXAMPLES / name), load_registry(strict=True)).cells)
    run = run_vispriv(["matrix", str(EXAMPLES / name), "--quiet", *_fixture_overrides(EXAMPLES / name)],
                      cwd=tmp_path, env=env, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"{planned} cells finished, 0 failed" in run.stdout, run.stdout[-2000:]
    with sqlite3.connect(tmp_path / "mlflow.db") as db:
        rates = db.execute("SELECT value FROM latest_metrics WHERE key = 'utility/localised_5m_10deg'").fetchall()
    assert len(rates) == planned and all(0.0 <= v <= 100.0 for (v,) in rates)
