"""Config validation, sweeps, pairing by payload type and skip reasons."""

from __future__ import annotations

import pytest
from core_helpers import toy_config

from vispriv.harness.config import apply_overrides, load_config, validate_config
from vispriv.harness.errors import ConfigError, PluginError
from vispriv.harness.matrix import build_matrix


def test_sweeps_expand_and_incompatible_pairs_have_reasons(toy_registry):
    matrix = build_matrix(validate_config(toy_config()), toy_registry)
    labels = sorted(c.defense_label for c in matrix.cells)
    assert labels == ["toy-noise(sigma=0.05)", "toy-noise(sigma=0.2)"]
    assert len(matrix.skipped) == 1
    assert matrix.skipped[0].line() == (
        "toy-histogram x toy-denoise: toy-denoise: needs NoisyImages, toy-histogram produces Histogram"
    )
    metrics = {m.name for m in matrix.cells[0].metrics}
    assert {"mae", "ssim", "psnr", "accuracy"} <= metrics and "topk-accuracy" not in metrics


def test_cell_hash_and_seed_are_stable_and_distinct(toy_registry):
    a = build_matrix(validate_config(toy_config()), toy_registry).cells
    b = build_matrix(validate_config(toy_config()), toy_registry).cells
    assert [c.hash for c in a] == [c.hash for c in b]
    assert len({c.hash for c in a}) == len(a) and len({c.seed for c in a}) == len(a)
    other_seed = build_matrix(validate_config(toy_config(seed=2)), toy_registry).cells
    assert {c.hash for c in other_seed}.isdisjoint({c.hash for c in a})


def test_scenario_mismatch_is_explained(toy_registry):
    cfg = toy_config(defenses=[{"name": "pixelate"}])
    matrix = build_matrix(validate_config(cfg), toy_registry)
    assert not matrix.cells
    assert "belongs to scenario image-release, the dataset is toy" in matrix.skipped[0].reason


def test_chain_stages_must_connect(toy_registry):
    cfg = toy_config(attacks=[{"chain": ["toy-denoise", "toy-denoise"]}], defenses=[{"name": "toy-noise"}])
    matrix = build_matrix(validate_config(cfg), toy_registry)
    assert not matrix.cells
    assert "needs NoisyImages, toy-denoise produces Images/Labels" in matrix.skipped[0].reason


def test_misspelt_plugin_key_names_key_and_allowed(toy_registry):
    cfg = toy_config(defenses=[{"name": "toy-noise", "sigam": 0.1}])
    with pytest.raises(ConfigError, match="defense 'toy-noise': unknown key 'sigam'; allowed: secret_key, sigma"):
        build_matrix(validate_config(cfg), toy_registry)


def test_wrong_type_is_one_line(toy_registry):
    cfg = toy_config(defenses=[{"name": "toy-noise", "sigma": "loud"}])
    with pytest.raises(ConfigError) as info:
        build_matrix(validate_config(cfg), toy_registry)
    assert "sigma" in str(info.value) and "'loud'" in str(info.value) and "\n" not in str(info.value)


def test_out_of_range_value_is_rejected(toy_registry):
    cfg = toy_config(defenses=[{"name": "toy-noise", "sigma": -1}])
    with pytest.raises(ConfigError, match="greater than or equal to 0"):
        build_matrix(validate_config(cfg), toy_registry)


def test_unknown_plugin_in_config(toy_registry):
    with pytest.raises(PluginError, match="unknown attack 'toy-denoize'"):
        build_matrix(validate_config(toy_config(attacks=["toy-denoize"])), toy_registry)


def test_unknown_top_level_key():
    with pytest.raises(ConfigError, match="unknown key 'defences'; allowed top-level keys"):
        validate_config({**toy_config(), "defences": []})


def test_unreadable_yaml_reports_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\ndefenses: [a, b\nattacks: []\n")
    with pytest.raises(ConfigError, match=r"not valid YAML at line \d+"):
        load_config(path)


def test_missing_file():
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config("/nonexistent/config.yaml")


def test_overrides_set_values_and_sweeps():
    data = apply_overrides(toy_config(), ["seed=7", "defenses.0.sigma=[0.1, 0.3, 0.5]", "datasets.0.n=2"])
    assert data["seed"] == 7 and data["defenses"][0]["sigma"] == [0.1, 0.3, 0.5] and data["datasets"][0]["n"] == 2
    with pytest.raises(ConfigError, match=r"needs an index 0\.\.1"):
        apply_overrides(toy_config(), ["defenses.5.sigma=1"])
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        apply_overrides(toy_config(), ["seed"])


def test_list_typed_parameter_is_not_a_sweep(toy_registry):
    from vispriv.harness.matrix import expand_entry

    single = expand_entry(toy_registry, "metric", {"name": "topk-accuracy", "ks": [1, 3]})
    assert len(single) == 1 and single[0].config.ks == (1, 3)
    swept = expand_entry(toy_registry, "metric", {"name": "topk-accuracy", "ks": [[1], [1, 3]]})
    assert [s.config.ks for s in swept] == [(1,), (1, 3)]
