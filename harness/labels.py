"""The one label of a configured plugin: ``name`` or ``name(k=v,...)``.

Every place that names a configured plugin -- progress lines, ``--dry-run``, MLflow run
names and tags, report tables, heatmaps, frontiers -- uses :func:`config_label`:

* only the settings whose value differs from the plugin's default;
* a nested config's settings as dotted keys (``network.steps=300``), never a Python dict;
* settings the plugin ignores for its other values left out
  (:meth:`~vispriv.harness.plugin.PluginConfig.ignored_fields`: album-pruning's
  ``time_limit`` when ``mode=greedy``);
* numbers as written (``sigma=1``, not ``sigma=1.0``), lists as ``[2/4]``;
* a dataset's files and folders by the shortest part that tells them apart
  (:mod:`vispriv.harness.path_labels`): ``captured-update(update=astronaut)``.

:func:`relabel` turns a label written by an older version of the harness (Python dicts in
it) into this form, so a report over older runs names configs the same way.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python


def config_label(name: str, config: BaseModel, keep: frozenset[str] = frozenset(),
                 shown: Mapping[str, str | None] | None = None) -> str:
    """``name`` or ``name(k=v,...)`` with the settings of ``config`` that differ from its defaults,
    and the dotted settings in ``keep`` whatever their value (a sweep's axes: in
    ``noise_multiplier: [0.1, 1.0]`` the default 1.0 is named too, so the sweep's cells read apart).
    ``shown`` rewrites the named settings' values (a path as its shortest distinguishing part,
    :mod:`vispriv.harness.path_labels`); ``None`` leaves the setting out."""
    values = settings(config)
    if keep:
        ignored, every = ignored_fields(config), all_settings(config)
        values |= {k: every[k] for k in keep if k in every and k.split(".")[0] not in ignored}
    for key, text in (shown or {}).items():
        if key in values:
            if text is None:
                del values[key]
            else:
                values[key] = text
    return join_label(name, values)


def all_settings(config: BaseModel, prefix: str = "") -> dict[str, Any]:
    """Every setting of ``config``, default or not, as ``{dotted key: JSON-like value}``."""
    out: dict[str, Any] = {}
    for key in type(config).model_fields:
        value = getattr(config, key)
        if isinstance(value, BaseModel):
            out.update(all_settings(value, f"{prefix}{key}."))
            continue
        plain = to_jsonable_python(value)
        out.update(_flatten(prefix + key, plain, {}, True) if isinstance(plain, dict) else {prefix + key: plain})
    return out


def varying_keys(configs: list[BaseModel]) -> frozenset[str]:
    """The dotted settings whose value differs between ``configs`` (the axes of one entry's sweep)."""
    flat = [all_settings(c) for c in configs]
    keys = set().union(*flat) if flat else set()
    return frozenset(k for k in keys if len({json.dumps(f.get(k), sort_keys=True, default=str) for f in flat}) > 1)


def join_label(name: str, values: dict[str, Any]) -> str:
    """``name(k=v,...)`` from dotted settings, sorted by key; ``name`` when there is none."""
    params = ",".join(f"{k}={short_value(v)}" for k, v in sorted(values.items()))
    return f"{name}({params})" if params else name


def settings(config: BaseModel, prefix: str = "") -> dict[str, Any]:
    """The non-default, applicable settings of ``config`` as ``{dotted key: value}``."""
    ignored = ignored_fields(config)
    out: dict[str, Any] = {}
    for key, field in type(config).model_fields.items():
        if key in ignored:
            continue
        value = getattr(config, key)
        default = None if field.is_required() else field.get_default(call_default_factory=True)
        out.update(_field_settings(prefix + key, value, default, field.is_required()))
    return out


def ignored_fields(config: BaseModel) -> frozenset[str]:
    """The fields ``config`` declares it ignores for its current values (none for a plain model)."""
    declare = getattr(config, "ignored_fields", None)
    return frozenset(declare()) if callable(declare) else frozenset()


def _field_settings(key: str, value: Any, default: Any, required: bool) -> dict[str, Any]:
    """One field's part of :func:`settings`: itself, its nested settings, or nothing when at its default."""
    if isinstance(value, BaseModel):
        if isinstance(default, BaseModel) and type(default) is type(value):
            return _nested_differences(key, value, default)
        nested = settings(value, key + ".")
        return nested or {key: "default"}
    plain, base = to_jsonable_python(value), to_jsonable_python(default)
    if isinstance(plain, dict):
        return _flatten(key, plain, base if isinstance(base, dict) else {}, required)
    return {key: plain} if required or plain != base else {}


def _nested_differences(key: str, value: BaseModel, default: BaseModel) -> dict[str, Any]:
    """Settings of a nested config that differ from the field's default config."""
    mine, base = settings(value, key + "."), settings(default, key + ".")
    reset = {k: _dotted(value, k.removeprefix(key + ".")) for k in base if k not in mine}
    return {k: v for k, v in mine.items() if base.get(k) != v} | reset


def _dotted(config: BaseModel, key: str) -> Any:
    """The value at a dotted ``key`` of ``config`` (JSON-like)."""
    value: Any = config
    for part in key.split("."):
        value = getattr(value, part) if isinstance(value, BaseModel) else value[part]
    return to_jsonable_python(value)


def _flatten(key: str, value: dict[str, Any], default: dict[str, Any], required: bool) -> dict[str, Any]:
    """A mapping value as dotted keys, only the entries that differ from ``default``."""
    out: dict[str, Any] = {}
    for k, v in value.items():
        if isinstance(v, dict):
            base = default.get(k)
            out.update(_flatten(f"{key}.{k}", v, base if isinstance(base, dict) else {}, required))
        elif required or default.get(k) != v:
            out[f"{key}.{k}"] = v
    return out


def short_value(value: Any) -> str:
    """A value as labels write it: ``1`` for ``1.0``, ``[2/4]`` for a list."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, tuple)):
        return "[" + "/".join(short_value(v) for v in value) + "]"
    return str(value)


_OLD_LABEL = re.compile(r"^(?P<name>[^()]+)\((?P<params>.*)\)$", re.S)


def relabel(label: str) -> str:
    """A label in this module's form; an older label with Python dicts (``network={'steps': 300}``)
    has them written as dotted keys. Chains (``a > b``) are relabelled stage by stage."""
    if " > " in label:
        return " > ".join(relabel(part) for part in label.split(" > "))
    match = _OLD_LABEL.match(label.strip())
    if match is None or "{" not in label:
        return label
    values: dict[str, Any] = {}
    for part in _split_top_level(match["params"]):
        key, sep, text = part.partition("=")
        if not sep:
            return label
        values.update(_old_value(key.strip(), text.strip()))
    return join_label(match["name"], values)


def _old_value(key: str, text: str) -> dict[str, Any]:
    """One ``key=value`` of an older label; a dict value becomes dotted keys."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return {key: text}
    return _flatten(key, value, {}, True) if isinstance(value, dict) else {key: text}


def _split_top_level(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]
