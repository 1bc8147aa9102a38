"""Payloads of deep federated learning (the gradient-inversion threat model).

* :class:`DeepFederatedData` -- private: every user's labelled images and a test split.
* :class:`DeepFederatedPublic` -- public: the global model (architecture, normalisation and
  the weights every user starts the attacked round from), the local-work protocol, and the
  public images (the initialisation set the model was trained on, T rounds).
* :class:`DeepRelease` and subclasses -- the adversary's view of the attacked round (round 0
  at the published weights): :class:`DeepPlaintextUpdates` holds every user's update as sent
  (plaintext FedAvg, pruning, DP-SGD); :class:`DeepPublishedAverage` only the average of the N
  users (DPHE: the aggregator holds ciphertexts), plus the insider's own update when the
  adversary is a user. Updates are flat float32 vectors over the trainable parameters in
  ``model.named_parameters()`` order. No payload carries a key, a permutation or a noise draw.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from vispriv.harness import Payload
from vispriv.harness.errors import InputError

if TYPE_CHECKING:  # torch is imported where it is used, so listing plugins stays light
    import torch
    from torch import nn

    from vispriv.plugins.federated.deep.local import LocalWork


def _images(name: str, arr: np.ndarray) -> np.ndarray:
    arr = np.asarray(arr, dtype=np.float32)
    if arr.ndim == 4 and arr.shape[0] == 0:
        return arr
    if arr.ndim != 4 or arr.shape[-1] not in (1, 3):
        raise InputError(f"{name} must have shape (N, H, W, C) with C in (1, 3); got {arr.shape}")
    if arr.size and (not np.all(np.isfinite(arr)) or arr.min() < 0 or arr.max() > 1):
        raise InputError(f"{name} must hold finite values in [0, 1]")
    return arr


def to_tensor(images: np.ndarray) -> torch.Tensor:
    """(N, H, W, C) numpy in [0, 1] -> (N, C, H, W) float32 tensor, always a copy: a release's
    arrays are read-only, and with C = 1 the transposed view would share their memory."""
    import torch

    return torch.from_numpy(np.asarray(images, np.float32).transpose(0, 3, 1, 2).copy())


def to_numpy(images: torch.Tensor) -> np.ndarray:
    """(N, C, H, W) tensor -> (N, H, W, C) numpy in [0, 1]."""
    return images.detach().clamp(0, 1).permute(0, 2, 3, 1).numpy().astype(np.float32)


@dataclass
class DeepFederatedData(Payload):
    """N users' images (N, H, W, C) in [0, 1], labels, owners; a test split; the batch size B."""

    images: np.ndarray
    labels: np.ndarray
    user_index: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray
    n_users: int
    n_classes: int
    batch_size: int
    class_names: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.images = _images("DeepFederatedData.images", self.images)
        self.test_images = _images("DeepFederatedData.test_images", self.test_images)
        self.labels = np.asarray(self.labels, np.int64).reshape(-1)
        self.test_labels = np.asarray(self.test_labels, np.int64).reshape(-1)
        self.user_index = np.asarray(self.user_index, np.int64).reshape(-1)
        if not len(self.labels) == len(self.user_index) == len(self.images):
            raise InputError("DeepFederatedData: images, labels and user_index must have one row per image")
        for n in range(self.n_users):
            have = int(np.sum(self.user_index == n))
            if have < self.batch_size:
                raise InputError(
                    f"user {n} holds {have} images but the batch size is {self.batch_size}; "
                    "lower batch_size or give each user more images"
                )

    def batch_rows(self, user: int, round_index: int) -> np.ndarray:
        """Rows of user ``user``'s batch in round ``round_index`` (its images cycled in order)."""
        rows = np.flatnonzero(self.user_index == user)
        per = len(rows) // self.batch_size
        k = round_index % per
        return rows[k * self.batch_size : (k + 1) * self.batch_size]


@dataclass
class DeepFederatedPublic(Payload):
    """The global model and protocol everybody knows, and the public (initialisation) images."""

    arch: str
    width: int
    n_classes: int
    image_shape: tuple[int, int, int]
    mean: list[float]
    std: list[float]
    state: dict[str, np.ndarray]
    work: dict[str, Any]
    public_images: np.ndarray
    public_labels: np.ndarray
    cifar_stem: bool = True
    #: A user's own model as a ``torch.export`` program (bytes of ``torch.export.save``); when
    #: set, ``arch``/``state`` are not used and the model is that program's module.
    exported: bytes = b""
    #: A malicious server's imprint block in front of the model ({"bins": k, "statistic": ...},
    #: :mod:`vispriv.plugins.federated.deep.imprint`); empty for an honest server. Its weights are in ``state``.
    imprint: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.public_images = _images("DeepFederatedPublic.public_images", self.public_images)
        self.public_labels = np.asarray(self.public_labels, np.int64).reshape(-1)

    def local_work(self) -> LocalWork:
        from vispriv.plugins.federated.deep.local import LocalWork

        return LocalWork(**self.work)

    def model(self) -> nn.Module:
        """A fresh copy of the global model at the published weights."""
        import torch

        from vispriv.plugins.federated.deep.models import Normalised, build_model

        if self.exported:
            import io

            module = torch.export.load(io.BytesIO(self.exported)).module()
            return Normalised(module, self.mean, self.std) if self.mean else module
        c, h, w = self.image_shape
        net: nn.Module = build_model(self.arch, self.n_classes, c, h, self.width, 0, self.mean, self.std, self.cifar_stem)
        if self.imprint:
            from vispriv.plugins.federated.deep.imprint import ImprintBlock, Imprinted

            net = Imprinted(ImprintBlock(c * h * w, int(self.imprint["bins"])), net)
        net.load_state_dict({k: torch.tensor(np.array(v)) for k, v in self.state.items()})
        return net

    def public_tensor(self) -> torch.Tensor | None:
        """The public images as a tensor (N, C, H, W), or None when there are none."""
        return to_tensor(self.public_images) if len(self.public_images) else None

    def mean_image(self) -> np.ndarray:
        """The mean public image (H, W, C): the no-leak baseline of a reconstruction."""
        return self.public_images.mean(axis=0)


