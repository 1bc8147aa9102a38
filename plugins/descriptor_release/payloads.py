"""Payloads of the descriptor-release scenario (LDP-Feat (ICCV 2023) sections 3-5).

Features of many images are stored flat: row ``i`` of every per-keypoint array belongs to
image ``image_index[i]`` (an index into ``image_ids``). Flat arrays let the hot paths
(point-to-subspace distances, nearest-neighbour search) run as batched matrix products.
Keypoints are (x, y) pixel coordinates in an image of size ``image_size`` = (H, W).
Each keypoint may also carry its detector scale (pixels, the LAF scale) and orientation
(degrees): COLMAP stores and releases both beside the location, and every defense of
LDP-Feat (ICCV 2023) protects the descriptor only, so the geometry travels from the raw features
into every release and every estimate built on one (``None`` when unknown, e.g. for
features made outside :func:`~vispriv.plugins.descriptor_release.sift.extract_features`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vispriv.harness import Images, Payload
from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release.config import SiftConfig

DESCRIPTOR_DIM = 128
LIFTING_MODES = ("random", "adversarial", "hybrid", "sub-hybrid")


def _check_rows(name: str, arr: np.ndarray, n: int, width: int | None = None) -> None:
    if len(arr) != n:
        raise InputError(f"{name} has {len(arr)} rows but there are {n} keypoints")
    if width is not None and arr.shape[-1] != width:
        raise InputError(f"{name} must be {width} wide; got shape {arr.shape}")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise InputError(f"{name} contains NaN or infinite values")


def _stacked(name: str, arr: np.ndarray, n: int, middle: str) -> np.ndarray:
    """A checked float32 (K, ``middle``, 128) per-keypoint stack (subspace bases, candidate sets)."""
    arr = np.asarray(arr, dtype=np.float32)
    if arr.ndim != 3:
        raise InputError(f"{name} must be (K, {middle}, {DESCRIPTOR_DIM}); got {arr.shape}")
    _check_rows(name, arr, n, DESCRIPTOR_DIM)
    return arr


def _subspaces(offsets: np.ndarray, bases: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Checked float32 offsets (K, 128) and bases (K, m, 128) of n keypoints' affine subspaces."""
    offsets = np.asarray(offsets, dtype=np.float32)
    _check_rows("offsets", offsets, n, DESCRIPTOR_DIM)
    return offsets, _stacked("bases", bases, n, "m")


@dataclass
class _Keypointed(Payload):
    keypoints: np.ndarray
    image_index: np.ndarray
    image_ids: list[str]
    image_size: tuple[int, int]
    scales: np.ndarray | None = field(default=None, kw_only=True)
    orientations: np.ndarray | None = field(default=None, kw_only=True)

    def _check_common(self) -> None:
        self.keypoints = np.asarray(self.keypoints, dtype=np.float32).reshape(-1, 2)
        self.image_index = np.asarray(self.image_index, dtype=np.int64).reshape(-1)
        _check_rows("image_index", self.image_index, len(self.keypoints))
        if len(self.image_index) and (self.image_index.min() < 0 or self.image_index.max() >= len(self.image_ids)):
            raise InputError("image_index points outside image_ids")
        if (self.scales is None) != (self.orientations is None):
            raise InputError("keypoint scales and orientations come together (both or neither)")
        if self.scales is not None:
            self.scales = np.asarray(self.scales, dtype=np.float32).reshape(-1)
            self.orientations = np.asarray(self.orientations, dtype=np.float32).reshape(-1)
            _check_rows("scales", self.scales, len(self.keypoints))
            _check_rows("orientations", self.orientations, len(self.keypoints))
            if np.any(self.scales <= 0):
                raise InputError("keypoint scales must be positive pixels")

    def keypoint_fields(self) -> dict:
        """Where the keypoints are (location, image, size, scale, orientation): what a payload
        built on this one's keypoints copies."""
        return {
            "keypoints": self.keypoints,
            "image_index": self.image_index,
            "image_ids": list(self.image_ids),
            "image_size": self.image_size,
            "scales": self.scales,
            "orientations": self.orientations,
        }

    @property
    def n_keypoints(self) -> int:
        return len(self.keypoints)

    def rows_of(self, image: int) -> np.ndarray:
        """Row indices of the keypoints of image number ``image``."""
        return np.flatnonzero(self.image_index == image)


@dataclass
class RawFeatures(_Keypointed):
    """Keypoints and L2-normalised 128-d SIFT descriptors (the undefended release)."""

    descriptors: np.ndarray = field(default_factory=lambda: np.zeros((0, DESCRIPTOR_DIM), np.float32))

    def __post_init__(self) -> None:
        self._check_common()
        self.descriptors = np.asarray(self.descriptors, dtype=np.float32)
        if self.descriptors.ndim != 2:
            raise InputError(f"descriptors must be (K, {DESCRIPTOR_DIM}); got {self.descriptors.shape}")
        _check_rows("descriptors", self.descriptors, self.n_keypoints, DESCRIPTOR_DIM)


