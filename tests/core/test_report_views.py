"""Reports that read right for privacy: colour sense, figure layout, labels, frontiers, run times.

The frontier and run-time tests run a real matrix of toy plugins into a real MLflow sqlite
store and read it back. The frontier's plugins below are chosen so that every number of
the frontier is known by hand: ``toy-level`` releases images filled with ``level`` and
keeps utility ``1 - level - waste``; ``toy-read`` reports success ``gain * (1 - mean of
the release) + floor``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import matplotlib
import numpy as np
import pytest
from core_helpers import toy_config
from pydantic import Field

from vispriv.harness import Attack, AttackResult, Defense, Images, PluginConfig, Protected, hookimpl
from vispriv.harness.config import validate_config
from vispriv.harness.errors import VisprivError
from vispriv.harness.matrix import build_matrix
from vispriv.harness.report import (
    CellRow,
    Pivot,
    config_labels,
    curve_figure,
    green_when_high,
    heatmap_figure,
    write_report,
)
from vispriv.harness.report.frontier import frontiers, parse_spec, worst_case
from vispriv.harness.report.html import hue
from vispriv.harness.runner import run_matrix
from vispriv.plugins.metrics.album import ProtectedK
from vispriv.plugins.metrics.classification import TopKAccuracy
from vispriv.plugins.metrics.image_quality import SSIM


# -- colour sense -----------------------------------------------------------------------
def _pivot(metric: str, higher_is_better: bool, values: dict[str, float], attack: str = "as-released") -> Pivot:
    p = Pivot(metric, "image-release", [attack], list(values), higher_is_better=higher_is_better)
    p.values = {(attack, d): v for d, v in values.items()}
    return p


def _is_red(rgba) -> bool:
    r, g, _b, _a = rgba
    return r > 0.6 and g < 0.3


def _is_green(rgba) -> bool:
    r, g, _b, _a = rgba
    return g > 0.4 and r < 0.3


def test_perfect_attack_on_none_is_the_red_end():
    """SSIM 1.0 of the as-released attack on `none` is the attack's best: red, in the table and the heatmap."""
    p = _pivot("images/ssim", SSIM.higher_is_better["ssim"], {"none": 1.0, "pixelate(block=4)": 0.636, "pixelate(block=8)": 0.364})
    assert p.colour_position(1.0) == 0.0 and hue(p, 1.0) == 0  # hue 0 = red
    assert p.colour_position(0.364) == 1.0 and hue(p, 0.364) == 120
    fig = heatmap_figure(p)
    image = fig.axes[0].images[0]
    colours = image.cmap(image.norm(image.get_array()))[0]  # the drawn RGBA of each column
    matplotlib.pyplot.close(fig)
    assert _is_red(colours[0]) and _is_green(colours[2])
    assert p.sense == "privacy: higher = attack succeeds (red)"


def test_utility_keeps_green_is_good():
    p = _pivot("utility/pixel_change", False, {"none": 0.0, "pixelate(block=8)": 0.2})
    assert hue(p, 0.0) == 120 and hue(p, 0.2) == 0
    assert p.sense == "utility: lower is better (green)"
    assert green_when_high("utility/test_accuracy", True) and not green_when_high("utility/pixel_change", False)


def test_album_metrics_colour_in_the_same_sense():
    """A defense that stops the geolocator (top-1 low, protected-k high) is green in both album tables."""
    top1 = _pivot("place/top1_accuracy", TopKAccuracy.higher_is_better["top1_accuracy"],
                  {"none": 0.9, "album-pruning(k=5)": 0.1}, attack="proxy-geolocator")
    pk = _pivot("place/protected_k", ProtectedK.higher_is_better["protected_k"],
                {"none": 0.2, "album-pruning(k=5)": 6.0}, attack="proxy-geolocator")
    assert hue(top1, 0.9) == 0 and hue(top1, 0.1) == 120
    assert hue(pk, 0.2) == 0 and hue(pk, 6.0) == 120


