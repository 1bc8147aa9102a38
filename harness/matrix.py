"""Expand a matrix config into cells (dataset x defense x attack chain) and explain skips.

Pairing is by payload type: a defense runs on a dataset when one of the dataset's
``produces`` types is a subclass of one of the defense's ``consumes`` types; an attack
runs against a defense when the defense's release type fits the attack's ``consumes``;
a chain's stage ``i+1`` consumes what stage ``i`` produces. Every pair that is not run
gets a one-line reason. A defense with a config per input (:attr:`Defense.configs`) is built
with its dataset's: a pair whose entry sets another input's setting is skipped, and an entry
that no dataset takes is a one-line :class:`ConfigError`.
"""

from __future__ import annotations

import itertools
import typing
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from vispriv.harness.config import MatrixConfig, format_validation_error
from vispriv.harness.config_paths import resolve_config_paths
from vispriv.harness.errors import ConfigError, PluginError
from vispriv.harness.hashing import stable_hash
from vispriv.harness.labels import config_label, varying_keys
from vispriv.harness.path_labels import shown_paths
from vispriv.harness.plugin import PluginConfig, _Plugin
from vispriv.harness.registry import Registry
from vispriv.harness.seeds import chain_seeds, stage_seed_key


@dataclass(frozen=True)
class Stage:
    """One configured plugin: its class and validated config."""

    cls: type[_Plugin]
    config: PluginConfig
    #: Parameters the config set explicitly (part of a metric's hash key even when equal to the default).
    explicit: tuple[str, ...] = ()
    #: Dotted settings its config entry sweeps: named in the label even at their default.
    swept: frozenset[str] = frozenset()
    #: What the label shows of its path settings (:func:`~vispriv.harness.path_labels.shown_paths`):
    #: ``(setting, text)``, text ``None`` to leave the setting out. Never part of a key or hash.
    shown: tuple[tuple[str, str | None], ...] = ()

    @property
    def name(self) -> str:
        return self.cls.name

    @property
    def scenario(self) -> str:
        return self.cls.scenario

    def key(self) -> list[Any]:
        return [self.cls.kind, self.cls.name, self.cls.scenario, self.cls.version, self.config.model_dump(mode="json")]

    def seed_key(self) -> list[Any]:
        """What this stage's seed derives from (:mod:`.seeds`): kind, name and the non-default values."""
        return stage_seed_key(self.cls.kind, self.cls.name, self.config)

    def overrides(self) -> dict[str, Any]:
        """Parameters set in the config or differing from the plugin's defaults.

        A required field (no default) always counts as set.
        """
        default = {
            k: to_jsonable_python(f.get_default(call_default_factory=True))
            for k, f in type(self.config).model_fields.items()
            if not f.is_required()
        }
        mine = self.config.model_dump(mode="json")
        out = {}
        for k, v in mine.items():
            if default.get(k) != v or k in self.explicit:
                base = default.get(k)
                if isinstance(v, dict) and isinstance(base, dict):  # nested config: only what differs
                    differing = {sk: sv for sk, sv in v.items() if base.get(sk) != sv}
                    if differing:
                        out[k] = differing
                    continue
                out[k] = v
        return out

    def label(self) -> str:
        """``name`` or ``name(k=v,...)`` with the settings that differ from the defaults (:mod:`.labels`)."""
        return config_label(self.name, self.config, self.swept, dict(self.shown))

    def instance(self) -> _Plugin:
        return self.cls(self.config)


