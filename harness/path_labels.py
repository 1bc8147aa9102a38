"""Files and folders in labels: the shortest part of each path that tells it apart.

A dataset that reads files (``captured-update``'s ``model`` and ``update``, an
``image-folder``'s ``root``) would be labelled by absolute paths, hundreds of characters
for a matrix of a few of them. Labels name each path by the shortest trailing part that
distinguishes it from the other values the same setting takes in the matrix: the file's
stem (``astronaut`` for ``/data/astronaut.pt``), else its folder and stem
(``astronaut/update``), and so on. The full paths stay in the run's params.

:func:`shown_paths` decides, for the configured stages of one plugin, what each stage's
label shows of its path settings; :func:`shortest_parts` is the rule for one setting.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import PurePath
from typing import Any

from pydantic import BaseModel

from vispriv.harness.plugin import is_path_field


def shortest_parts(paths: Iterable[str]) -> dict[str, str]:
    """``{path: shortest distinguishing part}`` for the distinct non-empty ``paths``.

    One path is named by its stem. Several are named by the shortest trailing part that is
    distinct for every one of them, tried in this order for 1, 2, ... trailing components:
    ending in the stem (``update``, ``astronaut/update``), then in the full name
    (``update.pt``, ``astronaut/update.pt``). Paths that no trailing part tells apart keep
    their full text.
    """
    distinct = sorted({p for p in paths if p})
    parts = {p: PurePath(p).parts for p in distinct}
    depth = max((len(v) for v in parts.values()), default=0)
    for k in range(1, depth + 1):
        for keep_suffix in (False, True):
            named = {p: _tail(parts[p], k, keep_suffix) for p in distinct}
            if len(set(named.values())) == len(distinct):
                return named
    return {p: p for p in distinct}


def _tail(parts: tuple[str, ...], k: int, keep_suffix: bool) -> str:
    """The last ``k`` components of a path, the last one without its suffix unless ``keep_suffix``."""
    if not parts:
        return ""
    last = parts[-1] if keep_suffix else (PurePath(parts[-1]).stem or parts[-1])
    return "/".join([*parts[-k:-1], last]) if k > 1 else last


def path_fields(config: BaseModel) -> list[str]:
    """The settings of ``config`` that name a file or folder (:func:`~vispriv.harness.plugin.is_path_field`)."""
    return [k for k, f in type(config).model_fields.items() if is_path_field(f)]


def shown_paths(configs: Sequence[BaseModel]) -> list[dict[str, str | None]]:
    """For configs of one plugin, what each one's label shows of its path settings.

    Per config, ``{setting: shown text}``, where ``None`` leaves the setting out. A lone config
    (or one config listed under several scenarios) shows the stem of each path. Of several
    configs, a path they all share tells none apart and is left out; the paths that differ are
    shown by :func:`shortest_parts` of their values, only one of them when it alone tells the
    configs apart (a capture per folder: ``update=astronaut/update``, not the folder's every
    file), the one with the shortest parts. An empty value (not set) is left as the label
    would write it.
    """
    out: list[dict[str, str | None]] = [{} for _ in configs]
    keys = path_fields(configs[0]) if configs else []
    values = {k: [getattr(c, k) for c in configs] for k in keys}
    short = {k: shortest_parts(v for v in vs if isinstance(v, str)) for k, vs in values.items()}
    if len({c.model_dump_json() for c in configs}) > 1:
        short = _distinguishing(values, short)
    for key, parts in short.items():
        for shown, value in zip(out, values[key]):
            if isinstance(value, str) and value:
                shown[key] = parts.get(value)
    return out


def _distinguishing(values: dict[str, list[Any]], short: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """``short`` with the settings that tell no config apart emptied (their paths left out), and
    all but one of the differing settings when that one alone tells every path apart."""
    varying = [k for k, vs in values.items() if len(set(vs)) > 1]
    tuples = len(set(zip(*(values[k] for k in varying))))
    alone = [k for k in varying if len(set(values[k])) == tuples and all(isinstance(v, str) and v for v in values[k])]
    if alone:
        varying = [min(alone, key=lambda k: sum(len(t) for t in short[k].values()))]
    return {k: (parts if k in varying else {}) for k, parts in short.items()}
