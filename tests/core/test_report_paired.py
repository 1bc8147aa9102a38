"""Paired differences between cells scored on the same images (`vispriv report --paired`, issue 12)."""

from __future__ import annotations

import math

import pytest
from core_helpers import toy_config

from vispriv.harness.config import validate_config
from vispriv.harness.errors import VisprivError
from vispriv.harness.matrix import build_matrix
from vispriv.harness.report import CellRow, collect, write_report
from vispriv.harness.report_paired import ladders, per_image_scores
from vispriv.harness.runner import run_matrix


def _row(run_id: str, attack: str, higher: bool = True) -> CellRow:
    return CellRow(run_id=run_id, scenario="s", dataset="d", defense="def", attack=attack, params={},
                   metrics={"images/ssim": 0.0}, higher_is_better={"images/ssim": higher}, artifact_uri="")


def test_adjacent_gaps_are_paired_over_shared_images_by_hand():
    scores = {
        "a": {"x": 0.5, "y": 0.6, "z": 0.7},
        "b": {"x": 0.4, "y": 0.55, "z": 0.6, "only-b": 0.0},
        "c": {"x": 0.1},
    }
    (ladder,) = ladders([_row("c", "C"), _row("a", "A"), _row("b", "B")], "images/ssim", scores)
    assert [s.label.split(" vs ")[0] for s in ladder.steps] == ["A", "B", "C"]
    top = ladder.steps[0]
    # differences over x, y, z: .1, .05, .1 -> mean .08333, sd .028868, se .016667, ratio 5
    assert top.n_pairs == 3
    assert top.diff == pytest.approx(0.25 / 3)
    assert top.diff_se == pytest.approx(0.05 / math.sqrt(3) / math.sqrt(3))
    assert top.ratio == pytest.approx(5.0)
    # B to C share one image: a difference but no standard error
    assert ladder.steps[1].n_pairs == 1 and ladder.steps[1].diff == pytest.approx(0.3) and ladder.steps[1].diff_se is None
    assert ladder.steps[2].diff is None


def test_cells_filter_compares_two_rows_directly():
    scores = {"a": {"x": 0.5, "y": 0.6}, "b": {"x": 0.45, "y": 0.55}, "c": {"x": 0.1, "y": 0.3}}
    rows = [_row("a", "A"), _row("b", "B"), _row("c", "C")]
    (ladder,) = ladders(rows, "images/ssim", scores, cells="^(A|C) vs")
    assert [s.label.split(" vs ")[0] for s in ladder.steps] == ["A", "C"]
    assert ladder.steps[0].diff == pytest.approx(0.35)
    with pytest.raises(VisprivError, match="--paired-cells"):
        ladders(rows, "images/ssim", scores, cells="[")


def test_lower_is_better_ranks_ascending_and_gaps_stay_positive():
    scores = {"a": {"x": 0.1, "y": 0.2}, "b": {"x": 0.3, "y": 0.5}}
    (ladder,) = ladders([_row("b", "B", False), _row("a", "A", False)], "images/ssim", scores)
    assert ladder.steps[0].label.startswith("A") and ladder.steps[0].diff == pytest.approx(0.25)


def test_report_ranks_toy_cells_from_the_image_metrics_per_image_csv(toy_registry, tracker, tmp_path):
    cfg = validate_config(toy_config(defenses=[{"name": "toy-noise", "sigma": [0.05, 0.3]}], metrics=["ssim"]))
    run_matrix(cfg, build_matrix(cfg, toy_registry), tracker, quiet=True, cache_dir=str(tmp_path / "cache"))
    rows = collect(tracker, "toy")
    scores = per_image_scores(tracker, rows, "ssim")
    assert len(scores) == 2 and all(len(v) == 3 for v in scores.values())
    out = write_report(tracker, "toy", tmp_path / "rep", metrics=["ssim"], formats=["md", "html"],
                       log_to_parent=False, paired=["ssim"])
    assert "**Paired differences, images/ssim**" in out.markdown
    lines = [ln for ln in out.markdown.splitlines() if ln.startswith("| 1 | ")]
    assert lines and "sigma=0.05" in lines[0]  # less noise ranks first
    assert "paired differences, images/ssim" in (tmp_path / "rep" / "report.html").read_text()
    one_id = sorted(next(iter(scores.values())))[0]
    subset = per_image_scores(tracker, rows, "ssim", ids=f"^{one_id}$")
    assert all(list(v) == [one_id] for v in subset.values())
    only = write_report(tracker, "toy", tmp_path / "rep3", metrics=["ssim"], formats=["md"], log_to_parent=False,
                        paired=["ssim"], paired_ids=f"^{one_id}$")
    assert f"images matching `^{one_id}$` only" in only.markdown
    with pytest.raises(VisprivError, match="not a regular expression"):
        per_image_scores(tracker, rows, "ssim", ids="(")


def test_paired_metric_without_per_image_values_is_one_clear_error(toy_registry, tracker, tmp_path):
    cfg = validate_config(toy_config(defenses=[{"name": "toy-noise", "sigma": 0.1}], metrics=["ssim"]))
    run_matrix(cfg, build_matrix(cfg, toy_registry), tracker, quiet=True, cache_dir=str(tmp_path / "cache"))
    with pytest.raises(VisprivError, match="per-image CSV"):
        write_report(tracker, "toy", tmp_path / "rep", formats=["md"], log_to_parent=False, paired=["utility/distortion"])