@dataclass(frozen=True)
class Cell:
    """One run of the matrix: a dataset, a defense and an attack chain."""

    dataset: Stage
    defense: Stage
    attack: tuple[Stage, ...]
    #: The configured metric plugins that score this cell (``metrics:`` entries, or every fitting metric with defaults).
    metrics: tuple[Stage, ...]
    matrix_seed: int
    #: The torch device of the plugins' tensor kernels (the config's ``device``).
    device: str = "cpu"

    @property
    def scenario(self) -> str:
        return self.dataset.cls.scenario if self.dataset.cls.scenario != "any" else self.defense.cls.scenario

    def dataset_key(self) -> str:
        return stable_hash(self.dataset.key())

    def defense_key(self) -> str:
        return stable_hash(self.dataset_key(), self.defense.key())

    def attack_keys(self) -> list[str]:
        keys, previous = [], self.defense_key()
        for stage in self.attack:
            previous = stable_hash(previous, stage.key())
            keys.append(previous)
        return keys

    @property
    def hash(self) -> str:
        """Content hash of everything that determines the cell's result: every stage's config and
        version, the metrics, and the seeds drawn from them (so a change of how seeds derive, which
        moves the numbers, is never taken for a finished cell by ``--resume``)."""
        metric_keys = sorted(_metric_key(m) for m in self.metrics)
        return stable_hash(self.attack_keys()[-1], metric_keys, self.matrix_seed, self.seed)

    def _stage_seed_keys(self) -> list[list[Any]]:
        return [s.seed_key() for s in (self.dataset, self.defense, *self.attack)]

    def stage_seeds(self) -> list[int]:
        """Seeds of the dataset, the defense and each attack stage, in that order (:mod:`.seeds`)."""
        return chain_seeds(self.matrix_seed, self._stage_seed_keys())

    @property
    def seed(self) -> int:
        """The cell's own seed (its metrics' randomness): the stage chain plus the metrics' seed identities."""
        metrics = sorted((m.seed_key() for m in self.metrics), key=stable_hash)
        return chain_seeds(self.matrix_seed, [*self._stage_seed_keys(), metrics])[-1]

    @property
    def attack_label(self) -> str:
        return " > ".join(s.label() for s in self.attack)

    @property
    def defense_label(self) -> str:
        return self.defense.label()

    @property
    def label(self) -> str:
        return f"{self.dataset.label()} | {self.defense_label} | {self.attack_label}"

    def params(self) -> dict[str, Any]:
        """Flat immutable configuration, logged as MLflow params."""
        out: dict[str, Any] = {"dataset": self.dataset.name, "defense": self.defense.name, "attack": " > ".join(s.name for s in self.attack)}
        for prefix, stage in [("dataset", self.dataset), ("defense", self.defense)]:
            for k, v in stage.config.model_dump(mode="json").items():
                out[f"{prefix}.{k}"] = v
        for i, stage in enumerate(self.attack):
            prefix = "attack" if len(self.attack) == 1 else f"attack.{i}.{stage.name}"
            for k, v in stage.config.model_dump(mode="json").items():
                out[f"{prefix}.{k}"] = v
        for stage in self.metrics:
            for k, v in stage.config.model_dump(mode="json").items():
                out[f"metric.{stage.name}.{k}"] = v
        return out


def _metric_key(stage: Stage) -> list[str]:
    """A metric's part of the cell hash: name and version, plus the parameters that differ from its defaults.

    A metric with its defaults keeps the key it had before metrics took parameters, so
    ``--resume`` still finds cells logged by older versions of the harness.
    """
    key = [stage.name, stage.cls.version]
    overrides = stage.overrides()
    return [*key, stable_hash(overrides)] if overrides else key


@dataclass
class Skip:
    """A pair the matrix does not run, and why."""

    what: str
    reason: str

    def line(self) -> str:
        return f"{self.what}: {self.reason}"


@dataclass
class Matrix:
    cells: list[Cell] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)


# -- expansion of entries into configured stages -------------------------------------
def _is_list_type(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, set, frozenset):
        return True
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return any(_is_list_type(a) for a in typing.get_args(annotation))
    return annotation in (list, tuple)


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model a field holds (``matching: MatchingConfig``, also inside ``X | None``), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        models = [m for m in map(_nested_model, typing.get_args(annotation)) if m is not None]
        return models[0] if len(models) == 1 else None
    return None


