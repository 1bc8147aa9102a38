"""Reports whose numbers agree and whose colours mean something: headline metrics, bookkeeping,
anchored colours, and a report folder that keeps only the figures it references."""

from __future__ import annotations

import json

from core_helpers import toy_config

from vispriv.harness.config import validate_config
from vispriv.harness.matrix import build_matrix
from vispriv.harness.report import write_report
from vispriv.harness.report.manifest import MANIFEST
from vispriv.harness.runner import run_matrix


def _toy_store(toy_registry, tracker, tmp_path) -> None:
    cfg = validate_config(toy_config(defenses=[{"name": "toy-noise", "sigma": [0.05, 0.2]}]))
    run_matrix(cfg, build_matrix(cfg, toy_registry), tracker, quiet=True, cache_dir=str(tmp_path / "cache"))


# -- stale figures --------------------------------------------------------------------------
def test_a_report_run_removes_the_figures_it_wrote_before_and_no_longer_references(toy_registry, tracker, tmp_path):
    """A report folder kept 44 heatmaps under old names, 8 of them referenced; a user's files stay."""
    _toy_store(toy_registry, tracker, tmp_path)
    out = tmp_path / "rep"
    first = write_report(tracker, "toy", out, metrics=["images/ssim", "images/mae"], log_to_parent=False)
    assert sorted(p.name for p in out.glob("heatmap_*.png")) == ["heatmap_toy__images_mae.png", "heatmap_toy__images_ssim.png"]
    user_png, user_notes = out / "heatmap_mine.png", out / "notes.txt"
    user_png.write_bytes(b"not the report's")
    user_notes.write_text("mine\n")
    outside = tmp_path / "outside.png"
    outside.write_bytes(b"beside the folder")
    listed = json.loads((out / MANIFEST).read_text())["files"]
    assert listed == sorted(p.name for p in first.files)
    (out / MANIFEST).write_text(json.dumps({"files": [*listed, "../outside.png"]}))  # a manifest cannot reach out
    second = write_report(tracker, "toy", out, metrics=["images/ssim"], log_to_parent=False)
    assert sorted(p.name for p in out.glob("heatmap_*.png")) == ["heatmap_mine.png", "heatmap_toy__images_ssim.png"]
    assert user_png.read_bytes() == b"not the report's" and user_notes.read_text() == "mine\n"
    assert outside.read_bytes() == b"beside the folder"
    assert json.loads((out / MANIFEST).read_text())["files"] == sorted(p.name for p in second.files)