def test_html_and_titles_carry_the_legend(tmp_path):
    p = _pivot("images/ssim", True, {"none": 1.0, "pixelate(block=8)": 0.364})
    fig = heatmap_figure(p)
    title = fig.axes[0].get_title()
    bar_label = fig.axes[1].get_ylabel()
    matplotlib.pyplot.close(fig)
    assert "attack succeeds (red)" in title and "red = attack succeeds" in bar_label


# -- layout and labels ------------------------------------------------------------------
def test_one_row_heatmap_is_not_clipped_or_squashed():
    cols = ["none", "pixelate(block=4)", "ldp-feat(dictionary_size=1024, epsilon=4.0, m=2)"]
    p = _pivot("images/ssim", True, dict(zip(cols, [1.0, 0.6, 0.2])))
    p.scenario = "descriptor-release: bundled-images(size=128, sift={'max_keypoints': 512})"
    fig = heatmap_figure(p)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    ax, bar = fig.axes
    texts = [ax.title, *ax.get_xticklabels(), *ax.get_yticklabels(), bar.yaxis.label]
    for t in texts:
        ext = t.get_window_extent(renderer)
        assert ext.x0 >= box.x0 - 1 and ext.x1 <= box.x1 + 1 and ext.y0 >= box.y0 - 1 and ext.y1 <= box.y1 + 1, t.get_text()
    bar_inches = bar.get_window_extent(renderer).height / fig.dpi
    matplotlib.pyplot.close(fig)
    assert bar_inches >= 1.0


def _row(attack: str, defense: str, params: dict[str, str], metrics: dict[str, float], **kw) -> CellRow:
    return CellRow(run_id=f"{attack}|{defense}", scenario=kw.get("scenario", "s"), dataset="d", defense=defense,
                   attack=attack, params=params, metrics=metrics, higher_is_better=kw.get("hib", {}), artifact_uri="")


def test_report_names_a_config_by_its_run_label_even_when_it_ran_alone():
    """Every view names a config as the run logged it (the settings that differ from the
    defaults): `affine-lifting(m=2)`, not `affine-lifting` because it was the only one."""
    fed_a, fed_b = "none(rounds=3)", "none(rounds=5)"
    rows = [
        _row("invert-raw", "none", {"defense": "none"}, {}, scenario="descriptor-release"),
        _row("invert-raw", "affine-lifting(m=2)", {"defense": "affine-lifting", "defense.m": "2"}, {},
             scenario="descriptor-release"),
        _row("gradient-leakage", fed_a, {"defense": "none", "defense.rounds": "3"}, {}, scenario="federated-learning"),
        _row("gradient-leakage", fed_b, {"defense": "none", "defense.rounds": "5"}, {}, scenario="federated-learning"),
    ]
    assert config_labels(rows, "defense") == {
        "none": "none", "affine-lifting(m=2)": "affine-lifting(m=2)", fed_a: "none(rounds=3)", fed_b: "none(rounds=5)"}


def test_labels_of_older_runs_name_nested_settings_by_dotted_keys_never_a_dict():
    a1 = "invert-ldp(defense={'dictionary_size': 1024, 'm': 2},network={'steps': 300})"
    a2 = "invert-ldp(defense={'dictionary_size': 1024, 'm': 8},network={'steps': 300})"
    rows = [
        _row(a, f"ldp-feat(epsilon={e})",
             {"attack": "invert-ldp", "attack.defense": f'{{"dictionary_size": 1024, "m": {m}}}',
              "attack.network": '{"steps": 300}', "defense": "ldp-feat", "defense.epsilon": str(e)},
             {"images/ssim": 0.1 * e + m / 100}, hib={"images/ssim": True})
        for a, m in ((a1, 2), (a2, 8)) for e in (4.0, 8.0)
    ]
    new1, new2 = (f"invert-ldp(defense.dictionary_size=1024,defense.m={m},network.steps=300)" for m in (2, 8))
    assert config_labels(rows, "attack") == {a1: new1, a2: new2}
    assert config_labels(rows[:2], "attack") == {a1: new1}
    fig = curve_figure(rows, "defense.epsilon", "images/ssim", [])
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    xlabel = fig.axes[0].get_xlabel()
    matplotlib.pyplot.close(fig)
    assert [t.replace("\n", "") for t in legend] == [new1, new2]  # wrapped at 60 characters
    assert "inf" not in xlabel  # no run has epsilon = inf
    rows.append(_row(a1, "ldp-feat(epsilon=inf)", {**rows[0].params, "defense.epsilon": "inf"}, {"images/ssim": 0.9},
                     hib={"images/ssim": True}))
    fig = curve_figure(rows, "defense.epsilon", "images/ssim", [])
    assert "(dotted: x = inf)" in fig.axes[0].get_xlabel()
    matplotlib.pyplot.close(fig)