def _sweep(params: dict[str, Any], fields: dict[str, Any], owner: str, prefix: str) -> list[dict[str, Any]]:
    """Every combination of the swept values of ``params`` (a list on a non-list field is a sweep).

    A mapping given for a nested config (``matching: {criterion: [mutual-nn, vocabulary]}``)
    sweeps its own fields the same way, recursively; so does each mapping in a list of them
    (``matching: [{criterion: vocabulary}, {ratio: [0.7, 0.9]}]`` gives three values).
    """
    axes: list[list[tuple[str, Any]]] = []
    for key, value in params.items():
        field_info = fields.get(key)
        annotation = field_info.annotation if field_info is not None else None
        model = _nested_model(annotation)
        sweep = isinstance(value, list) and (
            not _is_list_type(annotation) or (len(value) > 0 and all(isinstance(v, list) for v in value))
        )
        if sweep and len(value) == 0:
            raise ConfigError(f"{owner}: sweep over {prefix + key!r} is empty")
        values = value if sweep else [value]
        if model is not None:
            nested = [
                n for v in values
                for n in (_sweep(v, model.model_fields, owner, f"{prefix}{key}.") if isinstance(v, dict) else [v])
            ]
            values = nested
        axes.append([(key, v) for v in values])
    return [dict(combo) for combo in itertools.product(*axes)] if axes else [{}]


class SettingOfAnotherInput(ConfigError):
    """A defense entry sets a setting that the defense uses on other inputs, not on this dataset's (:attr:`Defense.configs`).

    ``reason`` is the part after the pair (``does not use 'loss' on ClusteringData; ...``):
    the matrix skips such a pair with it, and raises the whole line when the entry fits no dataset.
    """

    def __init__(self, defense: str, dataset: str, reason: str) -> None:
        self.reason = reason
        super().__init__(f"defense {defense!r} on {dataset} {reason}")


def expand_entry(registry: Registry, kind: str, entry: Any, scenario: str | None = None,
                 dataset: type[_Plugin] | None = None) -> list[Stage]:
    """All configured stages of one entry (more than one when it sweeps a parameter).

    A defense entry paired with ``dataset`` gets the config of that dataset's input
    (:meth:`Defense.config_for`); a setting the defense uses only on other inputs raises
    :class:`SettingOfAnotherInput`.
    """
    if isinstance(entry, str):
        entry = {"name": entry}
    if not isinstance(entry, dict) or "name" not in entry:
        raise ConfigError(f"each {kind} entry needs a 'name'; got {entry!r}")
    params = {k: v for k, v in entry.items() if k != "name"}
    cls = registry.get(kind, str(entry["name"]), scenario)
    fields = cls.Config.model_fields
    unknown = [k for k in params if k not in fields]
    if unknown:
        allowed = ", ".join(sorted(fields)) or "none (this plugin takes no parameters)"
        raise ConfigError(f"{kind} {cls.name!r}: unknown key {unknown[0]!r}; allowed: {allowed}")
    config_cls = cls.config_for(dataset.produces) if dataset is not None and kind == "defense" else cls.Config  # type: ignore[attr-defined]
    elsewhere = [k for k in params if k not in config_cls.model_fields]
    if elsewhere and dataset is not None:
        inputs = _names(dataset.produces)
        allowed = ", ".join(sorted(config_cls.model_fields)) or "none"
        raise SettingOfAnotherInput(
            cls.name, dataset.name, f"does not use {elsewhere[0]!r} on {inputs}; its settings on {inputs}: {allowed}"
        )
    configs = []
    for combo in _sweep(params, config_cls.model_fields, f"{kind} {cls.name!r}", ""):
        try:
            configs.append(config_cls(**combo))
        except ValidationError as exc:
            raise ConfigError(f"{kind} {cls.name!r}: {format_validation_error(exc)}") from None
    swept = varying_keys(configs)
    return [Stage(cls, config, tuple(sorted(params)), swept) for config in configs]


def _fits(produced: tuple[type, ...], consumed: tuple[type, ...]) -> bool:
    return any(issubclass(p, c) for p in produced for c in consumed)


def _names(types: tuple[type, ...]) -> str:
    return "/".join(t.__name__ for t in types) or "nothing"


def _resolve_scenario(registry: Registry, kind: str, entry: Any, scenario: str,
                      dataset: type[_Plugin] | None = None) -> tuple[list[Stage] | None, str]:
    """Stages of an entry for a dataset's scenario, or (None, reason) when the name lives elsewhere."""
    name = entry if isinstance(entry, str) else (entry.get("name") if isinstance(entry, dict) else None)
    by_scenario = registry.plugins[kind].get(str(name), {}) if name is not None else {}
    if by_scenario and scenario not in by_scenario and "any" not in by_scenario and scenario != "any":
        return None, f"belongs to scenario {', '.join(sorted(by_scenario))}, the dataset is {scenario}"
    return expand_entry(registry, kind, entry, scenario if scenario != "any" else None, dataset), ""