@dataclass
class RecoveredFeatures(RawFeatures):
    """Descriptors a recovery attack estimated from a lifted release (LDP-Feat (ICCV 2023) section 4),
    with what the estimate was drawn from, so a later stage can check its work.

    ``offsets`` (K, 128) / ``bases`` (K, m, 128) are the attacked subspaces (public: the
    release itself), each of which holds the true descriptor; ``candidates`` (K, C, 128)
    the attack's candidate set when it chose among several (section 4.2's k cluster
    candidates), ``None`` otherwise. ``descriptors`` is the attack's single estimate.
    """

    offsets: np.ndarray = field(default_factory=lambda: np.zeros((0, DESCRIPTOR_DIM), np.float32))
    bases: np.ndarray = field(default_factory=lambda: np.zeros((0, 1, DESCRIPTOR_DIM), np.float32))
    candidates: np.ndarray | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.offsets, self.bases = _subspaces(self.offsets, self.bases, self.n_keypoints)
        if self.candidates is not None:
            self.candidates = _stacked("candidates", self.candidates, self.n_keypoints, "C")


@dataclass
class LiftedFeatures(_Keypointed):
    """Affine subspaces (offset + orthonormal basis of m directions) per keypoint (ref [11]).

    ``database`` is the lifting database W when the threat model makes it public
    (LDP-Feat (ICCV 2023) section 4.1); ``None`` otherwise. ``mode`` is the lifting method
    (random / adversarial / hybrid / sub-hybrid), a public parameter of the defense like
    m (the attacks of section 4 know how many of the m directions are database rows);
    ``None`` when unknown.
    """

    offsets: np.ndarray = field(default_factory=lambda: np.zeros((0, DESCRIPTOR_DIM), np.float32))
    bases: np.ndarray = field(default_factory=lambda: np.zeros((0, 1, DESCRIPTOR_DIM), np.float32))
    database: np.ndarray | None = None
    mode: str | None = None

    def __post_init__(self) -> None:
        self._check_common()
        self.offsets, self.bases = _subspaces(self.offsets, self.bases, self.n_keypoints)
        if self.mode not in (None, *LIFTING_MODES):
            raise InputError(f"lifting mode must be one of {LIFTING_MODES} or None; got {self.mode!r}")

    @property
    def m(self) -> int:
        return int(self.bases.shape[1])


@dataclass
class LdpFeatures(_Keypointed):
    """LDP-Feat release: per keypoint an m-subset of the public dictionary K, in random order.

    ``candidates`` holds the m descriptors (K, m, 128); ``candidate_ids`` their dictionary
    rows (K, m) when a finite dictionary is used. ``epsilon`` and ``dictionary_size`` are
    the mechanism's public parameters (an ε-LDP guarantee is stated with them; an attacker
    may know them): ``dictionary_size`` is ``"full"`` for the naive 2^1024 domain.
    """

    candidates: np.ndarray = field(default_factory=lambda: np.zeros((0, 1, DESCRIPTOR_DIM), np.float32))
    candidate_ids: np.ndarray | None = None
    epsilon: float | None = None
    dictionary_size: int | str | None = None

    def __post_init__(self) -> None:
        self._check_common()
        self.candidates = _stacked("candidates", self.candidates, self.n_keypoints, "m")

    @property
    def m(self) -> int:
        return int(self.candidates.shape[1])


@dataclass
class DescriptorPublic(Payload):
    """Public knowledge of the scenario: image sets disjoint from the private test images.

    ``lifting`` is the image set the lifting database W is built from; ``public`` the set
    the attacker's database Z and inversion networks are built from (section 6.1 keeps
    them disjoint). ``sift`` is the one SIFT setting every party uses (the defense on the
    private images, the attackers on their public images), so their descriptors compare.
    """

    lifting: Images
    public: Images
    sift: SiftConfig = field(default_factory=SiftConfig)


@dataclass
class LiftingTruth(Payload):
    """Secret side of a lifting, for the assumption checks of LDP-Feat (ICCV 2023) S3 (truth key ``lifting``).

    ``descriptors`` (K, 128) are the true descriptors and ``adversarial`` (K, n_adv, 128)
    the database rows each subspace was lifted with. Only metrics see it.
    """

    descriptors: np.ndarray
    adversarial: np.ndarray

    def __post_init__(self) -> None:
        self.descriptors = np.asarray(self.descriptors, dtype=np.float32)
        self.adversarial = np.asarray(self.adversarial, dtype=np.float32)
        if self.adversarial.ndim != 3 or len(self.adversarial) != len(self.descriptors):
            raise InputError(f"adversarial must be (K, n_adv, {DESCRIPTOR_DIM}); got {self.adversarial.shape}")


@dataclass
class RecoveryTrace(Payload):
    """What a descriptor-recovery attack looked at (estimate key ``lifting``), for the S3 checks.

    ``neighbours`` (K, N, 128): the database descriptors nearest to each subspace, ascending;
    ``source`` says which database: ``"lifting"`` (W, database attack) or ``"public"`` (Z).
    ``offsets``/``bases`` are the attacked (public) subspaces and ``aux_rows`` (K, J) the rows
    of the auxiliary subspaces Q' found to intersect each one (-1 padded; J = 0 when the
    attack uses none).
    """

    neighbours: np.ndarray
    source: str
    offsets: np.ndarray
    bases: np.ndarray
    aux_rows: np.ndarray

    def __post_init__(self) -> None:
        self.neighbours = np.asarray(self.neighbours, dtype=np.float32)
        self.aux_rows = np.asarray(self.aux_rows, dtype=np.int64).reshape(len(self.neighbours), -1)
