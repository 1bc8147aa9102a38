"""The private payload of a Flower capture: one round's updates as the server saw them, and the truth if kept."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vispriv.harness import Payload
from vispriv.harness.errors import InputError


@dataclass
class CapturedRound(Payload):
    """One captured round of a Flower federation.

    ``updates`` (N, D) are the N clients' updates, flat over the model's trainable parameters
    in ``named_parameters`` order, on the scale ``protocol`` says (FedSGD: gradients; FedAvg:
    w_E - w). With ``averaged`` (SecAgg+) there is one row: the weighted mean the server
    unmasked, all it sees. ``images`` (N * B, H, W, C) in [0, 1] and ``labels`` are the
    clients' true batches in ``node_ids`` order when the app kept them, else empty.
    """

    updates: np.ndarray
    averaged: bool
    batch_size: int
    node_ids: list[int]
    protocol: dict[str, Any]
    images: np.ndarray = field(default_factory=lambda: np.zeros((0, 1, 1, 1), np.float32))
    labels: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def __post_init__(self) -> None:
        self.updates = np.asarray(self.updates, np.float32)
        if self.updates.ndim != 2 or not len(self.updates):
            raise InputError(f"CapturedRound.updates must have shape (N, D); got {self.updates.shape}")
        if not np.all(np.isfinite(self.updates)):
            raise InputError("the captured updates contain NaN or infinite values")
        self.labels = np.asarray(self.labels, np.int64).reshape(-1)


@dataclass
class FlowerApp(Payload):
    """The example Flower app as the ``flower`` defense runs it: its public settings, the attacked round,
    the model spec and a digest of the global arrays the server sends in that round.

    ``settings`` are ``AppSettings`` fields (``num_clients``, ``images_per_client``, ``batch_size``,
    ``local_epochs``, ``lr``, ``seed``, ``rounds``, ``test_images``); the clients' digits are the app's
    own (no image travels in this payload: the defense's simulation keeps the true batches beside
    its capture, and they become the truth).
    """

    settings: dict[str, Any]
    round: int
    model: str
    global_sha256: str