def _attack_entries(entry: Any) -> list[Any]:
    if isinstance(entry, dict) and "chain" in entry:
        extra = [k for k in entry if k != "chain"]
        if extra:
            raise ConfigError(f"attack chain entry takes only 'chain'; got also {extra[0]!r}")
        stages = entry["chain"]
        if not isinstance(stages, list) or not stages:
            raise ConfigError("attack 'chain' must be a non-empty list of attack names or entries")
        return stages
    return [entry]


def build_matrix(config: MatrixConfig, registry: Registry) -> Matrix:
    """Expand ``config`` into cells; every incompatible combination becomes a :class:`Skip`."""
    matrix = Matrix()
    config = resolve_config_paths(config, registry)
    wanted_metrics = _select_metrics(config, registry)
    datasets = with_path_labels([s for entry in config.datasets for s in _expand_dataset(registry, config, entry)])
    refused: dict[int, str] = {}  # defense entry -> the first dataset that refused one of its settings
    taken: set[int] = set()
    for dataset in datasets:
        scenario = dataset.cls.scenario
        for i, d_entry in enumerate(config.defenses):
            try:
                d_stages, why = _resolve_scenario(registry, "defense", d_entry, scenario, dataset.cls)
            except SettingOfAnotherInput as exc:
                refused.setdefault(i, str(exc))
                matrix.skipped.append(Skip(f"{dataset.label()} x defense {_entry_name(d_entry)}", exc.reason))
                continue
            if d_stages is None:
                matrix.skipped.append(Skip(f"{dataset.label()} x defense {_entry_name(d_entry)}", why))
                continue
            taken.add(i)
            for defense in d_stages:
                if not _fits(dataset.cls.produces, defense.cls.consumes):
                    matrix.skipped.append(
                        Skip(
                            f"{dataset.label()} x {defense.label()}",
                            f"needs {_names(defense.cls.consumes)}, {dataset.name} produces {_names(dataset.cls.produces)}",
                        )
                    )
                    continue
                for a_entry in config.attacks:
                    _add_attack(matrix, registry, config, dataset, defense, a_entry, wanted_metrics)
    # An entry whose settings no dataset of the config uses is a mistake, not a pair to skip.
    for i, line in refused.items():
        if i not in taken:
            raise ConfigError(line)
    if not matrix.cells and not matrix.skipped:
        raise ConfigError(no_cell_message([]))
    return matrix


def with_path_labels(stages: list[Stage]) -> list[Stage]:
    """``stages`` whose labels name their files and folders by the shortest part that tells the
    stages of one plugin apart (:func:`~vispriv.harness.path_labels.shown_paths`)."""
    by_plugin: dict[tuple[str, str], list[int]] = {}
    for i, stage in enumerate(stages):
        by_plugin.setdefault((stage.cls.kind, stage.name), []).append(i)
    out = list(stages)
    for indices in by_plugin.values():
        for i, shown in zip(indices, shown_paths([stages[i].config for i in indices])):
            out[i] = replace(stages[i], shown=tuple(sorted(shown.items())))
    return out


def check_plans_cells(matrix: Matrix) -> None:
    """Raise the one-line :class:`ConfigError` of a matrix with no cell (before any run is created)."""
    if not matrix.cells:
        raise ConfigError(no_cell_message(matrix.skipped))


def no_cell_message(skipped: list[Skip]) -> str:
    """The one-line error of a matrix that plans no cell, naming why each pair was skipped."""
    if not skipped:
        return "the config plans no cell: it lists no dataset, defense or attack to pair"
    reasons = "; ".join(s.line() for s in skipped)
    return (f"the config plans no cell: all {len(skipped)} pair(s) skipped -- {reasons}. "
            "`vispriv plugins --kind defense` shows each plugin's scenario")


