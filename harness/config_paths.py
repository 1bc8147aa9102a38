"""Relative paths written in a config file are read from the config file's folder.

A config names the files and folders its plugins read (fields typed
:data:`~vispriv.harness.plugin.FolderPath` or :data:`~vispriv.harness.plugin.FilePath`). A
relative one written in the file resolves against the file's folder, so a config and its data
can move together and the command works from any shell folder. A path given on the command
line (``--set datasets.0.root=data``) resolves against the shell's folder, as every other
command-line path does. A config in the shell's own folder keeps its paths as written (both
rules give the same file, and the cells keep their hashes). Paths inside an attack chain are
left as written (read from the shell's folder).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from vispriv.harness.config import MatrixConfig
from vispriv.harness.plugin import is_path_field
from vispriv.harness.registry import Registry

#: The config's lists of entries and the plugin kind each one names.
ENTRY_LISTS = (("datasets", "dataset"), ("defenses", "defense"), ("attacks", "attack"), ("metrics", "metric"))


def resolve_config_paths(config: MatrixConfig, registry: Registry) -> MatrixConfig:
    """``config`` with each relative path its file wrote made absolute against the file's folder."""
    folder = config.folder
    if folder is None or folder.resolve() == Path.cwd().resolve():
        return config
    update: dict[str, Any] = {}
    for key, kind in ENTRY_LISTS:
        entries = getattr(config, key)
        if entries is None:
            continue
        update[key] = [_resolve_entry(registry, kind, entry, f"{key}.{i}", folder, config.command_line)
                       for i, entry in enumerate(entries)]
    return config.model_copy(update=update)  # keeps the file's folder and the --set keys


def _resolve_entry(registry: Registry, kind: str, entry: Any, where: str, folder: Path,
                   command_line: frozenset[str]) -> Any:
    if not isinstance(entry, dict) or "name" not in entry:
        return entry
    classes = registry.plugins.get(kind, {}).get(str(entry["name"]), {}).values()
    paths = {name for cls in classes for name, field in cls.Config.model_fields.items() if is_path_field(field)}
    return {k: _resolve(v, folder) if k in paths and not _given_on_command_line(f"{where}.{k}", command_line) else v
            for k, v in entry.items()}


def _given_on_command_line(key: str, command_line: frozenset[str]) -> bool:
    """Whether ``--set`` gave ``key`` (``datasets.0.root``) or a mapping or list holding it (``datasets.0``)."""
    return any(key == given or key.startswith(given + ".") for given in command_line)


def _resolve(value: Any, folder: Path) -> Any:
    """A relative path (or each of a sweep's) joined to ``folder``; absolute, ``~`` and empty ones as they are."""
    if isinstance(value, list):
        return [_resolve(v, folder) for v in value]
    if isinstance(value, str) and value and not value.startswith("~") and not os.path.isabs(value):
        return os.path.normpath(folder / value)
    return value
