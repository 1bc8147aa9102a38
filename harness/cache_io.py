"""Checked, atomic files of the cache: every entry has a checksum file beside it.

An entry is a payload file (``<key>.npz``, ``<key>.json``, ``<key>.ckpt``: a plain file
that numpy, json or torch open as usual) and its checksum file ``<payload>.sum``: one JSON
object with the namespace, the key, the payload's size and its sha256. A reader trusts a
payload only when the checksum file names the same namespace and key and the bytes hash
to the recorded sum; anything else -- no checksum file (an older vispriv, or a write cut
between the two renames), a truncated, zeroed or overwritten payload, the valid entry of
another key copied over it, a payload its loader cannot decode -- is a *damaged* entry:
one ``warning:`` line on stderr naming the file and why, the entry removed, and the
caller recomputes (a miss).

Writes go to temporary files in the entry's folder (``.tmp-*``) and are renamed into
place, payload first, checksum second, under an exclusive ``flock`` of the folder's
``.lock``; readers read both files under a shared lock, so a reader never pairs one
writer's payload with another's checksum. A process killed mid-write leaves at most a
``.tmp-*`` file (never read; removed by a later write to its folder once it is an hour
old) or a payload without its checksum (treated as damaged).

A cache that refuses a write (read-only folder, full disk, file-size limit) is not an
error: the value was computed and is returned; one ``warning:`` line per cache folder and
process says entries are no longer stored.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import io
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any, TypeVar

T = TypeVar("T")

#: Suffix of the checksum file beside each payload.
SUM_SUFFIX = ".sum"
#: Version of the checksum file's layout.
SUM_FORMAT = 1
_CHUNK = 1 << 20
#: Age (seconds) after which a ``.tmp-*`` file is a killed writer's leftover. A temporary file
#: lives while its payload is written (after the value was computed): seconds, not an hour.
STALE_TMP_S = 3600
#: Cache folders whose refused write was already reported by this process.
_refused: set[str] = set()
#: Cache folders already swept of stale temporary files by this process (once each: a folder
#: can hold thousands of entries, and a killed writer's leftovers come from an earlier process).
_swept: set[str] = set()


def warn(line: str) -> None:
    """Print ``warning: <line>`` on stderr, above any progress bar."""
    text = f"warning: {line}"
    try:
        from tqdm import tqdm

        tqdm.write(text, file=sys.stderr)
    except ImportError:  # pragma: no cover -- tqdm is a dependency
        print(text, file=sys.stderr, flush=True)


def sum_path(payload: Path) -> Path:
    """The checksum file of ``payload``."""
    return payload.with_name(payload.name + SUM_SUFFIX)


def _open_lock(path: Path) -> IO[bytes] | None:
    """``path`` opened for ``flock`` (created if possible, read-only in a read-only folder), else ``None``."""
    for mode in ("ab", "rb"):
        try:
            return open(path, mode)
        except OSError:
            continue
    return None


@contextmanager
def folder_lock(folder: Path, exclusive: bool) -> Iterator[None]:
    """``flock`` of ``folder/.lock`` (shared or exclusive); no lock where the file cannot be opened (read-only cache)."""
    fh = _open_lock(folder / ".lock")
    if fh is None:
        yield
        return
    with fh:
        with suppress(OSError):
            fcntl.flock(fh, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield


class Damaged(Exception):
    """An entry that exists but cannot be trusted; the message says why."""


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _absent(payload: Path, checksum: Path) -> bool:
    """True when neither the payload nor its checksum file exists (a miss); :class:`Damaged` when only the checksum does."""
    if payload.exists():
        return False
    if checksum.exists():
        raise Damaged(f"is missing but its checksum file {checksum.name} is there")
    return True


def _read_checksum(checksum: Path) -> str:
    """The checksum file's text; :class:`Damaged` when it is missing or unreadable."""
    try:
        return checksum.read_text()
    except FileNotFoundError:
        raise Damaged(f"has no checksum file {checksum.name} (written by an older vispriv, or its write was cut)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise Damaged(f"has an unreadable checksum file ({_describe(exc)})") from None


def _read_verified(payload: Path, namespace: str, key: str) -> bytes | None:
    """The payload's bytes if its checksum file vouches for them; ``None`` if absent; :class:`Damaged` otherwise."""
    checksum = sum_path(payload)
    with folder_lock(payload.parent, exclusive=False):
        if _absent(payload, checksum):
            return None
        try:
            data = payload.read_bytes()
        except OSError as exc:
            raise Damaged(f"cannot be read ({_describe(exc)})") from None
        meta_text = _read_checksum(checksum)
    _check(meta_text, checksum.name, namespace, key, len(data), lambda: hashlib.sha256(data).hexdigest())
    return data


def _check(meta_text: str, checksum_name: str, namespace: str, key: str, size: int, sha256: Callable[[], str]) -> None:
    """Raise :class:`Damaged` unless the checksum file's text vouches for a payload of ``size`` bytes hashing to ``sha256()``."""
    try:
        meta = json.loads(meta_text)
        want = (meta["format"], meta["namespace"], meta["key"], int(meta["size"]), str(meta["sha256"]))
    except (ValueError, KeyError, TypeError):
        raise Damaged(f"has an invalid checksum file {checksum_name}") from None
    if want[0] != SUM_FORMAT:
        raise Damaged(f"has a checksum file of format {want[0]!r}; this vispriv reads {SUM_FORMAT}")
    if (want[1], want[2]) != (namespace, key):
        raise Damaged(f"holds the entry of another key ({want[1]}/{want[2]})")
    if size != want[3]:
        raise Damaged(f"is truncated or overwritten ({size} bytes, {want[3]} were stored)")
    if sha256() != want[4]:
        raise Damaged("does not match its stored sha256 (corrupted or overwritten)")


def open_verified(payload: Path, namespace: str, key: str) -> IO[bytes] | None:
    """The payload opened read-only if its checksum file vouches for it, else ``None`` (a miss).

    For entries too large to read into memory (:meth:`~vispriv.harness.cache.Cache.big_file`):
    the payload is opened and its checksum file read under the shared lock (so they pair),
    then hashed in 1 MiB chunks through that open file, which keeps the verified bytes
    even if a writer later replaces the entry. A damaged entry is warned about and removed,
    as in :func:`load`.
    """
    checksum = sum_path(payload)
    fh: IO[bytes] | None = None
    try:
        with folder_lock(payload.parent, exclusive=False):
            if _absent(payload, checksum):
                return None
            try:
                fh = open(payload, "rb")  # noqa: SIM115 -- handed to the caller, who closes it
            except OSError as exc:
                raise Damaged(f"cannot be read ({_describe(exc)})") from None
            meta_text = _read_checksum(checksum)
        opened = fh
        try:
            size = os.fstat(opened.fileno()).st_size
        except OSError as exc:
            raise Damaged(f"cannot be read ({_describe(exc)})") from None

        def digest() -> str:
            try:
                return _sha256_of_open(opened)
            except OSError as exc:
                raise Damaged(f"cannot be read ({_describe(exc)})") from None

        _check(meta_text, checksum.name, namespace, key, size, digest)
        opened.seek(0)
        fh = None  # handed to the caller
        return opened
    except Damaged as exc:
        discard(payload, str(exc))
        return None
    finally:
        if fh is not None:
            fh.close()


def discard(payload: Path, why: str) -> None:
    """Warn that ``payload`` is damaged (``why``) and remove it and its checksum file."""
    note = ""
    with folder_lock(payload.parent, exclusive=True):
        for path in (payload, sum_path(payload)):
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                note = f" (not removed: {_describe(exc)})"
    warn(f"cache entry {payload} {why}; {'recomputing' + note if note else 'removed, recomputing'}")


def load(payload: Path, namespace: str, key: str, decode: Callable[[IO[bytes]], T]) -> T | None:
    """The decoded entry, or ``None`` on a miss (absent, or damaged: warned and removed)."""
    try:
        data = _read_verified(payload, namespace, key)
        if data is None:
            return None
        try:
            return decode(io.BytesIO(data))
        except Exception as exc:  # noqa: BLE001 -- whatever the loader raises, the entry is unusable
            raise Damaged(f"cannot be decoded ({_describe(exc)})") from None
    except Damaged as exc:
        discard(payload, str(exc))
        return None


def _sha256_of(path: Path) -> tuple[int, str]:
    with open(path, "rb") as fh:
        return os.fstat(fh.fileno()).st_size, _sha256_of_open(fh)


def _sha256_of_open(fh: IO[bytes]) -> str:
    """sha256 of an open file from its start, read in :data:`_CHUNK` pieces (memory O(chunk))."""
    digest = hashlib.sha256()
    fh.seek(0)
    while chunk := fh.read(_CHUNK):
        digest.update(chunk)
    return digest.hexdigest()


def _write_fsynced(path: Path, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def store(payload: Path, namespace: str, key: str, write: Callable[[Path], Any]) -> bool:
    """Write an entry: ``write(tmp)`` fills a temporary file, then payload and checksum are renamed into place.

    Returns ``False`` (after one warning per cache folder and process) when the cache
    refuses the write; exceptions of ``write`` other than ``OSError`` propagate.
    """
    tmps: list[str] = []
    try:
        payload.parent.mkdir(parents=True, exist_ok=True)
        data_tmp = _temporary(payload.parent, payload.suffix, tmps)
        write(data_tmp)
        with open(data_tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        size, digest = _sha256_of(data_tmp)
        meta = {"format": SUM_FORMAT, "namespace": namespace, "key": key, "size": size, "sha256": digest}
        sum_tmp = _temporary(payload.parent, SUM_SUFFIX, tmps)
        _write_fsynced(sum_tmp, json.dumps(meta))
        with folder_lock(payload.parent, exclusive=True):
            os.replace(data_tmp, payload)
            os.replace(sum_tmp, sum_path(payload))
        _sweep(payload.parent)
        return True
    except OSError as exc:
        _refused_write(payload, exc)
        return False
    finally:
        for tmp in tmps:
            with suppress(OSError):
                os.unlink(tmp)


def _sweep(folder: Path) -> None:
    """Remove ``.tmp-*`` files older than :data:`STALE_TMP_S`: left by killed writers (a write lasts seconds).

    Once per folder and process, on its first write, so a folder of n entries is listed once, not n times.
    """
    if str(folder) in _swept:
        return
    _swept.add(str(folder))
    cutoff = time.time() - STALE_TMP_S
    for tmp in folder.glob(".tmp-*"):
        with suppress(OSError):
            if tmp.stat().st_mtime < cutoff:
                tmp.unlink()


def _temporary(folder: Path, suffix: str, made: list[str]) -> Path:
    """A new empty ``.tmp-*`` file in ``folder``, recorded in ``made`` for clean-up."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=suffix)
    os.close(fd)
    made.append(tmp)
    return Path(tmp)


def _refused_write(payload: Path, exc: OSError) -> None:
    root = str(payload.parent.parent)
    if root in _refused:
        return
    _refused.add(root)
    hint = {errno.ENOSPC: "the disk is full", errno.EFBIG: "a file-size limit", errno.EROFS: "a read-only file system"}
    why = _describe(exc) + (f", {hint[exc.errno]}" if exc.errno in hint else "")
    warn(f"cache dir {root} refused a write ({why}): {payload.parent.name}/{payload.name} and later entries "
         "are computed but not stored")
