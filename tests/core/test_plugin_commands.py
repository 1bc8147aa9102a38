"""Plugins add subcommands to `vispriv` (the `vispriv_register_commands` hook, as llm's and datasette's)."""

from __future__ import annotations

import click
import pytest

from vispriv.harness.errors import PluginError
from vispriv.harness.registry import Registry


def test_an_installed_third_party_plugin_adds_a_command(run_cli):
    out = run_cli("toy-hello", "world")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "hello world from the toy plugin\n"
    listing = run_cli("--help")
    assert "toy-hello" in listing.stdout and "Greet WHO" in listing.stdout
    assert "extract-features" not in listing.stdout  # the federated plugins are not loaded in these tests


def test_the_built_in_extractor_is_a_vispriv_command(run_cli, tmp_path):
    out = run_cli("extract-features", "--help", env={"VISPRIV_PLUGINS": "federated-learning"})
    assert out.returncode == 0, out.stderr
    assert "Usage: vispriv extract-features [OPTIONS] IMAGES" in out.stdout
    missing = run_cli("extract-features", "no-such-folder", "--model", "m.pt2", "--out", "f.npz",
                      env={"VISPRIV_PLUGINS": "federated-learning"})
    assert missing.returncode == 2 and missing.stderr == f"error: model file not found: {tmp_path / 'm.pt2'}\n"


def test_an_unknown_command_is_still_clicks_one_line_usage_error(run_cli):
    out = run_cli("no-such-command")
    assert out.returncode == 2 and "No such command 'no-such-command'" in out.stderr and "Traceback" not in out.stderr


def _group() -> click.Group:
    group = click.Group("vispriv")

    @group.command(name="matrix")
    def matrix():
        """The core's own."""

    return group


def test_a_command_clashing_with_the_cores_is_refused_and_the_plugin_named():
    class Clashing:
        @staticmethod
        def vispriv_register_commands(cli):
            @cli.command(name="matrix")
            def matrix():
                """A plugin's matrix."""

    group = _group()
    core = group.commands["matrix"]
    registry = Registry()
    registry.add_module(Clashing(), "clashing (toy)")
    registry.register_commands(group)
    assert group.commands["matrix"] is core
    assert [f.line() for f in registry.failures] == [
        "plugin 'clashing (toy)' skipped: command 'matrix' of clashing (toy) clashes with an existing vispriv "
        "command; the plugin must name it differently"]
    strict = Registry(strict=True)
    strict.add_module(Clashing(), "clashing (toy)")
    with pytest.raises(PluginError, match="clashes with an existing vispriv command"):
        strict.register_commands(_group())


def test_a_commands_hook_that_raises_is_isolated_from_the_others():
    class Raising:
        @staticmethod
        def vispriv_register_commands(cli):
            raise RuntimeError("boom")

    class Good:
        @staticmethod
        def vispriv_register_commands(cli):
            cli.add_command(click.Command("good-one", callback=lambda: None))

    group = _group()
    registry = Registry()
    registry.add_module(Raising(), "raising")
    registry.add_module(Good(), "good")
    registry.register_commands(group)
    assert "good-one" in group.commands
    assert [f.line() for f in registry.failures] == [
        "plugin 'raising' skipped: vispriv_register_commands raised RuntimeError: boom"]
