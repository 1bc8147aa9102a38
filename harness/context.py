"""The context handed to every plugin call of one matrix cell."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from vispriv.harness.cache import Cache
from vispriv.harness.hashing import derive_seed
from vispriv.harness.heartbeat import Heartbeat

T = TypeVar("T")


class Progress(Protocol):
    """What a long loop of a plugin is wrapped in: :meth:`CellContext.progress` or :func:`no_progress`."""

    def __call__(self, iterable: Iterable[T], desc: str = "", total: int | None = None, unit: str = "step") -> Iterable[T]: ...


def no_progress(iterable: Iterable[T], desc: str = "", total: int | None = None, unit: str = "step") -> Iterable[T]:
    """The :class:`Progress` that shows nothing (a library call outside a matrix cell)."""
    return iterable


@dataclass
class CellContext:
    """Seeds, cache, progress bars and the artifact folder of one cell (or one stage).

    ``seed`` is derived from the matrix seed and the stage's key, so every stage that
    shares a key (the same dataset and defense config, say) sees the same randomness and
    its output can be shared between cells. ``artifact_dir`` is where a plugin writes
    files (PNG grids, CSVs) that the driver logs to MLflow; only non-secret files belong
    there. ``device`` is ``"cpu"`` unless the config asks for an accelerator.
    """

    seed: int = 0
    cache: Cache = field(default_factory=lambda: Cache(None))
    artifact_dir: Path | None = None
    quiet: bool = False
    device: str = "cpu"
    options: dict[str, Any] = field(default_factory=dict)
    #: Print a :class:`~vispriv.harness.heartbeat.Heartbeat` line every 30 s of a long stage
    #: (set where bars are off only because stderr is no terminal, not by ``--quiet``).
    heartbeat: bool = False

    def rng(self, *purpose: Any) -> np.random.Generator:
        """A numpy generator seeded by this context's seed and a purpose label."""
        return np.random.default_rng(derive_seed(self.seed, *purpose))

    def child_seed(self, *purpose: Any) -> int:
        """An integer seed for libraries that take one (torch, faiss)."""
        return derive_seed(self.seed, *purpose)

    def with_seed(self, seed: int) -> CellContext:
        """The same context with another seed (the runner gives each stage its own)."""
        return CellContext(
            seed=seed,
            cache=self.cache,
            artifact_dir=self.artifact_dir,
            quiet=self.quiet,
            device=self.device,
            options=self.options,
            heartbeat=self.heartbeat,
        )

    def artifact(self, name: str) -> Path:
        """A path inside the artifact folder for a file named ``name`` (folder created)."""
        if self.artifact_dir is None:
            raise RuntimeError("this context has no artifact folder")
        self.artifact_dir.mkdir(parents=True, exist_ok=True)
        return self.artifact_dir / name

    def progress(self, iterable: Iterable[T], desc: str = "", total: int | None = None, unit: str = "step") -> Iterator[T]:
        """Wrap ``iterable`` in a progress bar unless the matrix runs ``--quiet``.

        Off a terminal (no bar) with :attr:`heartbeat` set, a line every 30 s instead.
        ``unit`` names what one item is (``inversion``, ``round``), in the bar and the line.
        """
        if self.quiet:
            beat = self.heartbeat_for(desc, total, unit)
            for step, item in enumerate(iterable):
                yield item
                if beat is not None:
                    beat.tick(step + 1)
            return
        from tqdm.auto import tqdm

        yield from tqdm(iterable, desc=desc, total=total, leave=False, dynamic_ncols=True, unit=unit)

    def heartbeat_for(self, stage: str, total: int | None = None, unit: str = "step") -> Heartbeat | None:
        """A heartbeat for a long stage of this cell, or None where bars or ``--quiet`` rule."""
        return Heartbeat(stage, total, unit=unit) if self.heartbeat and self.quiet else None