# -- frontier ---------------------------------------------------------------------------
@dataclass
class Level(Images):
    """Images that all hold one value (the release of ``toy-level``)."""


class ToyLevel(Defense):
    class Config(PluginConfig):
        level: float = Field(0.0, ge=0, le=1)
        waste: float = Field(0.0, ge=0, le=1)

    name = "toy-level"
    version = "1.0"
    scenario = "toy"
    consumes = (Images,)
    produces = (Level,)

    def protect(self, private, public, ctx):
        release = Level(np.full_like(private.images, self.config.level), ids=list(private.ids))
        return Protected(release=release, truth={"images": private},
                         utility={"kept": 1.0 - self.config.level - self.config.waste})


class ToyRead(Attack):
    class Config(PluginConfig):
        gain: float = 1.0
        floor: float = 0.0

    name = "toy-read"
    version = "1.0"
    scenario = "toy"
    consumes = (Level,)

    def attack(self, release, public, ctx):
        success = self.config.gain * (1.0 - float(release.images.mean())) + self.config.floor
        return AttackResult(estimate={}, metrics={"success": success}, metric_directions={"success": True})


class FrontierPlugins:
    @hookimpl
    def vispriv_register_defenses(self, register):
        register(ToyLevel)

    @hookimpl
    def vispriv_register_attacks(self, register):
        register(ToyRead)




def test_worst_case_respects_the_direction():
    assert worst_case({"a": 0.2, "b": 0.7, "c": float("nan")}, True) == ("b", 0.7)
    assert worst_case({"a": 0.2, "b": 0.7}, False) == ("a", 0.2)  # e.g. MAE: lower = attack succeeds
    assert worst_case({"a": float("nan")}, True) is None


def test_frontier_spec_is_checked():
    assert parse_spec("utility/kept:attack/success") == ("utility/kept", "attack/success")
    for bad in ("kept", "a:b:c", ":x"):
        with pytest.raises(VisprivError, match="expected UTILITY:PRIVACY"):
            parse_spec(bad)


