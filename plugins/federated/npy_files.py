"""Reading a user's ``.npy`` and ``.npz`` files whole, or failing with one line that says what is wrong and what to do.

numpy's own errors mislead here: an empty or foreign ``.npy`` reports "pickled data" (it
falls back to unpickling what is not its format), an object array "Object arrays cannot be
loaded", and a truncated ``.npz`` raises ``zipfile.BadZipFile`` (not a ``ValueError``).
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

import numpy as np

from vispriv.harness.errors import InputError

#: How an ``.npy`` file starts (numpy's format: ``numpy.lib.format``).
NPY_MAGIC = b"\x93NUMPY"


def _rewrite(writer: str) -> str:
    """What to do about a file that is not whole."""
    return f"write it again with {writer} (or copy it again: an interrupted copy or a full disk truncates files)"


def read_npy(path: Path, what: str) -> np.ndarray:
    """The numeric array in ``path`` (an ``.npy``), else one-line :class:`InputError` naming ``what`` and the file."""
    with open(path, "rb") as fh:
        head = fh.read(len(NPY_MAGIC))
        if not head:
            raise InputError(f"{what} {path} is empty (0 bytes); {_rewrite('numpy.save')}")
        if head != NPY_MAGIC:
            raise InputError(f"{what} {path} is not an .npy file (it does not start with numpy's header); "
                             "save the array with numpy.save")
        fh.seek(0)
        try:
            version = np.lib.format.read_magic(fh)
            header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            _, _, dtype = header(fh)  # the header alone: nothing is unpickled
        except ValueError as exc:
            raise InputError(f"{what} {path}: its .npy header is damaged ({exc}); {_rewrite('numpy.save')}") from None
    if dtype.hasobject:
        raise InputError(f"{what} {path} holds Python objects (dtype object), not numbers; save a numeric array, "
                         "e.g. numpy.save(path, numpy.asarray(x, dtype=numpy.float32))")
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, EOFError, OSError) as exc:
        raise InputError(f"{what} {path} is truncated ({exc}); {_rewrite('numpy.save')}") from None


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` archive ``path``, read whole, else one-line :class:`InputError` naming the file."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (zipfile.BadZipFile, EOFError, zlib.error) as exc:
        raise InputError(f"{path}: not a complete .npz archive ({type(exc).__name__}: {exc}); {_rewrite('numpy.savez')}") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a readable .npz ({exc})") from None
