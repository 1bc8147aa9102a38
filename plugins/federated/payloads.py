"""Payloads of the federated-learning scenario (DPHE (ICCV 2017) sections 2-3, appendix A.2).

* :class:`FederatedData` -- the private input: every user's labelled images as feature
  vectors (row ``i`` belongs to user ``user_index[i]``) and a held-out test split that
  only the defense uses to score the aggregated classifier.
* :class:`FederatedPublic` -- public knowledge: the initialisation set the aggregator
  uses for w̄_0 (section 3.2) and the feature standardisation (mean, std) computed on it,
  which is how anyone maps a feature vector back to pixels.
* :class:`FederatedRelease` and subclasses -- the adversary's view. Every release holds
  the published averages w̄_0..w̄_T (users receive them, so the aggregator and every user
  knows them) and the public protocol hyper-parameters (loss, learning rate,
  regularisation). Subclasses add what a given defense lets the adversary see:
  plaintext updates, DPHE ciphertexts with doubly permuted indices, or nothing more.

Classifiers are one-vs-rest linear models stored as (C, D + 1) arrays whose last column
is the bias. No payload ever holds a Paillier private key or a permutation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vispriv.harness import Payload
from vispriv.harness.errors import InputError


def _finite(name: str, arr: np.ndarray) -> None:
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise InputError(f"{name} contains NaN or infinite values; expected finite numbers")


def as_labels(labels: np.ndarray) -> np.ndarray:
    """Class labels (N,) as int64, or multi-label attributes (N, L) of 0/1 as int64 (section 3.3)."""
    arr = np.asarray(labels, dtype=np.int64)
    if arr.ndim == 2:
        if arr.size and not np.isin(arr, (0, 1)).all():
            raise InputError("multi-label attributes must be 0/1")
        return arr
    return arr.reshape(-1)


@dataclass
class FederatedData(Payload):
    """Private training data of N users plus a test split (features in feature space).

    ``labels`` is (N,) class labels, or (N, L) 0/1 attributes for a multi-label task (the
    face attributes of section 3.3); then ``n_classes`` is L, one one-vs-rest row per attribute.
    """

    features: np.ndarray
    labels: np.ndarray
    user_index: np.ndarray
    test_features: np.ndarray
    test_labels: np.ndarray
    pixels: np.ndarray
    n_users: int
    n_classes: int
    image_shape: tuple[int, int]
    class_names: list[str] = field(default_factory=list)
    #: Seeds the users' SGD sample order (common random numbers across defenses, see protocol.py).
    schedule_seed: int = 0

    def __post_init__(self) -> None:
        self.features = np.asarray(self.features, dtype=np.float64)
        self.labels = as_labels(self.labels)
        self.user_index = np.asarray(self.user_index, dtype=np.int64).reshape(-1)
        self.test_features = np.asarray(self.test_features, dtype=np.float64)
        self.test_labels = as_labels(self.test_labels)
        self.pixels = np.asarray(self.pixels, dtype=np.float32)
        n = len(self.features)
        for name, arr in (("labels", self.labels), ("user_index", self.user_index), ("pixels", self.pixels)):
            if len(arr) != n:
                raise InputError(f"FederatedData.{name} has {len(arr)} rows but features has {n}")
        _finite("features", self.features)
        _finite("test_features", self.test_features)
        if self.features.shape[1] != self.image_shape[0] * self.image_shape[1]:
            raise InputError(f"features are {self.features.shape[1]}-d but images are {self.image_shape}")
        if n and (self.user_index.min() < 0 or self.user_index.max() >= self.n_users):
            raise InputError(f"user_index must lie in [0, {self.n_users})")

    @property
    def dim(self) -> int:
        return int(self.features.shape[1])

    @property
    def multilabel(self) -> bool:
        """True when every sample carries L binary attributes rather than one class."""
        return self.labels.ndim == 2

    def rows_of(self, user: int) -> np.ndarray:
        return np.flatnonzero(self.user_index == user)


@dataclass
class FederatedPublic(Payload):
    """Public knowledge: the initialisation set and the feature standardisation."""

    init_features: np.ndarray
    init_labels: np.ndarray
    feature_mean: np.ndarray
    feature_std: np.ndarray
    image_shape: tuple[int, int]
    n_classes: int

    def __post_init__(self) -> None:
        self.init_features = np.asarray(self.init_features, dtype=np.float64)
        self.init_labels = as_labels(self.init_labels)
        self.feature_mean = np.asarray(self.feature_mean, dtype=np.float64).reshape(-1)
        self.feature_std = np.asarray(self.feature_std, dtype=np.float64).reshape(-1)
        _finite("init_features", self.init_features)

    def to_pixels(self, features: np.ndarray) -> np.ndarray:
        """Invert the standardisation (x * std + mean), clip to [0, 1], shape (N, H, W, 1)."""
        x = np.atleast_2d(np.asarray(features, dtype=np.float64)) * self.feature_std + self.feature_mean
        return np.clip(x, 0.0, 1.0).reshape(-1, *self.image_shape, 1).astype(np.float32)

    def prior_label(self) -> int:
        """The most common public class (for a multi-label task: the most frequent attribute), the no-leak guess."""
        if self.init_labels.ndim == 2:
            return int(self.init_labels.sum(axis=0).argmax())
        return int(np.bincount(self.init_labels).argmax())

    def mean_image(self) -> np.ndarray:
        """The mean initialisation image in pixels, shape (H, W, 1): the no-leak baseline."""
        return self.to_pixels(self.init_features.mean(axis=0, keepdims=True))[0]


@dataclass
class FederatedRelease(Payload):
    """What every party learns: published averages w̄_t (T + 1, C, D + 1) and public hyper-parameters.

    ``target_ids[t][n]`` names the training target of user n's update in round t (the
    sample, or the mean of the samples, that update was computed on); attacks use these
    ids for their estimates so metrics can pair them with the truth.
    """

    averages: np.ndarray
    protocol: dict[str, Any]
    target_ids: list[list[str]]

    def __post_init__(self) -> None:
        self.averages = np.asarray(self.averages, dtype=np.float64)
        if self.averages.ndim != 3:
            raise InputError(f"averages must have shape (T + 1, C, D + 1); got {self.averages.shape}")
        _finite("averages", self.averages)

    @property
    def n_rounds(self) -> int:
        return len(self.target_ids)

    @property
    def n_users(self) -> int:
        return int(self.protocol["n_users"])


@dataclass
class PublishedAverage(FederatedRelease):
    """Only the published averages (e.g. PRR10's noisy average): nothing per user."""


@dataclass
class PlaintextUpdates(FederatedRelease):
    """Plain FedAvg or RA12: the aggregator sees every update w_t^(n), shape (T, N, C, D + 1)."""

    updates: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0, 0)))

    def __post_init__(self) -> None:
        super().__post_init__()
        self.updates = np.asarray(self.updates, dtype=np.float64)
        if self.updates.ndim != 4 or self.updates.shape[:2] != (self.n_rounds, self.n_users):
            raise InputError(f"updates must have shape (T, N, C, D + 1); got {self.updates.shape}")
        _finite("updates", self.updates)


