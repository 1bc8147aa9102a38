"""``fingerprint`` hashes arrays' dtype, shape and bytes without copying them."""

from __future__ import annotations

import hashlib
import tracemalloc

import numpy as np

from vispriv.harness.hashing import fingerprint


def _by_copy(*arrays: np.ndarray) -> str:
    """The definition: sha256 of each array's dtype, shape and bytes (``tobytes``, a copy)."""
    h = hashlib.sha256()
    for arr in arrays:
        a = np.ascontiguousarray(arr)
        h.update(str(a.dtype).encode())
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def test_the_fingerprint_is_the_sha256_of_dtype_shape_and_bytes():
    rng = np.random.default_rng(0)
    cases = [
        (rng.random((4, 5, 3)).astype(np.float32),),
        (rng.random((6, 4))[:, ::2],),  # not contiguous
        (np.array(2.5), np.zeros((0, 3)), np.array([True, False])),  # 0-d, empty, bool
        (rng.integers(0, 255, (3, 2), dtype=np.uint8), rng.random(7)),
    ]
    for arrays in cases:
        assert fingerprint(*arrays) == _by_copy(*arrays)
    assert fingerprint(np.zeros(4, np.float32)) != fingerprint(np.zeros(4, np.float64))
    assert fingerprint(np.zeros((2, 2))) != fingerprint(np.zeros(4))


def test_a_contiguous_stack_is_hashed_without_a_copy():
    stack = np.ones((64, 256, 256), np.float32)  # 16 MiB
    tracemalloc.start()
    try:
        fingerprint(stack)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak  # the copy would be 16 MiB
