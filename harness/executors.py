"""Executors run cells and hand outcomes back to the driver, which alone talks to MLflow.

An executor takes ``(cell, artifact_dir)`` jobs and yields ``(cell, outcome)`` pairs as
they complete. ``local`` runs them one after another in this process; other executors
(``ray``) are looked up by name in :data:`EXECUTORS`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from vispriv.harness.errors import ConfigError
from vispriv.harness.execute import CellOutcome, run_cell
from vispriv.harness.matrix import Cell

Job = tuple[Cell, str]


class Executor(Protocol):
    def run(self, jobs: Iterable[Job], cache_dir: str | None, quiet: bool) -> Iterator[tuple[Cell, CellOutcome]]:
        """Run ``jobs`` (an iterable: the driver may claim each cell only when it is asked for)."""
        ...

    def close(self) -> None: ...


class LocalExecutor:
    """Runs cells sequentially in this process (stages shared between cells are memoised)."""

    def __init__(self, **_: object) -> None:
        pass

    def run(self, jobs: Iterable[Job], cache_dir: str | None, quiet: bool) -> Iterator[tuple[Cell, CellOutcome]]:
        for cell, artifact_dir in jobs:
            yield cell, run_cell(cell, cache_dir, artifact_dir, quiet=quiet)

    def close(self) -> None:
        pass


EXECUTORS: dict[str, Callable[..., Executor]] = {"local": LocalExecutor}


def make_executor(name: str, **options: object) -> Executor:
    if name == "ray" and "ray" not in EXECUTORS:
        try:
            from vispriv.harness import ray_executor  # noqa: F401 -- registers itself
        except ImportError as exc:
            raise ConfigError(f"--executor ray needs the 'ray' extra (pip install 'vispriv[ray]'): {exc}") from None
    if name not in EXECUTORS:
        raise ConfigError(f"unknown executor {name!r}; available: {', '.join(sorted(EXECUTORS))}, ray")
    return EXECUTORS[name](**options)


