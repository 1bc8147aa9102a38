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
    """Images in [0, 1], float32, shape (N, H, W, C) with C in {1, 3}; ``ids`` names each."""

    images: np.ndarray
    ids: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        arr = np.asarray(self.images, dtype=np.float32)
        if arr.ndim == 3:
            arr = arr[..., None]
        if arr.ndim != 4 or arr.shape[-1] not in (1, 3):
            raise InputError(f"Images must have shape (N, H, W, C) with C in (1, 3); got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise InputError("Images contain NaN or infinite values; expected finite values in [0, 1]")
        self.images = arr
        if not self.ids:
            self.ids = [str(i) for i in range(len(arr))]
        if len(self.ids) != len(arr):
            raise InputError(f"Images: {len(arr)} images but {len(self.ids)} ids")


@dataclass
class Labels(Payload):
    """Integer labels, shape (N,)."""

    labels: np.ndarray
    ids: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.labels = np.asarray(self.labels).astype(np.int64).reshape(-1)
        if not self.ids:
            self.ids = [str(i) for i in range(len(self.labels))]


@dataclass
class Rankings(Payload):
    """Scores of N items over L classes, shape (N, L); a higher score ranks higher."""

    scores: np.ndarray
    ids: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.scores = np.asarray(self.scores, dtype=np.float64)
        if self.scores.ndim != 2:
            raise InputError(f"Rankings must have shape (N, L); got {self.scores.shape}")
        if not self.ids:
            self.ids = [str(i) for i in range(len(self.scores))]


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
