"""User-facing errors: each carries one line that names the problem and what is allowed."""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from pathlib import Path


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


class WriteError(VisprivError):
    """The operating system refused a write: ``cannot write PATH: reason`` (disk full, read-only, ...)."""

    def __init__(self, path: str | os.PathLike[str], exc: OSError) -> None:
        self.path = Path(path).absolute()
        self.reason = os_reason(exc)
        super().__init__(f"cannot write {self.path}: {self.reason}")


def os_refusal(exc: OSError) -> str:
    """The one line of an :class:`OSError` that no writer turned into :class:`WriteError`: the file (when known) and why."""
    where = f" {Path(os.fsdecode(exc.filename)).absolute()}" if exc.filename else ""
    return f"the operating system refused{where}: {os_reason(exc)}"


def os_reason(exc: OSError) -> str:
    """Why the operating system refused: its message (``No space left on device``), else the exception's text."""
    return exc.strerror or str(exc) or type(exc).__name__


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'a', 'b' or 'c'?)``: up to three choices closest to a mistyped ``name``, closest first; ``""`` when none is close."""
    close = [repr(c) for c in difflib.get_close_matches(name, sorted(set(choices)), n=3)]
    if not close:
        return ""
    listed = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
    return f" (did you mean {listed}?)"
