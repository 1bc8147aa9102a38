"""A plugin's configuration schema, read off its pydantic ``Config`` (``vispriv plugins NAME``).

Each field becomes one JSON-friendly row: name, type, default (or ``required``), bounds,
allowed values, description, and whether it is utility-only (marked
:data:`~vispriv.harness.plugin.UtilityOnly`, or inside such a nested config: read only by the
utility evaluation or the report, so it never enters a seed). Bounds come from the field's ``annotated_types``
constraints (``Field(ge=..., lt=...)``); allowed values from ``Literal`` annotations;
descriptions from ``Field(description=...)``. A nested config model (e.g. a defense's
``matching``) lists its own fields under ``fields``.
"""

from __future__ import annotations

import math
import re
import types
import typing
from typing import Any, Literal, Union

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from vispriv.harness.plugin import is_utility_only

_BOUNDS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<", "multiple_of": "multiple of", "min_length": "min length",
           "max_length": "max length"}


def config_schema(model: type[BaseModel], utility_only: bool = False) -> list[dict[str, Any]]:
    """One row per field of ``model`` (see the module docstring); ``utility_only``: the model is such a setting."""
    return [_field_row(name, info, utility_only) for name, info in model.model_fields.items()]


def _field_row(name: str, info: FieldInfo, inherited: bool) -> dict[str, Any]:
    utility_only = inherited or is_utility_only(info)
    row: dict[str, Any] = {
        "name": name,
        "type": type_label(info.annotation),
        "default": None if info.is_required() else _jsonable(info.get_default(call_default_factory=True)),
        "required": info.is_required(),
        "bounds": _bounds(info),
        "choices": _choices(info.annotation),
        "description": info.description or "",
        "utility_only": utility_only,
    }
    nested = _nested_model(info.annotation)
    if nested is not None:
        row["fields"] = config_schema(nested, utility_only)
    return row


def type_label(annotation: Any) -> str:
    """A short, readable name of a type annotation (``int | None``, ``Literal['a', 'b']``)."""
    if annotation is None or annotation is type(None):
        return "None"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(type_label(a) for a in args)
    if origin is typing.Annotated:
        return type_label(args[0])
    if annotation is Ellipsis:
        return "..."
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(type_label(a) for a in args)}]" if args else name
    return getattr(annotation, "__name__", str(annotation))


#: A reST role (``:func:`~a.b.c` ``, ``:class:`Name` ``), its target in group "target".
_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`(?P<target>[^`]+)`")
#: Inline literals and interpreted text: ````x```` and ```x```.
_LITERAL = re.compile(r"``(?P<a>[^`]+)``|`(?P<b>[^`]+)`")


def plain_text(text: str) -> str:
    """``text`` without reST markup, as a terminal shows it: ``:func:`~a.b.c` `` is ``c``,
    ``:class:`a.B` `` is ``a.B``, a double-backquoted literal is its text."""
    text = _ROLE.sub(lambda m: _role_target(m["target"]), text)
    return _LITERAL.sub(lambda m: m["a"] or m["b"], text)


def _role_target(target: str) -> str:
    """What a role shows: ``Title <target>`` its title, ``~a.b.c`` its last part, else the target."""
    if target.endswith(">") and " <" in target:
        return target[: target.rindex(" <")]
    return target[1:].rsplit(".", 1)[-1] if target.startswith("~") else target


def _bounds(info: FieldInfo) -> str:
    parts = []
    for meta in info.metadata:
        for attr, sign in _BOUNDS.items():
            value = getattr(meta, attr, None)
            if value is not None and isinstance(meta, annotated_types.BaseMetadata):
                parts.append(f"{sign} {value}")
    return ", ".join(parts)


def _choices(annotation: Any) -> list[Any]:
    if typing.get_origin(annotation) is Literal:
        return list(typing.get_args(annotation))
    out: list[Any] = []
    for arg in typing.get_args(annotation):
        if typing.get_origin(arg) is Literal:
            out.extend(typing.get_args(arg))
    return out


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    candidates = [annotation, *typing.get_args(annotation)]
    for c in candidates:
        if isinstance(c, type) and issubclass(c, BaseModel):
            return c
    return None


def _jsonable(value: Any) -> Any:
    """``value`` as JSON can carry it: models as dicts, tuples as lists, inf/nan as strings."""
    if isinstance(value, BaseModel):
        return _jsonable(value.model_dump())
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)
