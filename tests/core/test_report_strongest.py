"""The strongest attack per defense: the view (`--strongest`) and the bold cells of the tables."""

from __future__ import annotations

import math

import pytest
from core_helpers import toy_config

from vispriv.harness.errors import VisprivError
from vispriv.harness.report import CellRow, pivot, to_markdown
from vispriv.harness.report.strongest import parse_spec, strongest_cells, strongest_of, tables
from vispriv.harness.report.strongest import to_markdown as strongest_markdown

PSNR, ACC = "images/psnr_median", "utility/test_accuracy"


def _row(attack: str, defense: str, metrics: dict[str, float], hib: dict[str, bool] | None = None,
         dataset: str = "d") -> CellRow:
    return CellRow(run_id=f"{attack}|{defense}|{dataset}", scenario="federated-learning", dataset=dataset,
                   defense=defense, attack=attack, params={}, metrics=metrics,
                   higher_is_better=hib or {PSNR: True, ACC: True}, artifact_uri="")


def _matrix() -> list[CellRow]:
    """Three attacks against two defenses. By hand: under none the two dlg variants tie at 40.0;
    under pruning the adaptive dlg (35.0) beats the no-leak baseline (14.2) and the careless one (9.0)."""
    cells = {
        ("dlg", "none"): 40.0, ("dlg(adapt=none)", "none"): 40.0, ("public-mean-image", "none"): 14.2,
        ("dlg", "gradient-pruning"): 35.0, ("dlg(adapt=none)", "gradient-pruning"): 9.0,
        ("public-mean-image", "gradient-pruning"): 14.2,
    }
    acc = {"none": 0.92, "gradient-pruning": 0.93}
    return [_row(a, d, {PSNR: v, ACC: acc[d]}) for (a, d), v in cells.items()]


def test_strongest_of_follows_the_direction_names_every_tie_and_never_picks_nan():
    values = {"a": 3.0, "b": 5.0, "c": 5.0, "d": math.nan}
    assert strongest_of(values, True) == ["b", "c"]
    assert strongest_of(values, False) == ["a"]
    assert strongest_of({"a": math.nan}, True) == []
    assert strongest_of({}, True) == []


def test_each_defense_gets_its_strongest_attack_the_runner_up_and_its_utility():
    (t,) = tables(_matrix(), PSNR, ACC)
    got = {r.defense: (r.attacks, r.value, r.runner_up, r.runner_up_value, r.utility, r.n_attacks) for r in t.rows}
    assert got == {
        # a tie at the top is named whole; the runner-up is the best attack not tied with it
        "none": (["dlg", "dlg(adapt=none)"], 40.0, "public-mean-image", 14.2, 0.92, 3),
        # the adaptive attack wins; the careless one falls below the no-leak baseline
        "gradient-pruning": (["dlg"], 35.0, "public-mean-image", 14.2, 0.93, 3),
    }
    md = strongest_markdown(t)
    assert "| none | dlg, dlg(adapt=none) (tie) | 40.000 | public-mean-image | 14.200 | 3 | 0.920 |" in md
    assert "| gradient-pruning | dlg | 35.000 | public-mean-image | 14.200 | 3 | 0.930 |" in md


def test_a_lower_is_better_metric_picks_the_minimum():
    hib = {"images/mae": False}
    rows = [_row("a", "none", {"images/mae": 0.20}, hib), _row("b", "none", {"images/mae": 0.05}, hib)]
    (t,) = tables(rows, "images/mae")
    assert [(r.attacks, r.value, r.runner_up) for r in t.rows] == [(["b"], 0.05, "a")]


def test_an_attack_alone_against_a_defense_has_no_runner_up():
    (t,) = tables([_row("dlg", "none", {PSNR: 20.0})], PSNR, ACC)
    assert t.utility is None  # a scenario whose defenses logged no such utility gets no column of dashes
    assert [(r.attacks, r.runner_up, r.runner_up_value) for r in t.rows] == [(["dlg"], None, None)]
    assert "| none | dlg | 20.000 | – | – | 1 |" in strongest_markdown(t)


def test_utility_and_bookkeeping_cannot_rank_attacks():
    with pytest.raises(VisprivError, match="is a utility metric, not a measure"):
        tables(_matrix(), ACC)
    with pytest.raises(VisprivError, match="an attack's own bookkeeping"):
        tables([_row("dlg", "none", {"attack/seconds_per_inversion": 2.0})], "attack/seconds_per_inversion")
    assert parse_spec("images/psnr_median") == ("images/psnr_median", None)
    assert parse_spec("psnr_median:test_accuracy") == ("psnr_median", "test_accuracy")
    with pytest.raises(VisprivError, match="expected PRIVACY or PRIVACY:UTILITY"):
        parse_spec("a:b:c")


def test_the_table_bolds_exactly_the_strongest_attack_of_each_defense_column():
    (p,) = pivot(_matrix(), PSNR)
    assert strongest_cells(p) == {("dlg", "none"), ("dlg(adapt=none)", "none"), ("dlg", "gradient-pruning")}
    md = to_markdown(p)
    assert "bold: the strongest attack against each defense" in md
    lines = {line.split(" | ")[0].strip("| "): line for line in md.splitlines() if line.startswith("| ")}
    assert lines["dlg"].endswith("| **40.000** | **35.000** |")
    assert lines["dlg(adapt=none)"].endswith("| **40.000** | 9.000 |")
    assert lines["public-mean-image"].endswith("| 14.200 | 14.200 |")
    # The utility is the defense's own: nothing is bold, and the title says nothing of attacks.
    (u,) = pivot(_matrix(), ACC)
    assert strongest_cells(u) == set() and "**" not in to_markdown(u).split("\n", 1)[1] and "bold:" not in to_markdown(u)


def test_report_command_writes_the_strongest_attack_view_and_checks_its_spec(run_cli, write_config, tmp_path):
    # Two configs of one attack return the same estimate: a tie at every defense, named as one.
    cfg = write_config(toy_config(attacks=[{"name": "toy-denoise"}, {"name": "toy-denoise", "delay": 0.01}]))
    assert run_cli("matrix", str(cfg), "--quiet").returncode == 0
    rep = run_cli("report", "--experiment", "toy", "--metric", "ssim", "--strongest", "ssim:distortion",
                  "--format", "md", "--format", "html", "--no-log")
    assert rep.returncode == 0, rep.stderr
    assert "**Strongest attack per defense** (toy; images/ssim, privacy: higher = attack succeeds)" in rep.stdout
    assert rep.stdout.count("toy-denoise, toy-denoise(delay=0.01) (tie)") == 2  # one row per toy-noise config
    assert "Strongest attack per defense" in (tmp_path / "reports" / "report.html").read_text()
    bad = run_cli("report", "--experiment", "toy", "--strongest", "distortion", "--no-log")
    assert bad.returncode == 2 and "is a utility metric" in bad.stderr and "Traceback" not in bad.stderr
