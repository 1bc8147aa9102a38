"""Arrays kept in a file and mapped into memory: written once, read in place, released when idle.

A plugin whose input is larger than it needs at one time (the localisation room's 840 lifting
photos, 0.75 GiB as float32, needed for SIFT and idle during the minutes of k-means after it)
writes it once as an ``.npy`` file (:func:`write_npy`, one item at a time) and maps it
read-only (:func:`map_npy`). The pages are the file's: :func:`release_pages` drops them from the
process (``madvise(MADV_DONTNEED)``), so they stop counting in its resident memory, and a later
read maps them back from the file (or the page cache) with the same bytes.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterable
from typing import IO

import numpy as np


def write_npy(fh: IO[bytes], shape: tuple[int, ...], dtype: np.dtype | type, items: Iterable[np.ndarray]) -> int:
    """Write an ``.npy`` file of ``shape`` from ``items`` (each ``shape[1:]``, in order) to ``fh``; returns the items written.

    Raises ValueError when an item has another shape or the count differs from ``shape[0]``
    (nothing is left half-valid: the caller's cache entry is discarded with the exception).
    """
    dtype = np.dtype(dtype)
    np.lib.format.write_array_header_2_0(fh, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
                                              "shape": tuple(shape)})
    count = 0
    for item in items:
        a = np.ascontiguousarray(item, dtype=dtype)
        if a.shape != tuple(shape[1:]):
            raise ValueError(f"item {count} has shape {a.shape}; expected {tuple(shape[1:])}")
        fh.write(a.data.cast("B"))
        count += 1
    if count != shape[0]:
        raise ValueError(f"{count} items written; the header says {shape[0]}")
    return count


def map_npy(fh: IO[bytes]) -> np.ndarray:
    """The ``.npy`` file open in ``fh`` (from its start), mapped read-only; ``fh`` may be closed after."""
    fh.seek(0)
    version = np.lib.format.read_magic(fh)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = read_header(fh)
    if fortran:
        raise ValueError("a Fortran-ordered .npy file cannot be mapped row by row")
    return np.memmap(fh, dtype=dtype, mode="r", shape=shape, offset=fh.tell())


def _mapping(array: np.ndarray) -> mmap.mmap | None:
    """The file mapping under ``array`` (through its views' bases), if any."""
    seen: object | None = array
    while seen is not None:
        mapped = getattr(seen, "_mmap", None)
        if isinstance(mapped, mmap.mmap):
            return mapped
        if isinstance(seen, mmap.mmap):
            return seen
        seen = getattr(seen, "base", None)
    return None


def release_pages(array: np.ndarray) -> bool:
    """Drop ``array``'s pages from this process's resident memory when it is a file mapping
    (:func:`map_npy`); the data stays readable. Returns whether anything was released (False
    for an array in ordinary memory, which is left as it is)."""
    mapping = _mapping(array)
    if mapping is None or not hasattr(mmap, "MADV_DONTNEED"):
        return False
    mapping.madvise(mmap.MADV_DONTNEED)
    return True
