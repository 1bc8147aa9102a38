"""Stable content hashes of configs and arrays (the basis of cell hashes and cache keys)."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import numpy as np


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace; pydantic models and arrays are expanded."""
    return json.dumps(_plain(obj), sort_keys=True, separators=(",", ":"))


def _plain(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):
        return _plain(obj.model_dump(mode="json"))
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return {"__array__": fingerprint(obj)}
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, float) and math.isnan(obj):
        return "nan"
    if isinstance(obj, float) and obj in (float("inf"), float("-inf")):
        return str(obj)
    return obj


def stable_hash(*parts: Any, length: int = 16) -> str:
    """Hex sha256 prefix of the canonical JSON of ``parts``."""
    return hashlib.sha256(canonical_json(list(parts)).encode()).hexdigest()[:length]


def fingerprint(*arrays: np.ndarray) -> str:
    """Hex sha256 prefix of arrays' dtype, shape and bytes (a training-data fingerprint).

    The bytes are hashed in place (a uint8 view of the C-contiguous array), not copied: the
    localisation room's photo stack is ~0.8 GB. A non-contiguous array is made contiguous first.
    """
    h = hashlib.sha256()
    for arr in arrays:
        a = np.ascontiguousarray(arr)
        h.update(str(a.dtype).encode())
        h.update(str(a.shape).encode())
        h.update(a.reshape(-1).view(np.uint8))
    return h.hexdigest()[:16]


def derive_seed(*parts: Any) -> int:
    """A 31-bit seed derived from ``parts`` (the matrix seed and a stage key)."""
    return int(stable_hash(*parts, length=8), 16) & 0x7FFFFFFF
