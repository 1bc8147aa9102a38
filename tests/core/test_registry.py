"""Plugin discovery through the ``vispriv`` entry-point group."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vispriv.harness.errors import PluginError
from vispriv.harness.registry import Registry, load_registry

SITE_OK = Path(__file__).parent / "fixtures" / "site_ok"
SITE_BROKEN = Path(__file__).parent / "fixtures" / "site_broken"


def test_builtins_and_toy_plugins_are_discovered(toy_registry):
    assert toy_registry.get("defense", "toy-noise").scenario == "toy"
    assert toy_registry.get("metric", "ssim").higher_is_better["ssim"] is True
    assert toy_registry.source_of(toy_registry.get("attack", "toy-denoise")) == "toy (vispriv-toy)"
    assert not [f for f in toy_registry.failures if "toy" in f.source]


def test_unknown_plugin_names_what_exists(toy_registry):
    with pytest.raises(PluginError, match=r"unknown defense 'nosie' \(did you mean 'none'\?\); registered defenses: .*toy-noise"):
        toy_registry.get("defense", "nosie")
    with pytest.raises(PluginError, match=r"unknown defense 'toy-nosie' \(did you mean 'toy-noise'\?\); registered"):
        toy_registry.get("defense", "toy-nosie")
    with pytest.raises(PluginError, match=r"unknown defense 'xyzzy'; registered defenses: "):
        toy_registry.get("defense", "xyzzy")


def test_same_name_in_two_scenarios_resolves_by_scenario(toy_registry):
    scenarios = sorted(toy_registry.plugins["defense"]["none"])
    assert len(scenarios) >= 2  # ``none`` exists in several scenarios, as distinct classes
    resolved = {s: toy_registry.get("defense", "none", s) for s in scenarios}
    assert all(cls.scenario == s for s, cls in resolved.items())
    assert len(set(resolved.values())) == len(scenarios)
    with pytest.raises(PluginError, match=r"defense 'none' exists for scenarios .*image-release.*; no scenario given"):
        toy_registry.get("defense", "none")


def test_env_restricts_loading(monkeypatch):
    monkeypatch.syspath_prepend(str(SITE_OK))
    monkeypatch.setenv("VISPRIV_PLUGINS", "toy")
    registry = load_registry()
    assert registry.names("attack") == ["toy-denoise"]
    assert registry.names("metric") == []


def test_broken_plugin_is_reported_and_skipped(monkeypatch):
    monkeypatch.syspath_prepend(str(SITE_BROKEN))
    registry = load_registry()
    assert any("broken" in f.source and "broken on purpose" in f.error for f in registry.failures)
    assert "ssim" in registry.names("metric")


def test_broken_plugin_is_fatal_when_strict(monkeypatch):
    monkeypatch.syspath_prepend(str(SITE_BROKEN))
    with pytest.raises(PluginError, match=r"broken on purpose.*--strict"):
        load_registry(strict=True)


def test_hook_that_raises_is_isolated():
    class Module:
        @staticmethod
        def vispriv_register_attacks(register):
            raise RuntimeError("boom")

    registry = Registry()
    registry.add_module(Module(), "bad-hooks")
    assert registry.failures and "boom" in registry.failures[0].error


def test_cli_plugins_json_lists_builtins(run_cli):
    out = run_cli("plugins", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    names = {(p["kind"], p["name"]) for p in data["plugins"]}
    assert {("metric", "ssim"), ("metric", "mae"), ("dataset", "sample-images"), ("attack", "toy-denoise")} <= names
    toy = next(p for p in data["plugins"] if p["name"] == "toy-noise")
    assert toy["consumes"] == ["Images"] and toy["produces"] == ["NoisyImages"] and toy["source"].startswith("toy")


def test_cli_broken_plugin_warns_then_strict_fails(run_cli):
    out = run_cli("plugins", sites=(SITE_BROKEN,))
    assert out.returncode == 0
    assert "warning: plugin 'broken (vispriv-broken)' skipped" in out.stderr
    strict = run_cli("plugins", "--strict", sites=(SITE_BROKEN,))
    assert strict.returncode == 2
    assert strict.stderr.strip().count("\n") == 0 and strict.stderr.startswith("error: plugin")


def test_every_builtin_entry_point_loads_cleanly(monkeypatch):
    monkeypatch.delenv("VISPRIV_PLUGINS", raising=False)
    registry = load_registry(strict=True)
    scenarios = {cls.scenario for cls in registry.all("defense")}
    assert {"image-release", "descriptor-release", "federated-learning", "album-sharing"} <= scenarios
    for kind in ("dataset", "defense", "attack", "metric"):
        for cls in registry.all(kind):
            required = [n for n, f in cls.Config.model_fields.items() if f.is_required()]
            assert cls.version and (cls.description or cls.__doc__), cls
            # Only where the data are may be required: a folder, a manifest, a Flower capture folder, captured model/update files.
            assert set(required) <= {"root", "manifest", "capture", "model", "update"}, (cls, required)


def test_a_defense_config_per_input_must_stay_within_its_config():
    """``Config`` holds every input's settings, so a setting in no input is an unknown key, not another input's."""
    from vispriv.harness import Defense, PluginConfig
    from vispriv.harness.payloads import Images

    class Narrow(PluginConfig):
        rounds: int = 1
        centroid_l1: float = 0.0

    class Wide(PluginConfig):
        rounds: int = 1

    class Listed(Defense):
        name = "listed"
        Config = Wide
        consumes = (Images,)
        configs = {Images: Narrow}

    class Module:
        @staticmethod
        def vispriv_register_defenses(register):
            register(Listed)

    registry = Registry()
    registry.add_module(Module(), "listed-hooks")
    assert [f.error for f in registry.failures] == [
        "listed-hooks: Listed.configs[Images] has 'centroid_l1', which Listed.Config lacks: Config holds every input's settings"
    ]
