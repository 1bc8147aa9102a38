"""Descriptors on disk: (N, 128) float32 rows written once, read back a chunk at a time.

A dictionary is trained on millions of descriptors (the localisation room's K: 4.5M, 2.3 GB
as float32); holding them, and the images they came from, in lists costs several times that.
:func:`descriptor_store` writes each image's descriptors to one cache entry as they are
extracted (:meth:`~vispriv.harness.Cache.big_file`), and :class:`DescriptorStore` reads rows
back with ``os.preadv``: memory is the chunk read, not N.

The file is raw little-endian float32, 128 per row, no header: N is its size / 512 bytes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import IO, Any

import numpy as np

from vispriv.harness import Cache
from vispriv.plugins.descriptor_release.payloads import DESCRIPTOR_DIM

#: Version of the file layout, part of every store's cache key.
STORE_VERSION = "1.0"

#: Rows per chunk when streaming (32 MiB of float32); a multiple of faiss's 4096-query block.
CHUNK_ROWS = 65536

ROW_DTYPE = np.dtype("<f4")
ROW_BYTES = DESCRIPTOR_DIM * ROW_DTYPE.itemsize


class DescriptorStore:
    """(N, 128) float32 rows in an open binary file, read a chunk at a time."""

    def __init__(self, file: IO[bytes]) -> None:
        self.file = file
        size = os.fstat(file.fileno()).st_size
        if size % ROW_BYTES:
            raise ValueError(f"descriptor store of {size} bytes is not a whole number of {ROW_BYTES}-byte rows")
        self.n_rows = size // ROW_BYTES

    def __len__(self) -> int:
        return self.n_rows

    def __enter__(self) -> DescriptorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` as a new (stop - start, 128) float32 array."""
        return self.read_into(np.empty((stop - start, DESCRIPTOR_DIM), np.float32), start)

    def read_into(self, out: np.ndarray, start: int) -> np.ndarray:
        """Rows ``start:start + len(out)`` read into the C-contiguous (n, 128) float32 array ``out`` (returned)."""
        if out.dtype != ROW_DTYPE or out.ndim != 2 or out.shape[1] != DESCRIPTOR_DIM or not out.flags.c_contiguous:
            raise ValueError(f"cannot read float32 rows into {out.shape} {out.dtype}")
        if not 0 <= start <= start + len(out) <= self.n_rows:
            raise ValueError(f"rows {start}:{start + len(out)} are outside the store's {self.n_rows}")
        view, offset, done = memoryview(out).cast("B"), start * ROW_BYTES, 0
        while done < len(view):
            got = os.preadv(self.file.fileno(), [view[done:]], offset + done)
            if got <= 0:
                raise OSError(f"descriptor store ends at byte {offset + done}; expected {self.n_rows} rows")
            done += got
        return out

    def chunks(self, rows: int = CHUNK_ROWS) -> Iterator[tuple[int, np.ndarray]]:
        """``(start, rows start:start + len)`` over the whole store, in order (:func:`chunk_bounds`)."""
        for start, stop in chunk_bounds(self.n_rows, rows):
            yield start, self.read(start, stop)

    def close(self) -> None:
        self.file.close()


def chunk_bounds(n: int, rows: int = CHUNK_ROWS) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` covering ``range(n)`` in chunks of ``rows``; a shorter tail joins the chunk before it.

    Every chunk but a lone one therefore holds at least ``rows`` rows: with ``rows`` a multiple
    of 4096, faiss searches each chunk in the same 4096-query blocks, on the same (BLAS) path, as
    it searches the whole array at once (it takes another path below 1000 queries of 128-d).
    """
    if rows < 1:
        raise ValueError(f"chunk rows must be >= 1; got {rows}")
    starts = list(range(0, n, rows))
    if len(starts) > 1 and n - starts[-1] < rows:
        starts.pop()
    return [(s, starts[i + 1] if i + 1 < len(starts) else n) for i, s in enumerate(starts)]


def write_rows(fh: IO[bytes], blocks: Iterable[np.ndarray]) -> int:
    """Append each (n_i, 128) block to ``fh`` as float32 rows; returns the rows written."""
    total = 0
    for block in blocks:
        b = np.ascontiguousarray(block, dtype=ROW_DTYPE)
        if b.ndim != 2 or b.shape[1] != DESCRIPTOR_DIM:
            raise ValueError(f"descriptor blocks must be (n, {DESCRIPTOR_DIM}); got {b.shape}")
        fh.write(memoryview(b).cast("B"))
        total += len(b)
    return total


def descriptor_store(cache: Cache, namespace: str, parts: Any, blocks: Iterable[np.ndarray]) -> DescriptorStore:
    """The store of ``blocks`` (written on a miss, one block in memory at a time), from ``cache``'s big-file entry."""
    return DescriptorStore(cache.big_file(namespace, (STORE_VERSION, parts), ".f32", lambda fh: write_rows(fh, blocks)))
