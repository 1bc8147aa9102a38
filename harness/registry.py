"""The plugin manager: entry-point discovery, registration and isolation of broken plugins.

Built-in plugins are announced in this project's own ``[project.entry-points.vispriv]``
table, exactly as a third-party package announces its plugins, so both walk one path.
A plugin module that raises on import, or whose hook raises, is reported (see
:attr:`Registry.failures`) and skipped; with ``strict=True`` it is fatal.
``VISPRIV_PLUGINS=a,b`` (entry-point names) restricts which entry points are loaded.
"""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

import pluggy

from vispriv.harness import hookspecs
from vispriv.harness.errors import PluginError, did_you_mean
from vispriv.harness.plugin import PLUGIN_KINDS, PluginConfig, _Plugin

ENTRY_POINT_GROUP = "vispriv"
BUILTIN_DIST = "vispriv"
HOOKS = {
    "dataset": "vispriv_register_datasets",
    "defense": "vispriv_register_defenses",
    "attack": "vispriv_register_attacks",
    "metric": "vispriv_register_metrics",
}


@dataclass
class PluginFailure:
    """A plugin module that could not be loaded or registered."""

    source: str
    error: str
    detail: str

    def line(self) -> str:
        return f"plugin {self.source!r} skipped: {self.error}"

    def fatal_line(self) -> str:
        """The message with ``--strict``, where nothing is skipped: the command stops."""
        return f"plugin {self.source!r} failed: {self.error} (fatal with --strict)"


class _PluginManager(pluggy.PluginManager):
    """Takes every ``vispriv_*`` function of a plugin module as a hook, marked or not (as pytest does).

    So a hook without ``@hookimpl`` still runs, and a misspelt hook name is an unknown
    hook that :meth:`pluggy.PluginManager.check_pending` reports, instead of a function
    nobody ever calls.
    """

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is None and name.startswith(f"{hookspecs.PROJECT}_") and callable(getattr(plugin, name, None)):
            return {}
        return opts