def _expand_dataset(registry: Registry, config: MatrixConfig, entry: Any) -> list[Stage]:
    """The stages of a dataset entry; a name that exists in several scenarios (``image-folder``)
    takes the scenarios that the config's defenses and attacks both belong to (all of them if none)."""
    name = entry if isinstance(entry, str) else (entry.get("name") if isinstance(entry, dict) else None)
    by_scenario = registry.plugins["dataset"].get(str(name), {}) if name is not None else {}
    if len(by_scenario) < 2 or "any" in by_scenario:
        return expand_entry(registry, "dataset", entry)

    def scenarios_of(kind: str, entries: list[Any]) -> set[str]:
        names = {_entry_name(e) for entry in entries for e in (_attack_entries(entry) if kind == "attack" else [entry])}
        found = {sc for n in names for sc in registry.plugins[kind].get(n, {})}
        return set(by_scenario) if "any" in found else found

    wanted = set(by_scenario) & scenarios_of("defense", config.defenses) & scenarios_of("attack", config.attacks)
    return [s for scenario in sorted(wanted or by_scenario) for s in expand_entry(registry, "dataset", entry, scenario)]


def _entry_name(entry: Any) -> str:
    if isinstance(entry, dict):
        if "chain" in entry:
            return " > ".join(_entry_name(e) for e in entry["chain"])
        return str(entry.get("name"))
    return str(entry)


def _add_attack(
    matrix: Matrix,
    registry: Registry,
    config: MatrixConfig,
    dataset: Stage,
    defense: Stage,
    a_entry: Any,
    wanted_metrics: list[list[Stage]] | None,
) -> None:
    scenario = dataset.cls.scenario if dataset.cls.scenario != "any" else defense.cls.scenario
    per_stage: list[list[Stage]] = []
    for stage_entry in _attack_entries(a_entry):
        stages, why = _resolve_scenario(registry, "attack", stage_entry, scenario)
        if stages is None:
            matrix.skipped.append(Skip(f"{defense.label()} x attack {_entry_name(stage_entry)}", why))
            return
        per_stage.append(stages)
    for chain in itertools.product(*per_stage):
        what = f"{defense.label()} x {' > '.join(s.label() for s in chain)}"
        produced = defense.cls.release_types(dataset.cls.produces)  # type: ignore[attr-defined]
        reason = ""
        for i, stage in enumerate(chain):
            if not _fits(produced, stage.cls.consumes):
                source = defense.name if i == 0 else chain[i - 1].name
                reason = f"{stage.name}: needs {_names(stage.cls.consumes)}, {source} produces {_names(produced)}"
                break
            produced = stage.cls.produces
        if reason:
            matrix.skipped.append(Skip(what, reason))
            continue
        produced_all = tuple(t for s in chain for t in s.cls.produces)
        pools = wanted_metrics if wanted_metrics is not None else [[m] for m in _default_metrics(registry)]
        # A metric of one scenario scores only that scenario's cells (``any``: every cell);
        # an entry that sweeps a metric's parameters gives one cell per value.
        seen: set[tuple[Stage, ...]] = set()
        for combo in itertools.product(*pools):
            metrics = tuple(m for m in combo if _fits(produced_all, m.cls.consumes) and m.cls.scenario in ("any", scenario))
            if metrics not in seen:
                seen.add(metrics)
                matrix.cells.append(Cell(dataset, defense, tuple(chain), metrics, config.seed, config.device))


def _select_metrics(config: MatrixConfig, registry: Registry) -> list[list[Stage]] | None:
    """The configured stages of each ``metrics:`` entry (a name, or ``{name: ..., <params>}``)."""
    if config.metrics is None:
        return None
    out = []
    for entry in config.metrics:
        try:
            out.append(expand_entry(registry, "metric", entry))
        except PluginError as exc:
            raise ConfigError(str(exc)) from None
    return out


def _default_metrics(registry: Registry) -> list[Stage]:
    """Every registered metric with its defaults (one with a required parameter must be listed in ``metrics:``)."""
    out = []
    for cls in registry.all("metric"):
        try:
            out.append(Stage(cls, cls.Config()))
        except ValidationError:
            continue
    return out
