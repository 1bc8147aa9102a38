"""Content-addressed cache of expensive stages.

Entries are keyed by a hash of (namespace, plugin name + version, config, seed, input
fingerprint) -- whatever the caller passes as ``parts``. Values are stored as ``.npz``
(loaded with ``allow_pickle=False``), ``.json``, or files the caller writes itself
(Lightning checkpoints, loaded with ``weights_only=True``). Every write goes to a
temporary file in the same directory and is renamed into place, so a crash never leaves
a half-written entry and concurrent writers of the same key are harmless. Nothing is
ever unpickled.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from vispriv.harness.errors import ConfigError
from vispriv.harness.hashing import stable_hash

DEFAULT_CACHE_DIR = ".vispriv-cache"


def check_writable(root: str | os.PathLike[str] | None) -> None:
    """Raise one-line :class:`ConfigError` unless ``root`` is (or can be made) a writable folder.

    Called before a matrix starts, so an unusable cache is one error instead of every
    cell failing. ``None`` (cache disabled) is always fine.
    """
    if root is None:
        return
    folder = Path(root)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError(
            f"cache dir {str(folder)!r} is not a writable folder ({exc.strerror or exc}); "
            "pass --cache-dir with a folder you can write to"
        ) from None


class Cache:
    """A directory of content-addressed entries; ``Cache(None)`` is disabled (always recomputes)."""

    def __init__(self, root: str | os.PathLike[str] | None = DEFAULT_CACHE_DIR) -> None:
        self.root = Path(root) if root is not None else None
        self.hits = 0
        self.misses = 0

    @property
    def enabled(self) -> bool:
        return self.root is not None

    def key(self, namespace: str, *parts: Any) -> str:
        """The entry key of ``parts`` within ``namespace``."""
        return stable_hash(namespace, *parts, length=24)

    def path(self, namespace: str, key: str, suffix: str) -> Path:
        """Where the entry ``key`` of ``namespace`` lives (the directory is created)."""
        if self.root is None:
            raise RuntimeError("cache is disabled")
        folder = self.root / namespace
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{key}{suffix}"

    @contextmanager
    def atomic_path(self, final: Path) -> Iterator[Path]:
        """Yield a temporary path beside ``final``; rename it into place on success."""
        final.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=".tmp-", suffix=final.suffix)
        os.close(fd)
        try:
            yield Path(tmp)
            os.replace(tmp, final)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def arrays(
        self,
        namespace: str,
        parts: Any,
        compute: Callable[[], dict[str, np.ndarray]],
    ) -> dict[str, np.ndarray]:
        """Get-or-compute a dict of arrays stored as ``.npz`` (no pickle on load)."""
        if self.root is None:
            return compute()
        final = self.path(namespace, self.key(namespace, parts), ".npz")
        if final.exists():
            try:
                with np.load(final, allow_pickle=False) as data:
                    self.hits += 1
                    return {k: data[k] for k in data.files}
            except (OSError, ValueError):
                final.unlink(missing_ok=True)
        self.misses += 1
        value = compute()
        objects = [k for k, v in value.items() if np.asarray(v).dtype.hasobject]
        if objects:
            raise ValueError(f"cache entries hold numeric arrays only; {objects[0]!r} has dtype object")
        with self.atomic_path(final) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, **{k: np.asarray(v) for k, v in value.items()})
        return value

    def json(self, namespace: str, parts: Any, compute: Callable[[], Any]) -> Any:
        """Get-or-compute a JSON-serialisable value."""
        if self.root is None:
            return compute()
        final = self.path(namespace, self.key(namespace, parts), ".json")
        if final.exists():
            try:
                value = json.loads(final.read_text())
                self.hits += 1
                return value
            except ValueError:
                final.unlink(missing_ok=True)
        self.misses += 1
        value = compute()
        with self.atomic_path(final) as tmp:
            tmp.write_text(json.dumps(value))
        return value
