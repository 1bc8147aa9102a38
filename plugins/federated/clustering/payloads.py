"""Payloads of federated clustering (DPHE (ICCV 2017) supplement A.3, Table 6).

* :class:`ClusteringData` -- the private input: the users' features and the held-out test
  split of :class:`~vispriv.plugins.federated.payloads.FederatedData`; the labels are used only
  to score the final clustering (adjusted mutual information) and K is their number of classes
  (the paper gives every method the correct number of clusters).
* :class:`ClusteringRelease` and subclasses -- the adversary's view: the published centroids
  C̄_0..C̄_T (T + 1, K, D) and the public protocol (batch size, steps, L1 strength), plus the
  users' plaintext centroids (no protection) or their DPHE messages (ciphertexts and doubly
  permuted indices, as for classifiers). Not a ``FederatedRelease``: the classifier attacks
  invert eq. (12), which centroids do not follow, so the matrix skips them with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vispriv.harness import Payload
from vispriv.harness.errors import InputError
from vispriv.plugins.federated.payloads import FederatedData


@dataclass
class ClusteringData(Payload):
    """The users' features for federated k-means (class labels score the result only)."""

    data: FederatedData

    def __post_init__(self) -> None:
        if self.data.multilabel:
            raise InputError("clustering needs one class per sample to score against; got multi-label attributes")

    @property
    def n_users(self) -> int:
        return self.data.n_users


@dataclass
class ClusteringRelease(Payload):
    """What every party learns: the published centroids (T + 1, K, D) and the public protocol."""

    centroids: np.ndarray
    protocol: dict[str, Any]
    target_ids: list[list[str]]

    def __post_init__(self) -> None:
        self.centroids = np.asarray(self.centroids, dtype=np.float64)
        if self.centroids.ndim != 3:
            raise InputError(f"centroids must have shape (T + 1, K, D); got {self.centroids.shape}")
        if not np.all(np.isfinite(self.centroids)):
            raise InputError("centroids contain NaN or infinite values; expected finite numbers")

    @property
    def n_rounds(self) -> int:
        return len(self.target_ids)

    @property
    def n_users(self) -> int:
        return int(self.protocol["n_users"])


@dataclass
class PlainCentroidUpdates(ClusteringRelease):
    """No protection: the aggregator sees every user's centroids, shape (T, N, K, D)."""

    updates: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0, 0)))

    def __post_init__(self) -> None:
        super().__post_init__()
        self.updates = np.asarray(self.updates, dtype=np.float64)
        if self.updates.ndim != 4 or self.updates.shape[:2] != (self.n_rounds, self.n_users):
            raise InputError(f"updates must have shape (T, N, K, D); got {self.updates.shape}")


@dataclass
class EncryptedCentroidUpdates(ClusteringRelease):
    """DPHE (Algorithm 1) on the flattened centroids: per message M ciphertexts and Phi(K).

    The fields mean what they mean in :class:`~vispriv.plugins.federated.payloads.EncryptedUpdates`.
    """

    ciphertexts: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0), np.uint8))
    permuted_indices: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64))
    message_round: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    message_user: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    modulus_hex: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.ciphertexts = np.asarray(self.ciphertexts, dtype=np.uint8)
        self.permuted_indices = np.asarray(self.permuted_indices, dtype=np.int64)
        if self.ciphertexts.shape[:2] != self.permuted_indices.shape:
            raise InputError("ciphertexts and permuted_indices must agree on (messages, M)")