def state_of(model: nn.Module) -> dict[str, np.ndarray]:
    """A model's state dict as numpy arrays (for a public payload)."""
    return {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}


def flatten(update: list[torch.Tensor]) -> np.ndarray:
    import torch

    return torch.cat([u.reshape(-1) for u in update]).detach().numpy().astype(np.float32)


def unflatten(vector: np.ndarray, model: nn.Module) -> list[torch.Tensor]:
    """A flat update back into one tensor per trainable parameter of ``model``, or one-line InputError."""
    import torch

    from vispriv.plugins.federated.deep.local import trainable

    shapes = [p.shape for p in trainable(model).values()]
    total = sum(int(np.prod(s)) for s in shapes)
    vector = np.asarray(vector, np.float32).reshape(-1)
    if vector.size != total:
        raise InputError(f"the update has {vector.size} values but the model has {total} trainable parameters")
    out, start = [], 0
    for s in shapes:
        n = int(np.prod(s))
        out.append(torch.from_numpy(vector[start : start + n].copy()).reshape(s))
        start += n
    return out


@dataclass
class CapturedUpdate(Payload):
    """An update a user captured from its own federated system, and optionally the truth behind it.

    ``update`` is flat over the model's trainable parameters; ``images`` (B, H, W, C) in [0, 1]
    and ``labels`` (B,) are the batch it was computed on, when the user has them (for scoring),
    else empty.
    """

    update: np.ndarray
    batch_size: int
    images: np.ndarray = field(default_factory=lambda: np.zeros((0, 1, 1, 1), np.float32))
    labels: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def __post_init__(self) -> None:
        self.update = np.asarray(self.update, np.float32).reshape(-1)
        if not np.all(np.isfinite(self.update)):
            raise InputError("the captured update contains NaN or infinite values")
        if len(self.images):
            self.images = _images("CapturedUpdate.images", self.images)
            self.labels = np.asarray(self.labels, np.int64).reshape(-1)


@dataclass
class DeepRelease(Payload):
    """What every party learns of the attacked round: the protocol and whose batch is whose.

    ``target_ids[n]`` are the ids of user n's B images (``u{n}-i{k}``): public names of the
    slots, not their content; the attack labels its reconstructions with them, and the metrics
    match reconstructions to images within a user's set by the best assignment.
    """

    protocol: dict[str, Any]
    target_ids: list[list[str]]

    @property
    def n_users(self) -> int:
        return len(self.target_ids)

    @property
    def batch_size(self) -> int:
        return int(self.protocol["batch_size"])


@dataclass
class DeepPlaintextUpdates(DeepRelease):
    """Every user's update as the aggregator receives it, shape (N, D)."""

    updates: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))

    def __post_init__(self) -> None:
        self.updates = np.asarray(self.updates, np.float32)
        if self.updates.ndim != 2 or len(self.updates) != self.n_users:
            raise InputError(f"updates must have shape (N users, D); got {self.updates.shape}")
        if not np.all(np.isfinite(self.updates)):
            raise InputError("updates contain NaN or infinite values")


@dataclass
class DeepPublishedAverage(DeepRelease):
    """Only the average of the N users' updates (D,); an insider ``observer`` also knows its own."""

    average: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    observer: int | None = None
    own_update: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))

    def __post_init__(self) -> None:
        self.average = np.asarray(self.average, np.float32).reshape(-1)
        self.own_update = np.asarray(self.own_update, np.float32).reshape(-1)


def require_deep_public(public: object) -> DeepFederatedPublic:
    if not isinstance(public, DeepFederatedPublic):
        raise InputError(f"deep gradient inversion needs the global model (DeepFederatedPublic); got {type(public).__name__}")
    return public


def batch_truth_ids(private: DeepFederatedData) -> list[list[str]]:
    """``u{n}-i{k}``: the k-th image of user n's attacked batch."""
    return [[f"u{n}-i{k}" for k in range(private.batch_size)] for n in range(private.n_users)]
