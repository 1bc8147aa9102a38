"""User-facing errors: each carries one line that names the problem and what is allowed."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class VisprivError(Exception):
    """Base class of errors the CLI reports as one line (exit status 2)."""


class ConfigError(VisprivError):
    """A matrix config or a plugin config is invalid."""


class PluginError(VisprivError):
    """A plugin could not be imported, registered or found."""


class TrackingError(VisprivError):
    """The MLflow tracking store cannot be opened or written."""


class InputError(VisprivError):
    """Data handed to a plugin is malformed (wrong shape, NaN, too small, ...)."""


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'a', 'b' or 'c'?)``: up to three choices closest to a mistyped ``name``, closest first; ``""`` when none is close."""
    close = [repr(c) for c in difflib.get_close_matches(name, sorted(set(choices)), n=3)]
    if not close:
        return ""
    listed = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
    return f" (did you mean {listed}?)"
