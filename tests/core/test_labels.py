"""One label per configured plugin, the same in progress lines, dry runs, MLflow and the report.

Labels hold the settings that differ from the defaults only, nested settings as dotted keys
(never a Python dict), and leave out the settings a plugin ignores for its other values.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import matplotlib
import numpy as np
import pytest
from core_helpers import toy_config
from pydantic import BaseModel

from vispriv.harness import PluginConfig
from vispriv.harness.config import validate_config
from vispriv.harness.labels import config_label, join_label, relabel, short_value, varying_keys
from vispriv.harness.matrix import build_matrix, expand_entry
from vispriv.harness.registry import load_registry
from vispriv.harness.report import collect, config_labels
from vispriv.harness.report.frontier import Frontier, FrontierPoint, frontier_figure
from vispriv.harness.runner import run_matrix
from vispriv.harness.schema import plain_text, type_label

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "example_seeds.json"


class Network(BaseModel):
    steps: int = 400
    lr: float = 1e-3


class Inverter(PluginConfig):
    dictionary_size: int = 256
    network: Network = Network()
    sift: Network | None = None

    def ignored_fields(self) -> frozenset[str]:
        return frozenset({"sift"}) if self.dictionary_size == 1 else frozenset()


def test_nested_settings_are_dotted_keys_and_only_those_that_differ():
    assert config_label("inv", Inverter()) == "inv"
    assert config_label("inv", Inverter(network=Network(steps=300))) == "inv(network.steps=300)"
    assert config_label("inv", Inverter(dictionary_size=1024, sift=Network())) == "inv(dictionary_size=1024,sift=default)"
    assert config_label("inv", Inverter(sift=Network(lr=0.01))) == "inv(sift.lr=0.01)"


class Tuned(PluginConfig):
    """A plugin whose nested default is not the nested model's own default."""

    network: Network = Network(steps=300)
    weights: dict = {"a": 1.0, "b": {"c": 2}}


def test_a_nested_setting_is_named_against_the_fields_default_not_the_nested_models():
    assert config_label("t", Tuned()) == "t"
    assert config_label("t", Tuned(network=Network(steps=300, lr=0.01))) == "t(network.lr=0.01)"
    # Network()'s steps=400 is its own default but not the field's (300): it is named
    assert config_label("t", Tuned(network=Network())) == "t(network.steps=400)"
    assert config_label("t", Tuned(network=Network(lr=2.0))) == "t(network.lr=2,network.steps=400)"
    assert config_label("t", Tuned(weights={"a": 1.0, "b": {"c": 3}})) == "t(weights.b.c=3)"
    # a sweep axis at the field's default is named; one key of a nested model, dotted
    assert config_label("t", Tuned(), keep=frozenset({"network.steps"})) == "t(network.steps=300)"
    assert varying_keys([Tuned(), Tuned(network=Network(steps=300, lr=0.5))]) == frozenset({"network.lr"})


def test_values_are_written_short_and_keys_sorted():
    assert join_label("x", {"b": 1.0, "a": [2.0, 4.5], "c": "s"}) == "x(a=[2/4.5],b=1,c=s)"
    assert join_label("x", {}) == "x"
    assert short_value(0.5) == "0.5" and short_value(-3.0) == "-3" and short_value(True) == "True"


def test_a_setting_the_plugin_ignores_in_its_mode_is_left_out():
    assert config_label("inv", Inverter(dictionary_size=1, sift=Network(lr=0.01))) == "inv(dictionary_size=1)"


def test_album_pruning_greedy_leaves_out_the_solver_settings():
    registry = load_registry()
    (greedy,) = expand_entry(registry, "defense", {"name": "album-pruning", "mode": "greedy", "k": 1, "time_limit": 10})
    (milp,) = expand_entry(registry, "defense", {"name": "album-pruning", "mode": "milp-topk", "time_limit": 10})
    assert greedy.label() == "album-pruning(mode=greedy)"
    assert milp.label() == "album-pruning(time_limit=10)"


def test_a_sweep_names_its_axes_in_every_cell_even_at_the_default():
    registry = load_registry()
    stages = expand_entry(registry, "defense", {"name": "dp-sgd", "noise_multiplier": [0.1, 1.0], "max_grad_norm": 1.0})
    assert [s.label() for s in stages] == ["dp-sgd(noise_multiplier=0.1)", "dp-sgd(noise_multiplier=1)"]
    nested = expand_entry(registry, "defense", {"name": "none", "matching": {"ratio": [0.8, 0.7]}}, "descriptor-release")
    assert len({s.label() for s in nested}) == 2 and all("matching.ratio=" in s.label() for s in nested)