class Registry:
    """All registered plugin classes, by kind and name."""

    def __init__(self, strict: bool = False) -> None:
        self.strict = strict
        self.pm = _PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        # kind -> name -> scenario -> class: one name (``none``) may exist once per scenario.
        self.plugins: dict[str, dict[str, dict[str, type[_Plugin]]]] = {k: {} for k in PLUGIN_KINDS}
        self.sources: dict[tuple[str, str, str], str] = {}
        self.failures: list[PluginFailure] = []

    # -- loading -------------------------------------------------------------------
    def load_entry_points(self, only: list[str] | None = None) -> None:
        """Load every module of the ``vispriv`` entry-point group (or those in ``only``)."""
        if only is None:
            env = os.environ.get("VISPRIV_PLUGINS", "").strip()
            only = [s.strip() for s in env.split(",") if s.strip()] or None
        # This project's own plugins first: a third-party plugin reusing one of their names is the one refused.
        eps = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (_dist_name(e) != BUILTIN_DIST, e.name))
        for ep in eps:
            if only is not None and ep.name not in only:
                continue
            source = f"{ep.name} ({_dist_name(ep)})"
            try:
                module = ep.load()
            except Exception as exc:  # noqa: BLE001 -- a broken plugin must not stop the harness
                self._fail(source, f"import of {ep.value} raised {type(exc).__name__}: {exc}")
                continue
            self.add_module(module, source)

    def add_module(self, module: ModuleType | Any, source: str | None = None) -> None:
        """Register a module (or object) that implements hooks, then collect its plugins."""
        source = source or getattr(module, "__name__", repr(module))
        try:
            self.pm.register(module, name=source)
            self.pm.check_pending()
        except ValueError:  # already registered (pluggy's PluginValidationError is not a ValueError)
            return
        except pluggy.PluginValidationError as exc:
            if self.pm.is_registered(module):
                self.pm.unregister(module)
            self._fail(source, "; ".join(line.strip() for line in str(exc).strip().splitlines() if line.strip()))
            return
        others = [p for p in self.pm.get_plugins() if p is not module]
        for kind, hook_name in HOOKS.items():
            if not any(i.plugin is module for i in getattr(self.pm.hook, hook_name).get_hookimpls()):
                continue
            hook = self.pm.subset_hook_caller(hook_name, remove_plugins=others)
            try:
                hook(register=lambda cls, _k=kind: self._register(_k, cls, source))
            except PluginError as exc:
                self._fail(source, str(exc))
            except Exception as exc:  # noqa: BLE001
                self._fail(source, f"{hook_name} raised {type(exc).__name__}: {exc}")

    def register_commands(self, cli: Any) -> None:
        """Let every loaded plugin module add its subcommands to ``cli`` (a click group).

        A module's hook that raises, or adds a command whose name is taken, is a failure of
        that module (skipped, or fatal with ``strict``); the commands added before stay.
        """
        hook_name = "vispriv_register_commands"
        for impl in getattr(self.pm.hook, hook_name).get_hookimpls():
            source = self.pm.get_name(impl.plugin) or repr(impl.plugin)
            group = _NoClashGroup(cli, source)
            try:
                impl.function(cli=group)
            except PluginError as exc:
                self._fail(source, str(exc))
            except Exception as exc:  # noqa: BLE001 -- a broken plugin must not stop the harness
                self._fail(source, f"{hook_name} raised {type(exc).__name__}: {exc}")

    def _register(self, kind: str, cls: type[_Plugin], source: str) -> None:
        base = PLUGIN_KINDS[kind]
        if not (isinstance(cls, type) and issubclass(cls, base)):
            raise PluginError(f"{source}: {cls!r} registered as a {kind} is not a {base.__name__} subclass")
        if not cls.name:
            raise PluginError(f"{source}: {cls.__name__} has no name")
        if not (isinstance(cls.Config, type) and issubclass(cls.Config, PluginConfig)):
            raise PluginError(f"{source}: {cls.__name__}.Config must subclass vispriv.harness.PluginConfig")
        for payload, config in getattr(cls, "configs", {}).items():
            if not (isinstance(config, type) and issubclass(config, PluginConfig)):
                raise PluginError(f"{source}: {cls.__name__}.configs[{payload.__name__}] must subclass vispriv.harness.PluginConfig")
            extra = sorted(set(config.model_fields) - set(cls.Config.model_fields))
            if extra:
                raise PluginError(f"{source}: {cls.__name__}.configs[{payload.__name__}] has {extra[0]!r}, "
                                  f"which {cls.__name__}.Config lacks: Config holds every input's settings")
        by_scenario = self.plugins[kind].setdefault(cls.name, {})
        existing = by_scenario.get(cls.scenario)
        if existing is not None and existing is not cls:
            other = self.sources[(kind, cls.name, cls.scenario)]
            self._fail(
                source,
                f"{kind} {cls.name!r} of scenario {cls.scenario!r} is already registered by {other}; "
                f"{source} must name its {kind} differently",
            )
            return
        by_scenario[cls.scenario] = cls
        self.sources[(kind, cls.name, cls.scenario)] = source

    def _fail(self, source: str, error: str) -> None:
        failure = PluginFailure(source, error, traceback.format_exc())
        if self.strict:
            raise PluginError(failure.fatal_line())
        self.failures.append(failure)

    # -- lookup --------------------------------------------------------------------
    def get(self, kind: str, name: str, scenario: str | None = None) -> type[_Plugin]:
        """The plugin class ``name`` of ``kind`` (for ``scenario`` where the name is shared).

        Raises a one-line :class:`PluginError` listing what exists when nothing fits.
        """
        by_scenario = self.plugins[kind].get(name)
        if not by_scenario:
            known = ", ".join(sorted(self.plugins[kind])) or "none"
            hint = did_you_mean(name, self.plugins[kind])
            raise PluginError(f"unknown {kind} {name!r}{hint}; registered {kind}s: {known}")
        if scenario is not None and scenario in by_scenario:
            return by_scenario[scenario]
        if "any" in by_scenario:
            return by_scenario["any"]
        if scenario is None and len(by_scenario) == 1:
            return next(iter(by_scenario.values()))
        scenarios = ", ".join(sorted(by_scenario))
        wanted = f"scenario {scenario!r}" if scenario else "no scenario given"
        raise PluginError(f"{kind} {name!r} exists for scenarios {scenarios}; {wanted}")

    def names(self, kind: str) -> list[str]:
        return sorted(self.plugins[kind])

    def all(self, kind: str | None = None) -> list[type[_Plugin]]:
        kinds = [kind] if kind else list(PLUGIN_KINDS)
        return [
            cls
            for k in kinds
            for _, by_scenario in sorted(self.plugins[k].items())
            for _, cls in sorted(by_scenario.items())
        ]

    def source_of(self, cls: type[_Plugin]) -> str:
        return self.sources.get((cls.kind, cls.name, cls.scenario), "?")


def _dist_name(ep: Any) -> str:
    return ep.dist.name if ep.dist is not None else "?"


def load_registry(strict: bool = False, only: list[str] | None = None) -> Registry:
    """A registry with every entry-point plugin loaded."""
    registry = Registry(strict=strict)
    registry.load_entry_points(only=only)
    return registry


class _NoClashGroup:
    """The click group as a plugin sees it: adding a command whose name exists is a :class:`PluginError`."""

    def __init__(self, group: Any, source: str) -> None:
        self._group, self._source = group, source

    def add_command(self, cmd: Any, name: str | None = None) -> None:
        name = name or cmd.name
        if name in self._group.commands:
            raise PluginError(f"command {name!r} of {self._source} clashes with an existing vispriv command; "
                              "the plugin must name it differently")
        self._group.add_command(cmd, name)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        import click

        if len(args) == 1 and callable(args[0]) and not kwargs:  # @cli.command without parentheses
            return self.command()(args[0])

        def decorator(f: Any) -> Any:
            cmd = click.command(*args, **kwargs)(f)
            self.add_command(cmd)
            return cmd

        return decorator

    def __getattr__(self, name: str) -> Any:
        return getattr(self._group, name)
