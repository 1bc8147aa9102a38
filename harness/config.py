"""The matrix config file: YAML, ``--set key=value`` overrides, validation.

A config names the experiment, the matrix seed and lists of dataset, defense and attack
entries. Each entry is ``{name: PLUGIN, **params}``; an attack entry may instead be a
chain ``{chain: [STAGE, STAGE, ...]}`` whose stages are names or entries. A list given
for a parameter whose type is not a list is a sweep (``m: [2, 4, 8]``); for list-typed
parameters a list of lists is a sweep; lists inside a nested config sweep the same way
(``matching: {criterion: [mutual-nn, vocabulary]}``). Relative paths written in the file
are read from the file's folder (:mod:`vispriv.harness.config_paths`). See docs/config.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from vispriv.harness.devices import check_device
from vispriv.harness.errors import ConfigError

TOP_LEVEL_KEYS = ("name", "seed", "datasets", "defenses", "attacks", "metrics", "cache_dir", "description", "resources", "device")


class MatrixConfig(BaseModel):
    """A validated matrix config (plugin parameters are validated later, per plugin)."""

    model_config = ConfigDict(extra="forbid")

    name: str = "vispriv"
    description: str = ""
    seed: int = 0
    datasets: list[dict[str, Any] | str] = Field(min_length=1)
    defenses: list[dict[str, Any] | str] = Field(min_length=1)
    attacks: list[dict[str, Any] | str] = Field(min_length=1)
    #: Metric entries like the other kinds (``ssim`` or ``{name: topk-accuracy, ks: [1, 3]}``); ``None``: every fitting metric with its defaults.
    metrics: list[dict[str, Any] | str] | None = None
    cache_dir: str = ".vispriv-cache"
    #: Default resources of one cell for distributed executors (``{cpus: 1, gpus: 0}``);
    #: a plugin's own ``resources`` wins where it declares more.
    resources: dict[str, float] | None = None
    #: The torch device of the plugins' tensor kernels (``CellContext.device``): ``cpu`` or
    #: ``cuda`` / ``cuda:N``; checked against this machine's torch before any cell runs
    #: (:func:`vispriv.harness.devices.check_device`). Networks keep their own ``accelerator``.
    device: str = "cpu"
    _folder: Path | None = PrivateAttr(None)
    _command_line: frozenset[str] = PrivateAttr(frozenset())

    @property
    def folder(self) -> Path | None:
        """The absolute folder of the config file (``None``: not read from a file): relative paths it wrote are read from there."""
        return self._folder

    @property
    def command_line(self) -> frozenset[str]:
        """The keys ``--set`` gave (``datasets.0.root``): their relative paths are read from the shell's folder."""
        return self._command_line

    def read_from(self, path: str | Path, overrides: list[str]) -> MatrixConfig:
        """Record the config file ``path`` and the ``--set`` overrides it was read with; returns ``self``."""
        self._folder = Path(path).expanduser().absolute().parent
        self._command_line = frozenset(item.split("=", 1)[0].strip() for item in overrides)
        return self


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Parse a YAML mapping, or raise one-line :class:`ConfigError`."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"config {path} is not valid YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config {path} must be a YAML mapping with keys {', '.join(TOP_LEVEL_KEYS)}")
    return data


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``key.path=value`` overrides; list items are addressed by index (``defenses.1.m=4``).

    The value is parsed as YAML, so ``m=[2,4]`` sets a sweep and ``epsilon=.inf`` infinity.
    """
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. seed=3 or defenses.0.m=4")
        key, raw = item.split("=", 1)
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            value = raw
        parts = key.strip().split(".")
        node: Any = data
        for i, part in enumerate(parts[:-1]):
            node = _step(node, part, ".".join(parts[: i + 1]), item)
        last = parts[-1]
        if isinstance(node, list):
            index = _index(node, last, key, item)
            node[index] = value
        elif isinstance(node, dict):
            node[last] = value
        else:
            raise ConfigError(f"--set {item!r}: {'.'.join(parts[:-1])} is not a mapping or list")
    return data


def _step(node: Any, part: str, where: str, item: str) -> Any:
    if isinstance(node, list):
        return node[_index(node, part, where, item)]
    if isinstance(node, dict):
        if part not in node:
            node[part] = {}
        return node[part]
    raise ConfigError(f"--set {item!r}: {where} is not a mapping or list")


def _index(node: list[Any], part: str, where: str, item: str) -> int:
    try:
        index = int(part)
        node[index]
    except (ValueError, IndexError):
        raise ConfigError(f"--set {item!r}: {where} needs an index 0..{len(node) - 1}") from None
    return index


def load_config(path: str | Path, overrides: list[str] | None = None) -> MatrixConfig:
    """Read, override and validate a matrix config."""
    data = apply_overrides(read_yaml(path), overrides or [])
    return validate_config(data, source=str(path)).read_from(path, overrides or [])


def validate_config(data: dict[str, Any], source: str = "config") -> MatrixConfig:
    """Validate top-level keys, reporting the first problem in one line."""
    unknown = [k for k in data if k not in TOP_LEVEL_KEYS]
    if unknown:
        raise ConfigError(
            f"{source}: unknown key {unknown[0]!r}; allowed top-level keys: {', '.join(TOP_LEVEL_KEYS)}"
        )
    try:
        config = MatrixConfig(**data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {format_validation_error(exc)}") from None
    check_device(config.device, source)
    return config


def format_validation_error(exc: ValidationError) -> str:
    """The first pydantic error as ``field: message (got value)``."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ())) or "value"
    got = err.get("input")
    got_text = "" if err.get("type") == "missing" else f" (got {got!r})"
    msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    return f"{loc}: {msg}{got_text}"
