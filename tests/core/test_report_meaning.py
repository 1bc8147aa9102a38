"""Reports whose numbers agree and whose colours mean something: headline metrics, bookkeeping,
anchored colours, and a report folder that keeps only the figures it references."""

from __future__ import annotations

import json

import matplotlib
import pytest
from core_helpers import toy_config

from vispriv.harness.config import validate_config
from vispriv.harness.matrix import build_matrix
from vispriv.harness.report import CellRow, Pivot, collect, heatmap_figure, pivot, write_report
from vispriv.harness.report.html import LEGEND, hue, table_html
from vispriv.harness.report.manifest import MANIFEST
from vispriv.harness.runner import run_matrix

PSNR_ANCHORS = {"success": [20.0, "the recognisable threshold"]}


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


# -- anchored colours -------------------------------------------------------------------------
def _pivot(metric: str, values: dict[str, float], anchors: dict | None = None, baseline: float | None = None,
           higher_is_better: bool = True) -> Pivot:
    p = Pivot(metric, "federated-learning", list(values), ["none"], higher_is_better=higher_is_better)
    p.values = {(a, "none"): v for a, v in values.items()}
    p.anchors, p.baseline = anchors or {}, baseline
    return p


def test_a_failed_attack_below_the_recognisable_line_is_not_red_beside_a_stronger_one():
    """A DLG that failed at 10.9 dB showed green beside an IG at 15 dB that showed red, both below 20 dB."""
    relative = _pivot("images/psnr", {"dlg": 10.9, "inverting-gradients": 15.0})
    assert (relative.colour_position(10.9), relative.colour_position(15.0)) == (1.0, 0.0)
    assert relative.scale_text() == "colours: relative to this table"
    p = _pivot("images/psnr", {"dlg": 10.9, "inverting-gradients": 15.0, "public-mean-image": 10.2},
               PSNR_ANCHORS, baseline=10.2)
    assert p.colour_position(10.9) == pytest.approx((20 - 10.9) / (20 - 10.2))
    assert p.colour_position(15.0) == pytest.approx((20 - 15.0) / (20 - 10.2))
    assert p.colour_position(10.2) == 1.0 and p.colour_position(25.0) == 0.0 and p.colour_position(float("inf")) == 0.0
    assert hue(p, 15.0) == 61  # yellow: halfway to the recognisable line, not red
    assert p.scale_text() == "colours: green at the no-leak baseline (10.2), red at the recognisable threshold (20)"


def test_a_one_cell_table_is_coloured_by_what_its_value_means():
    """A 1x1 table was always neutral."""
    above = _pivot("images/psnr", {"dlg": 25.0}, PSNR_ANCHORS)
    assert above.colour_position(25.0) == 0.0
    assert above.scale_text() == "colours: red at or beyond the recognisable threshold (20), green short of it"
    assert _pivot("images/psnr", {"dlg": 12.0}, PSNR_ANCHORS).colour_position(12.0) == 1.0
    neutral = _pivot("images/psnr", {"dlg": 12.0})
    assert neutral.colour_position(12.0) == 0.5 and neutral.scale_text() == "colours: relative to this table"
    no_baseline = _pivot("images/psnr", {"dlg": 12.0, "idlg": 16.0}, PSNR_ANCHORS)
    assert no_baseline.scale_text() == "colours: green at the table's lowest (12), red at the recognisable threshold (20)"
    assert no_baseline.colour_position(16.0) == pytest.approx(0.5)


def test_accuracy_is_green_at_chance_and_lower_is_better_metrics_turn_round():
    top1 = _pivot("place/top1_accuracy", {"proxy": 0.1, "adaptive": 0.55},
                  {"nothing": [0.1, "chance"], "success": [1.0, "always right"]})
    assert top1.colour_position(0.1) == 1.0 and top1.colour_position(0.55) == pytest.approx(0.5)
    assert top1.scale_text() == "colours: green at chance (0.1), red at always right (1)"
    pk = _pivot("place/protected_k", {"proxy": 49.5, "adaptive": 0.0},
                {"nothing": [49.5, "chance"], "success": [0.0, "true place first"]}, higher_is_better=False)
    assert pk.colour_position(49.5) == 1.0 and pk.colour_position(0.0) == 0.0
    assert pk.colour_position(24.75) == pytest.approx(0.5)


