"""Files the CLI writes: whole or not at all, and an OS refusal as one ``cannot write PATH: reason`` line.

Every file is written to a temporary file in its own folder and renamed into place
(:func:`os.replace`), so a full disk, a quota, a read-only mount or a kernel that refuses
root (``/proc``, ``/sys``) leaves the file that was there before, or none, never half of one.
An :class:`OSError` on the way becomes :class:`~vispriv.harness.errors.WriteError`, which the
CLI prints as one ``error:`` line with exit status 2.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from vispriv.harness.errors import WriteError

__all__ = ["make_folder", "refused", "write_file", "write_text"]


@contextmanager
def refused(path: str | os.PathLike[str]) -> Iterator[None]:
    """Turn an :class:`OSError` raised inside the block into :class:`WriteError` naming ``path``."""
    try:
        yield
    except WriteError:
        raise
    except OSError as exc:
        raise WriteError(path, exc) from None


def make_folder(path: str | os.PathLike[str]) -> Path:
    """Create folder ``path`` and its parents (it may exist), or raise :class:`WriteError` naming it."""
    folder = Path(path)
    with refused(folder):
        folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_file(path: str | os.PathLike[str], write: Callable[[Path], Any]) -> Path:
    """Write ``path`` whole: ``write(tmp)`` fills a temporary file beside it, which then replaces ``path``.

    The temporary file keeps ``path``'s suffix (matplotlib picks the format from it). On any
    failure it is removed and ``path`` is left as it was; an :class:`OSError` becomes
    :class:`WriteError` naming ``path``.
    """
    target = Path(path)
    with refused(target):
        tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}{target.suffix}")
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))  # the umask's mode, as open() gives
        try:
            write(tmp)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    return target


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` whole (:func:`write_file`), UTF-8."""
    return write_file(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
