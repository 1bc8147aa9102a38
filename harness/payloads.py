"""Typed payloads that flow between plugins.

A *payload* is what one party hands to another. The matrix pairs plugins by payload
type: an attack runs against a defense when the defense's ``produces`` type is a
subclass of one of the attack's ``consumes`` types. Scenario plugins define their own
payload subclasses (raw features, lifted subspaces, ciphertexts, pruned albums); the core
defines only the generic ones that metrics score:

* :class:`Images` -- a stack of images in [0, 1], shape (N, H, W, C).
* :class:`Labels` -- integer class labels, shape (N,).
* :class:`Rankings` -- per-item scores over classes, shape (N, L); higher ranks first.

A :class:`Scene` is what a dataset yields: the private input (seen only by the defense
and by metrics) and the public knowledge of the threat model (seen by everybody).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vispriv.harness.errors import InputError

#: Float rounding allowed outside [0, 1] before :class:`Images` refuses the values (they are clipped).
RANGE_TOLERANCE = 1e-4


class Payload:
    """Base class of everything that crosses a trust boundary.

    Subclasses are plain dataclasses of numpy arrays and small metadata. A payload
    that an attack receives must never carry a defense's secrets (keys, permutations,
    RNG state): put those in the defense's own objects, not in the release.
    """

    def describe(self) -> dict[str, Any]:
        """A short, JSON-friendly summary (shapes and sizes), safe to log."""
        out: dict[str, Any] = {"type": type(self).__name__}
        for key, value in vars(self).items():
            if isinstance(value, np.ndarray):
                out[key] = list(value.shape)
            elif isinstance(value, (list, tuple)):
                out[key] = f"{len(value)} items"
        return out


@dataclass
class Images(Payload):
    """Images in [0, 1], float32, shape (N, H, W, C) with C in {1, 3}; ``ids`` names each.

    ``sets`` (optional, one name per image) marks an estimate whose order within a set is
    unknown (a batch recovered from one gradient): before scoring, the core matches each set's
    estimates to the truth images of the same ids by the best assignment
    (:mod:`vispriv.harness.alignment`).
    """

    images: np.ndarray
    ids: list[str] = field(default_factory=list)
    sets: list[str] = field(default_factory=list, kw_only=True)

    def __post_init__(self) -> None:
        arr = np.asarray(self.images, dtype=np.float32)
        if arr.ndim == 3:
            arr = arr[..., None]
        if arr.ndim != 4 or arr.shape[-1] not in (1, 3):
            raise InputError(f"Images must have shape (N, H, W, C) with C in (1, 3); got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise InputError("Images contain NaN or infinite values; expected finite values in [0, 1]")
        lo, hi = (float(arr.min()), float(arr.max())) if arr.size else (0.0, 1.0)
        if lo < -RANGE_TOLERANCE or hi > 1 + RANGE_TOLERANCE:
            raise InputError(
                f"Images must hold values in [0, 1]; got [{lo:.4g}, {hi:.4g}] (clip or rescale before building Images)"
            )
        # A read-only array already in [0, 1] (a file mapping, vispriv.harness.mapped) is kept as it
        # is: clipping would copy it into memory and change nothing. Any other array is copied,
        # so the payload never shares memory its maker may still write.
        keep = not arr.flags.writeable and lo >= 0.0 and hi <= 1.0
        self.images = arr if keep or not arr.size else np.clip(arr, 0.0, 1.0)
        self.ids = _ids(self.ids, len(arr), "Images", "images")
        self.sets = _sets(self.sets, len(arr), "Images")


@dataclass
class Labels(Payload):
    """Integer labels, shape (N,); floats are accepted only when they hold whole numbers.

    ``sets`` as for :class:`Images`: labels whose order within a set is unknown.
    """

    labels: np.ndarray
    ids: list[str] = field(default_factory=list)
    sets: list[str] = field(default_factory=list, kw_only=True)

    def __post_init__(self) -> None:
        arr = np.asarray(self.labels).reshape(-1)
        whole = arr.dtype.kind in "iub" or (arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)))
        if not whole:
            bad = arr[:5].tolist()
            raise InputError(f"Labels must be integers (or floats holding whole numbers); got {arr.dtype} {bad}")
        self.labels = arr.astype(np.int64)
        self.ids = _ids(self.ids, len(self.labels), "Labels", "labels")
        self.sets = _sets(self.sets, len(self.labels), "Labels")


@dataclass
class Rankings(Payload):
    """Scores of N items over L classes, shape (N, L); a higher score ranks higher."""

    scores: np.ndarray
    ids: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.scores = np.asarray(self.scores, dtype=np.float64)
        if self.scores.ndim != 2:
            raise InputError(f"Rankings must have shape (N, L); got {self.scores.shape}")
        self.ids = _ids(self.ids, len(self.scores), "Rankings", "rows")


def _ids(ids: list[str], n: int, what: str, items: str) -> list[str]:
    """``ids`` as given (``0..n-1`` when empty), or one-line :class:`InputError` when it does not name every item."""
    if not ids:
        return [str(i) for i in range(n)]
    if len(ids) != n:
        raise InputError(f"{what}: {n} {items} but {len(ids)} ids; pass one id per item, or none")
    return list(ids)


def _sets(sets: list[str], n: int, what: str) -> list[str]:
    """``sets`` as given (empty: an ordered estimate), or one-line :class:`InputError`."""
    if sets and len(sets) != n:
        raise InputError(f"{what}: {n} items but {len(sets)} set names; pass one per item, or none")
    return list(sets)


@dataclass
class Scene:
    """What a dataset yields for one scenario.

    ``private`` is the private input: only the defense and the metrics (through the
    defense's ``truth``) ever see it. ``public`` is the public knowledge of the threat
    model (a public image set for training an inversion network, a public descriptor
    database, an initialisation set): defenses and attacks both receive it.
    """

    private: Payload
    public: Payload | None = None
