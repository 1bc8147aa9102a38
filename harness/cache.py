"""Content-addressed cache of expensive stages.

Entries are keyed by a hash of (namespace, plugin name + version, config, seed, input
fingerprint) -- whatever the caller passes as ``parts``. Values are stored as ``.npz``
(loaded with ``allow_pickle=False``), ``.json``, or files the caller writes itself
(:meth:`Cache.load` / :meth:`Cache.store`: Lightning checkpoints, loaded with
``weights_only=True``), or files too large for memory that the caller memory-maps or reads
in pieces (:meth:`Cache.big_file`: verified by a chunked hash). Nothing is ever unpickled.

Every entry carries a checksum file (:mod:`vispriv.harness.cache_io`): an entry that
cannot be read or does not match what was stored -- truncated, zeroed, overwritten, the
entry of another key -- is a miss: one ``warning:`` line names the file and why, the
entry is removed and the value recomputed. Writes go to a temporary file and are renamed
into place, so a crash never leaves a half-written entry that is later used; a cache
folder that refuses writes mid-run costs the reuse, not the cell.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

import numpy as np

from vispriv.harness import cache_io
from vispriv.harness.errors import ConfigError
from vispriv.harness.hashing import stable_hash

DEFAULT_CACHE_DIR = ".vispriv-cache"
T = TypeVar("T")


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
        """Where the entry ``key`` of ``namespace`` lives (the directory is created).

        This is the raw, unchecked layer (no checksum file): prefer
        :meth:`load` and :meth:`store`, which detect and replace damaged entries.
        """
        if self.root is None:
            raise RuntimeError("cache is disabled")
        folder = self.root / namespace
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{key}{suffix}"

    def load(self, namespace: str, key: str, suffix: str, decode: Callable[[IO[bytes]], T]) -> tuple[T | None, Path | None]:
        """``(decode(verified bytes), path)`` of entry ``key``, or ``(None, path)`` on a miss (``(None, None)`` when disabled).

        A damaged entry is reported, removed and counted as a miss; ``decode`` raising
        anything counts as damage too.
        """
        if self.root is None:
            return None, None
        final = self.root / namespace / f"{key}{suffix}"
        value = cache_io.load(final, namespace, key, decode)
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value, final

    def store(self, namespace: str, key: str, suffix: str, write: Callable[[Path], Any]) -> Path | None:
        """Store entry ``key``: ``write(tmp)`` writes the payload; returns its path, ``None`` if disabled or refused."""
        if self.root is None:
            return None
        final = self.root / namespace / f"{key}{suffix}"
        return final if cache_io.store(final, namespace, key, write) else None

    def arrays(
        self,
        namespace: str,
        parts: Any,
        compute: Callable[[], dict[str, np.ndarray]],
        check: Callable[[dict[str, np.ndarray]], Any] | None = None,
    ) -> dict[str, np.ndarray]:
        """Get-or-compute a dict of arrays stored as ``.npz`` (no pickle on load).

        ``check(arrays)``, when given, runs on a loaded entry before it is returned; if it
        raises, the entry counts as damaged (e.g. a serialised index its library cannot load).
        """
        if self.root is None:
            return compute()
        key = self.key(namespace, parts)

        def decode(fh: IO[bytes]) -> dict[str, np.ndarray]:
            arrays = _read_npz(fh)
            if check is not None:
                check(arrays)
            return arrays

        cached, _ = self.load(namespace, key, ".npz", decode)
        if cached is not None:
            return cached
        value = compute()
        objects = [k for k, v in value.items() if np.asarray(v).dtype.hasobject]
        if objects:
            raise ValueError(f"cache entries hold numeric arrays only; {objects[0]!r} has dtype object")

        def write(tmp: Path) -> None:
            with open(tmp, "wb") as fh:
                np.savez(fh, **{k: np.asarray(v) for k, v in value.items()})

        self.store(namespace, key, ".npz", write)
        return value

    def big_file(self, namespace: str, parts: Any, suffix: str, write: Callable[[IO[bytes]], Any]) -> IO[bytes]:
        """Get-or-compute an entry too large to hold in memory, as an open read-only binary file.

        ``write(fh)`` writes the payload sequentially into an open file (a temporary file of
        the entry's folder, renamed into place with its checksum file like every entry). A hit
        is verified by hashing the file in chunks (:func:`~vispriv.harness.cache_io.open_verified`),
        never by reading it whole; a damaged one is reported, removed and rewritten. The caller
        reads (``os.pread``) or memory-maps the returned file and closes it. With the cache
        disabled, or when the cache refuses the write, the payload is written to an anonymous
        temporary file (``tempfile.TemporaryFile``: the system temp folder, deleted when closed);
        a refused write costs computing it twice.
        """
        if self.root is not None:
            key = self.key(namespace, parts)
            final = self.root / namespace / f"{key}{suffix}"
            cached = cache_io.open_verified(final, namespace, key)
            if cached is not None:
                self.hits += 1
                return cached
            self.misses += 1

            def write_path(tmp: Path) -> None:
                with open(tmp, "wb") as fh:
                    write(fh)

            if self.store(namespace, key, suffix, write_path) is not None:
                try:
                    return open(final, "rb")
                except OSError:  # removed under us: fall back to a temporary file
                    pass
        fh = tempfile.TemporaryFile()  # noqa: SIM115 -- handed to the caller, who closes it
        try:
            write(fh)
            fh.flush()
            fh.seek(0)
        except BaseException:
            fh.close()
            raise
        return fh

    def json(self, namespace: str, parts: Any, compute: Callable[[], Any]) -> Any:
        """Get-or-compute a JSON-serialisable value (a stored ``null`` is a value, not a miss)."""
        if self.root is None:
            return compute()
        key = self.key(namespace, parts)
        cached, _ = self.load(namespace, key, ".json", lambda fh: [json.loads(fh.read().decode())])
        if cached is not None:
            return cached[0]
        value = compute()
        text = json.dumps(value)
        self.store(namespace, key, ".json", lambda tmp: tmp.write_text(text))
        return value


def _read_npz(fh: IO[bytes]) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` (read fully, so a damaged member fails here, not later)."""
    with np.load(fh, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}