@dataclass
class EncryptedUpdates(FederatedRelease):
    """DPHE (Algorithm 1): per message M ciphertexts and their doubly permuted indices Φ(K).

    ``ciphertexts`` is uint8 (n_messages, M, bytes) big-endian; ``permuted_indices`` is
    int64 (n_messages, M); ``message_round`` / ``message_user`` say who sent each
    message (several per user when sharded). ``modulus_hex`` is the public key n.
    ``own_updates`` is (T, C, D + 1) when the adversary is user ``observer`` (an
    insider who knows its own plaintext updates), else empty.
    """

    ciphertexts: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0), np.uint8))
    permuted_indices: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64))
    message_round: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    message_user: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    modulus_hex: str = ""
    observer: int | None = None
    own_updates: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0)))

    def __post_init__(self) -> None:
        super().__post_init__()
        self.ciphertexts = np.asarray(self.ciphertexts, dtype=np.uint8)
        self.permuted_indices = np.asarray(self.permuted_indices, dtype=np.int64)
        if self.ciphertexts.shape[:2] != self.permuted_indices.shape:
            raise InputError("ciphertexts and permuted_indices must agree on (messages, M)")


def require_public(public: object) -> FederatedPublic:
    """The scene's public knowledge as :class:`FederatedPublic`, or a one-line InputError."""
    if not isinstance(public, FederatedPublic):
        raise InputError(
            f"federated-learning plugins need the public initialisation set (FederatedPublic); "
            f"got {type(public).__name__}"
        )
    return public