def test_frontier_from_a_real_store(toy_registry, tracker, tmp_path):
    toy_registry.add_module(FrontierPlugins(), "frontier-test")
    cfg = validate_config(toy_config(
        defenses=[{"name": "toy-level", "level": [0.0, 0.5, 0.9]}, {"name": "toy-level", "level": 0.5, "waste": 0.2}],
        attacks=[{"name": "toy-read", "gain": 1.0}, {"name": "toy-read", "gain": 0.0, "floor": 0.3}],
    ))
    result = run_matrix(cfg, build_matrix(cfg, toy_registry), tracker, quiet=True, cache_dir=str(tmp_path / "cache"))
    assert len(result.finished) == 8 and not result.failed
    # By hand: utility = 1 - level - waste; the strongest attack's success = max(1 - level, 0.3).
    expected = {  # label (non-default settings and the sweep's axis): (utility, worst success, strongest attack, on the front)
        "toy-level(level=0)": (1.0, 1.0, "toy-read", True),
        "toy-level(level=0.5)": (0.5, 0.5, "toy-read", True),
        "toy-level(level=0.5,waste=0.2)": (0.3, 0.5, "toy-read", False),  # dominated by the one above
        "toy-level(level=0.9)": (0.1, 0.3, "toy-read(floor=0.3,gain=0)", True),
    }
    with pytest.raises(VisprivError, match="not a utility metric"):
        write_report(tracker, "toy", tmp_path / "bad", frontiers=[("attack/success", "utility/kept")], log_to_parent=False)
    out = write_report(tracker, "toy", tmp_path / "report", ["success"], ["md", "html"],
                       frontiers=[("kept", "attack/success")], log_to_parent=False)
    from vispriv.harness.report import collect

    (f,) = frontiers(collect(tracker, "toy"), "utility/kept", "attack/success")
    got = {p.label: (p.utility, p.privacy, p.attack, p.on_front) for p in f.points}
    assert set(got) == set(expected)
    for label, (u, worst, attack, front) in expected.items():
        assert got[label][0] == pytest.approx(u) and got[label][1] == pytest.approx(worst)
        assert got[label][2:] == (attack, front), label
    assert "| toy-level(level=0.5,waste=0.2) | 0.300 | 0.500 | toy-read |  |" in out.markdown
    assert "| toy-level(level=0.9) | 0.100 | 0.300 | toy-read(floor=0.3,gain=0) | yes |" in out.markdown
    page = (tmp_path / "report" / "report.html").read_text()
    assert 'id="frontiers"' in page and "frontier_toy__utility_kept__attack_success.png" in page
    assert (tmp_path / "report" / "frontier_toy__utility_kept__attack_success.png").stat().st_size > 0
    assert "Colours are the defender" in page


# -- MLflow run times -------------------------------------------------------------------
def test_child_run_times_are_the_cells_run_time(toy_registry, tracker, tmp_path):
    cfg = validate_config(toy_config(defenses=[{"name": "toy-noise", "sigma": 0.1}],
                                     attacks=[{"name": "toy-denoise", "delay": 0.4}]))
    result = run_matrix(cfg, build_matrix(cfg, toy_registry), tracker, quiet=True, cache_dir=str(tmp_path / "cache"))
    ((_cell, outcome),) = result.finished
    (run,) = tracker.cell_runs(tracker.experiment_id("toy", create=False))
    # MLflow's start/end are the cell's own clock readings, not the logging's
    assert (run.info.start_time, run.info.end_time) == (outcome.start_ms, outcome.end_ms)
    assert run.data.tags["vispriv.seconds"] == f"{outcome.seconds:.2f}"


def test_report_command_draws_frontiers(run_cli, write_config, tmp_path):
    cfg = write_config(toy_config(defenses=[{"name": "toy-noise", "sigma": [0.05, 0.2]}]))
    assert run_cli("matrix", str(cfg), "--quiet").returncode == 0
    rep = run_cli("report", "--experiment", "toy", "--metric", "ssim", "--frontier", "distortion:ssim",
                  "--format", "md", "--format", "html", "--no-log")
    assert rep.returncode == 0, rep.stderr
    # toy-noise's utility is its sigma (lower is better); more noise, a worse denoiser: both points on the front.
    assert "**Privacy-utility frontier** (toy): x = utility/distortion (utility: lower is better), y = images/ssim of the strongest attack" in rep.stdout
    assert "| toy-noise(sigma=0.05) | 0.050 |" in rep.stdout and (tmp_path / "reports" / "report.html").exists()
    assert rep.stdout.count("| yes |") == 2


