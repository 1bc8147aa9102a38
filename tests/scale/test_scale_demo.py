"""The demo matrix covers every registered scenario, and each cell is scored by its own scenario's metrics."""

from __future__ import annotations

from pathlib import Path

from vispriv.harness.config import read_yaml, validate_config
from vispriv.harness.matrix import build_matrix
from vispriv.harness.registry import load_registry

CONFIGS = Path(__file__).resolve().parents[2] / "harness" / "configs"


def test_demo_matrix_covers_every_scenario_with_its_own_metrics():
    registry = load_registry(only=["images", "metrics", "image-release", "descriptor-release",
                                   "federated-learning", "album-sharing"])
    assert not registry.failures, [f.line() for f in registry.failures]
    matrix = build_matrix(validate_config(read_yaml(CONFIGS / "demo.yaml")), registry)
    scenarios = {c.scenario for c in matrix.cells}
    registered = {cls.scenario for cls in registry.all("dataset")} - {"any"}
    assert registered <= scenarios, f"scenarios without a demo cell: {registered - scenarios}"
    for cell in matrix.cells:
        assert cell.metrics, cell.label
        assert all(m.scenario in ("any", cell.scenario) for m in cell.metrics), cell.label
    for attack in ("invert-raw", "invert-ldp", "gradient-leakage", "dlg", "proxy-geolocator", "database"):
        assert any(s.name == attack for c in matrix.cells for s in c.attack), attack


def test_demo_curves_name_params_of_the_demo():
    curves = read_yaml(CONFIGS / "demo-report.yaml")["curves"]
    config = read_yaml(CONFIGS / "demo.yaml")
    swept = {f"defense.{k}" for d in config["defenses"] if isinstance(d, dict) for k, v in d.items() if isinstance(v, list)}
    assert curves and all({"x", "y"} <= set(c) for c in curves)
    assert {c["x"] for c in curves} <= swept
