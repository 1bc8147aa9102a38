"""Payloads of the album-sharing scenario (album pruning (AAAI 2020), sections 2 and 5).

Photos of many albums are stored flat: album ``a`` owns rows ``offsets[a]:offsets[a+1]``
of ``features`` (per-photo image features, the classifier's input). Places are indices
of the discretised cells ``0..n_places-1``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vispriv.harness import Payload
from vispriv.harness.errors import InputError


def _check_flat(features: np.ndarray, offsets: np.ndarray, n_ids: int) -> tuple[np.ndarray, np.ndarray]:
    features = np.asarray(features, dtype=np.float32)
    offsets = np.asarray(offsets, dtype=np.int64).reshape(-1)
    if features.ndim != 2:
        raise InputError(f"album features must have shape (photos, dim); got {features.shape}")
    if not np.all(np.isfinite(features)):
        raise InputError("album features contain NaN or infinite values")
    if len(offsets) != n_ids + 1 or offsets[0] != 0 or offsets[-1] != len(features) or np.any(np.diff(offsets) < 0):
        raise InputError(f"album offsets must run 0..{len(features)} non-decreasing with one entry per album plus one")
    return features, offsets


@dataclass
class Albums(Payload):
    """The private input: albums of photos, each taken at one true place.

    ``keep`` (optional, one flag per photo) marks photos the user wants kept whatever
    happens (section 2, "Incorporating User Preference"). ``kind`` names how the albums
    were formed (``R-16``, ``albums``, ...); ``simulated`` is true for the simulated world.
    """

    features: np.ndarray
    offsets: np.ndarray
    places: np.ndarray
    ids: list[str]
    n_places: int
    kind: str = ""
    simulated: bool = False
    keep: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.features, self.offsets = _check_flat(self.features, self.offsets, len(self.ids))
        self.places = np.asarray(self.places, dtype=np.int64).reshape(-1)
        if len(self.places) != len(self.ids):
            raise InputError(f"{len(self.ids)} albums but {len(self.places)} true places")
        if np.any((self.places < 0) | (self.places >= self.n_places)):
            raise InputError(f"true places must lie in 0..{self.n_places - 1}")
        if self.keep is not None:
            self.keep = np.asarray(self.keep, dtype=bool).reshape(-1)
            if len(self.keep) != len(self.features):
                raise InputError(f"keep has {len(self.keep)} flags for {len(self.features)} photos")

    def album(self, a: int) -> np.ndarray:
        return self.features[self.offsets[a] : self.offsets[a + 1]]

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class KeptAlbums(Payload):
    """The release: the kept photos of each album (the adversary's view).

    It carries no place, no deleted photo, no index of which photos were deleted nor why.
    ``protocol`` holds the defense's public settings only (its name, and for
    ``album-pruning`` mode, k, budget, theta, scores_from, keep_rank and the solver's;
    :mod:`vispriv.plugins.album.protocol`): what an attacker who knows the defense knows.
    Empty for a release made without one (read as "nothing was deleted").
    """

    features: np.ndarray
    offsets: np.ndarray
    ids: list[str]
    protocol: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.features, self.offsets = _check_flat(self.features, self.offsets, len(self.ids))

    def album(self, a: int) -> np.ndarray:
        return self.features[self.offsets[a] : self.offsets[a + 1]]

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class GeoModels(Payload):
    """Public knowledge: two linear location classifiers over the same cells (section 5).

    ``proxy_*`` is the defender's proxy, ``adversary_*`` the adversary's model, trained on
    disjoint halves of the training photos (black-box setting). Log-probabilities are
    ``log_softmax(features @ W + b)``. ``cell_bounds`` holds (lat_min, lat_max, lon_min,
    lon_max) per cell for manifest worlds, empty for the simulated world.
    ``adversary_photos`` / ``adversary_places`` are the adversary's own labelled training
    photos (its half, on which ``adversary_*`` was trained): an attacker that knows the
    defense builds and prunes albums of its own from them (``adaptive-geolocator``).
    Empty when the dataset does not provide them.
    """

    proxy_weight: np.ndarray
    proxy_bias: np.ndarray
    adversary_weight: np.ndarray
    adversary_bias: np.ndarray
    simulated: bool = False
    cell_bounds: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))
    adversary_photos: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    adversary_places: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def n_places(self) -> int:
        return int(self.proxy_bias.shape[0])

    def log_probs(self, features: np.ndarray, which: str) -> np.ndarray:
        """Per-photo log-probabilities ``S_i^j`` (eq. 1) from ``which`` in {proxy, adversary}."""
        if which not in ("proxy", "adversary"):
            raise InputError(f"model {which!r} unknown; allowed: proxy, adversary")
        weight = self.proxy_weight if which == "proxy" else self.adversary_weight
        bias = self.proxy_bias if which == "proxy" else self.adversary_bias
        return linear_log_probs(features, weight, bias)


def linear_log_probs(features: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """``log_softmax(features @ W + b)`` in float64 (the per-photo scores of eq. 1)."""
    logits = np.asarray(features, dtype=np.float64) @ weight.astype(np.float64) + bias
    logits -= logits.max(axis=1, keepdims=True)
    return logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