def test_older_labels_are_rewritten_without_dicts():
    old = "invert-ldp(defense={'dictionary_size': 1024, 'm': 2},network={'steps': 300})"
    assert relabel(old) == "invert-ldp(defense.dictionary_size=1024,defense.m=2,network.steps=300)"
    assert relabel("none(matching={'ransac_max_iter': 50, 'stereo': False}) > x(k=1)") == (
        "none(matching.ransac_max_iter=50,matching.stereo=False) > x(k=1)")
    assert relabel("pixelate(block=4)") == "pixelate(block=4)"


def test_no_shipped_example_labels_a_cell_with_a_python_dict():
    """The golden file holds every shipped example's cell labels (kept in step by test_golden_seeds)."""
    labels = [cell["label"] for cells in json.loads(GOLDEN.read_text()).values() for cell in cells]
    assert labels
    assert [label for label in labels if "{" in label or "'" in label] == []


def test_one_label_in_progress_tags_run_names_and_report(toy_registry, tracker, tmp_path):
    cfg = validate_config(toy_config(defenses=[{"name": "toy-noise", "sigma": 0.2}]))
    matrix = build_matrix(cfg, toy_registry)
    (cell,) = matrix.cells
    assert cell.defense_label == "toy-noise(sigma=0.2)"
    run_matrix(cfg, matrix, tracker, quiet=True, cache_dir=str(tmp_path / "cache"))
    (row,) = collect(tracker, "toy")
    assert config_labels([row], "defense") == {row.defense: "toy-noise(sigma=0.2)"}
    exp = tracker.experiment_id("toy", create=False)
    (run,) = tracker.cell_runs(exp, status="FINISHED")
    assert run.info.run_name == cell.label
    assert run.data.tags["vispriv.defense"] == cell.defense_label


def _overlaps(a, b) -> bool:  # type: ignore[no-untyped-def]
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_frontier_labels_never_print_on_top_of_each_other():
    """`affine-lifting(m=2)` just above `none` read as "affine-lifting(m=none)"."""
    points = [FrontierPoint("none", "none", 1.0, 0.90, "invert-raw", True),
              FrontierPoint("a2", "affine-lifting(m=2)", 0.99, 0.905, "invert-raw", True),
              FrontierPoint("a8", "affine-lifting(m=8)", 0.5, 0.3, "invert-raw", True)]
    fig = frontier_figure(Frontier("descriptor-release", "utility/x", "images/ssim", True, True, points))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = [t for ax in fig.axes for t in ax.texts]
    boxes = [t.get_window_extent(renderer) for t in texts]
    shown = "\n".join(t.get_text() for t in texts)
    matplotlib.pyplot.close(fig)
    assert not any(_overlaps(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    for label in ("none", "affine-lifting(m=2)", "affine-lifting(m=8)"):
        assert label in shown


def test_unreadable_files_of_every_split_are_one_warning(tmp_path):
    from PIL import Image

    from vispriv.plugins.descriptor_release.datasets import ImageFolder

    for i in range(12):
        Image.fromarray(np.full((40, 40, 3), 20 * i, dtype=np.uint8)).save(tmp_path / f"ok{i}.png")
    for i in range(8):
        (tmp_path / f"bad{i}.jpg").write_bytes(b"not an image")
    dataset = ImageFolder(ImageFolder.Config(root=str(tmp_path), size=32))
    with pytest.warns(UserWarning) as caught:
        dataset.load(None)  # type: ignore[arg-type]
    assert len(caught) == 1 and "skipped 8 unreadable image file(s)" in str(caught[0].message)


def test_parameter_types_and_descriptions_read_as_plain_text():
    assert type_label(tuple[int, ...]) == "tuple[int, ...]"
    text = "Like :func:`~vispriv.harness.data.load_image_folder`, with ``block`` x ``block`` tiles (:class:`a.B`)."
    assert plain_text(text) == "Like load_image_folder, with block x block tiles (a.B)."


def test_plugins_page_shows_no_rest_markup(run_cli):
    result = run_cli("plugins", "pixelate")
    assert result.returncode == 0, result.stderr
    assert "``" not in result.stdout and ":func:" not in result.stdout
    assert "block x block" in result.stdout


def test_the_milp_solver_prints_no_banner():
    code = ("import numpy as np; from vispriv.plugins.album import milp; "
            "print(milp.naive_topk(np.random.default_rng(0).normal(size=(6, 4)), 1).status)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "optimal"


def test_feature_dataset_label_leaves_out_the_files_its_source_does_not_read():
    registry = load_registry()
    (stage,) = expand_entry(registry, "dataset", {"name": "federated-clustering", "source": "bundled",
                                                  "features": "/path/to/caltech101.npz"})
    assert stage.label() == "federated-clustering"