def test_the_no_leak_baseline_is_found_in_the_same_table():
    def row(attack: str, value: float, no_leak: bool = False) -> CellRow:
        return CellRow(run_id=attack, scenario="federated-learning", dataset="d", defense="none", attack=attack,
                       params={}, metrics={"images/psnr": value}, higher_is_better={"images/psnr": True},
                       artifact_uri="", anchors={"images/psnr": PSNR_ANCHORS}, no_leak=no_leak)

    (p,) = pivot([row("dlg", 10.9), row("inverting-gradients", 15.0), row("public-mean-image", 10.2, no_leak=True)],
                 "images/psnr")
    assert p.baseline == 10.2 and p.anchors == PSNR_ANCHORS
    assert p.scale.green.meaning == "the no-leak baseline" and p.scale.red.value == 20.0


def test_bookkeeping_is_neither_labelled_privacy_nor_coloured():
    """``attack/batch_size`` was titled "privacy: higher = attack succeeds" and coloured."""
    p = _pivot("attack/batch_size", {"dlg": 1.0, "idlg": 4.0})
    assert p.sense == "the attack's bookkeeping, not a privacy score (not coloured)"
    assert p.colour_position(4.0) is None and hue(p, 1.0) is None and p.scale_text() == ""
    assert "style=" not in table_html(p)
    fig = heatmap_figure(p)
    n_axes, title = len(fig.axes), fig.axes[0].get_title()
    matplotlib.pyplot.close(fig)
    assert n_axes == 1 and "not a privacy score" in title  # no colour bar


def test_tables_name_their_scale_and_the_legend_says_both_kinds():
    p = _pivot("images/psnr", {"dlg": 10.9, "public-mean-image": 10.2}, PSNR_ANCHORS, baseline=10.2)
    assert "colours: green at the no-leak baseline (10.2), red at the recognisable threshold (20)" in table_html(p)
    fig = heatmap_figure(p)
    bar_label = fig.axes[1].get_ylabel()
    matplotlib.pyplot.close(fig)
    assert bar_label == "psnr; red = attack succeeds; anchored"
    assert "Anchored or relative:" in LEGEND and "is not coloured" in LEGEND


# -- headline metrics -------------------------------------------------------------------------
def test_without_metric_a_report_shows_the_headline_metrics_its_plugins_declare(toy_registry, tracker, tmp_path):
    """`vispriv report` without --metric printed every logged number, bookkeeping included."""
    _toy_store(toy_registry, tracker, tmp_path)
    (row, _) = collect(tracker, "toy")
    assert row.headline == ["images/faithful_share", "images/psnr", "images/recognisable_share", "images/psnr_median",
                            "images/ssim", "labels/accuracy"]
    assert row.anchors["images/psnr"] == PSNR_ANCHORS and row.no_leak is False
    out = write_report(tracker, "toy", tmp_path / "rep", log_to_parent=False)
    shown = sorted(p.stem.removeprefix("heatmap_toy__") for p in out.files if p.name.startswith("heatmap_"))
    assert shown == ["images_faithful_share", "images_psnr", "images_psnr_median", "images_recognisable_share",
                     "images_ssim", "labels_accuracy"]
    assert "attack/calls" not in out.markdown and "images/mae" not in out.markdown
    asked = write_report(tracker, "toy", tmp_path / "rep2", metrics=["attack/calls"], log_to_parent=False)
    assert "the attack's bookkeeping, not a privacy score" in asked.markdown and "privacy:" not in asked.markdown


def test_runs_that_declared_no_headline_show_every_score_but_bookkeeping():
    from vispriv.harness.report import headline_metrics

    old = CellRow(run_id="r", scenario="s", dataset="d", defense="none", attack="dlg", params={},
                  metrics={"images/psnr": 9.0, "images/psnr_se": 1.0, "attack/batch_size": 1.0, "utility/acc": 0.5},
                  higher_is_better={}, artifact_uri="")
    new = CellRow(run_id="n", scenario="t", dataset="d", defense="none", attack="dlg", params={},
                  metrics={"images/psnr": 9.0, "images/mae": 0.2}, higher_is_better={}, artifact_uri="",
                  headline=["images/psnr"])
    assert headline_metrics([old, new]) == {"images/psnr": {"s", "t"}, "utility/acc": {"s"}}
