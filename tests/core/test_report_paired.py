"""Paired differences between cells scored on the same images (`vispriv report --paired`, issue 12)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from core_helpers import toy_config

from vispriv.harness.config import validate_config
from vispriv.harness.errors import VisprivError
from vispriv.harness.matrix import build_matrix
from vispriv.harness.report import CellRow, collect, write_report
from vispriv.harness.report.paired import ladders, overlap_robust_se, per_image_scores
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


def test_overlap_robust_se_by_hand_and_limits():
    # three crops in a row: neighbours share half their pixels (weight 1/2), two apart none (0)
    ids = ["p@0,0", "p@0,1", "p@0,2"]
    d = np.array([1.0, 2.0, 4.0])  # e = (-4, -1, 5) / 3: sum w e e = 42/9 - 1/9 = 41/9, over n(n-1) = 6
    assert overlap_robust_se(ids, d) == pytest.approx(math.sqrt(41 / 54))
    # crops of different photos, or two steps apart, are independent: the usual sd / sqrt(n)
    far = ["p@0,0", "q@0,0", "p@2,2", "q@0,2"]
    x = np.array([0.3, 0.1, 0.5, 0.2])
    assert overlap_robust_se(far, x) == pytest.approx(x.std(ddof=1) / 2)
    assert overlap_robust_se(["x", "y"], x[:2]) is None  # not grid crops
    # neighbours that move together: the robust s.e. exceeds the naive one (effective n < n)
    grid = [f"p@{r},{c}" for r in range(4) for c in range(4)]
    block = np.array([(r // 2) * 2 + c // 2 for r in range(4) for c in range(4)], float)
    assert overlap_robust_se(grid, block) > 1.3 * block.std(ddof=1) / 4


def test_ladder_gives_the_effective_n_of_grid_crops():
    ids = [f"p@{r},{c}" for r in range(4) for c in range(4)]
    rng = np.random.default_rng(0)
    base = rng.normal(0.5, 0.1, 16)
    smooth = np.array([(r // 2) + (c // 2) for r in range(4) for c in range(4)], float) * 0.01
    scores = {"a": dict(zip(ids, base + 0.02 + smooth)), "b": dict(zip(ids, base))}
    (ladder,) = ladders([_row("a", "A"), _row("b", "B")], "images/ssim", scores)
    top = ladder.steps[0]
    assert top.diff_se_overlap == pytest.approx(overlap_robust_se(ids, np.array([scores["a"][i] - scores["b"][i] for i in ids])))
    assert top.n_effective == pytest.approx(16 * (top.diff_se / top.diff_se_overlap) ** 2)
    assert top.n_effective < 16 and top.ratio_overlap < top.ratio


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