def test_a_cell_run_under_several_matrix_seeds_is_their_mean_and_standard_error():
    """Repeats of one cell (other matrix seeds in one store) are averaged, never the last one shown."""
    from vispriv.harness.report import pivot

    runs = [CellRow(run_id=f"r{i}", scenario="s", dataset="d", defense="dphe", attack="dlg", params={},
                    metrics={"images/psnr": v}, higher_is_better={}, artifact_uri="") for i, v in enumerate([10.0, 12.0, 17.0])]
    alone = CellRow(run_id="x", scenario="s", dataset="d", defense="none", attack="dlg", params={},
                    metrics={"images/psnr": 30.0, "images/psnr_se": 0.5}, higher_is_better={}, artifact_uri="")
    (p,) = pivot([*runs, alone], "images/psnr")
    assert p.values[("dlg", "dphe")] == pytest.approx(13.0)
    assert p.errors[("dlg", "dphe")] == pytest.approx(np.sqrt(13.0 / 3))  # sample variance (9 + 1 + 16) / 2
    assert p.values[("dlg", "none")] == 30.0 and p.errors[("dlg", "none")] == 0.5
    assert any("up to 3" in note for note in p.notes)


def test_file_names_of_long_labels_stay_under_the_file_systems_limit_and_distinct():
    """Localisation Table 3's report died on a heatmap named after a dataset with nine settings
    (OSError: file name too long)."""
    from vispriv.harness.report.tables import MAX_STEM, file_stem

    assert file_stem("descriptor-release__images/ssim") == "descriptor-release__images_ssim"  # short names as before
    settings = ",".join(f"protocol.setting_{i}={i * 1000}" for i in range(12))
    long_a = f"descriptor-release: localisation({settings},ransac_trials=10000)__utility/localised_0.25m_2deg"
    long_b = long_a.replace("ransac_trials=10000", "ransac_trials=100000")
    a, b = file_stem(long_a), file_stem(long_b)
    assert len(long_a) > 255 and len(a) == MAX_STEM and len(b) == MAX_STEM
    assert a != b and a[:100] == b[:100]  # same opening, told apart by the hash of the whole label
    assert file_stem(long_a) == a and all(c.isalnum() or c in "_.=-" for c in a)


def test_a_table_reaches_into_nested_settings_by_dotted_keys_and_names_a_setting_nobody_logged():
    """``--table defense.matching.criterion:dataset.protocol.ransac_trials`` printed nothing: nested
    settings are logged as one JSON object per field."""
    from vispriv.harness.report.tables import check_table_params, param_pivot, param_value

    def row(criterion: str, trials: int, value: float) -> CellRow:
        params = {"defense.matching": json.dumps({"criterion": criterion, "ratio": 0.8}),
                  "dataset.protocol": json.dumps({"ransac_trials": trials, "thresholds": [[0.25, 2.0]]}),
                  "defense.quantiser": "hnsw"}
        return _row("mean-image", f"ldp-feat({criterion})", params, {"utility/localised": value})

    rows = [row(c, t, v) for c, t, v in [("vocabulary", 10000, 45.0), ("mutual-nn", 10000, 13.1),
                                         ("vocabulary", 100000, 48.8), ("mutual-nn", 100000, 43.1)]]
    assert param_value(rows[0].params, "defense.matching.criterion") == "vocabulary"
    assert param_value(rows[0].params, "dataset.protocol.ransac_trials") == "10000"
    assert param_value(rows[0].params, "dataset.protocol.thresholds") == "[[0.25, 2.0]]"
    assert param_value(rows[0].params, "defense.quantiser") == "hnsw"
    assert param_value(rows[0].params, "defense.matching.nothing") is None
    (p,) = param_pivot(rows, "utility/localised", ["defense.matching.criterion"], "dataset.protocol.ransac_trials")
    assert p.values == {("criterion=mutual-nn", "10000"): 13.1, ("criterion=vocabulary", "10000"): 45.0,
                        ("criterion=mutual-nn", "100000"): 43.1, ("criterion=vocabulary", "100000"): 48.8}
    check_table_params(rows, ["defense.matching.criterion", "dataset.protocol.ransac_trials"])
    with pytest.raises(VisprivError, match=r"no cell logged defense\.matching\.criteria; logged params: .*defense\.matching"):
        check_table_params(rows, ["defense.matching.criteria", "dataset.protocol.ransac_trials"])
