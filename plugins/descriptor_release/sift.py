"""SIFT keypoints and descriptors with kornia (LDP-Feat (ICCV 2023) section 6.1; ref [11]).

Public API (stable; the inversion and recovery attacks build on it)::

    extract_features(images: Images, cfg: SiftConfig, cache: Cache | None = None) -> RawFeatures
    describe_each(images: Iterable[np.ndarray], cfg: SiftConfig) -> Iterator[np.ndarray]  # one image at a time

Choices, all in :class:`SiftConfig`:

* **Plain L2 SIFT, not RootSIFT.** Ref [11] lifts plain L2-normalised SIFT; kornia returns
  RootSIFT by default, so ``rootsift=False`` is passed explicitly.
* **COLMAP quantisation** (``quantize=True``, default): COLMAP stores a descriptor ``d`` as
  ``uint8(min(round(512 * d), 255))``; ref [11]'s descriptors went through that store and
  were re-L2-normalised as float. We do the same so descriptors lie on the same lattice.
* **Detector**: ``detector="dog"`` runs kornia's ``SIFTFeatureScaleSpace`` (3-D DoG extrema,
  sub-pixel refinement, one orientation per keypoint) with its ``pyramid`` descriptor
  backend (about 5x faster than the patch backend on CPU). kornia pads its output to
  ``max_keypoints`` with zero responses and zero descriptors: those rows are dropped, as
  are detections whose absolute DoG response is below ``response_threshold``.
  ``detector="dense"`` describes upright patches on a regular grid (``dense_step`` pixels
  apart, ``dense_scale`` pixels of LAF scale) instead: every image then has the same number
  of keypoints, which some experiments want.
* **Images**: RGB images are converted to grey (SIFT carries no colour); ``image_size``
  resizes every image (anti-aliased) to a square of that side before extraction, else the
  images are used at their own size. Keypoints are (x, y) pixels of the extraction frame,
  recorded in ``RawFeatures.image_size`` = (H, W).
* **Geometry**: each keypoint's LAF scale (pixels) and orientation (degrees, kornia's
  convention) are kept beside its location (``RawFeatures.scales`` / ``.orientations``);
  dense keypoints have ``dense_scale`` and orientation 0.
* **Precision** (``precision``): ``float32`` (default) runs kornia in single precision.
  PyTorch picks its CPU kernels by instruction set (AVX2, AVX-512, none), and in float32
  those kernels round differently: measured on two 256 px photos, forcing the generic
  kernels (``ATEN_CPU_CAPABILITY=default``) against AVX2 moved keypoints by up to 0.01 px,
  flipped ~5 % of the uint8 descriptor entries by one step, and added or dropped a keypoint
  per image, enough to change a k-means dictionary built from them entirely. ``float64``
  makes the same comparison identical (keypoints within 1e-12 px, every uint8 entry equal)
  for ~20 % more time, so results reproduce across machines; it is cast to float32 at the end.
* An image without any keypoint (a flat grey image) contributes no rows: it keeps its id in
  ``image_ids`` and ``rows_of(i)`` is empty. That is a documented skip, not an error.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from vispriv.harness import Cache, Images, Progress, blas_threads, no_progress, torch_threads
from vispriv.harness.errors import InputError
from vispriv.harness.hashing import fingerprint
from vispriv.plugins.descriptor_release.config import MIN_IMAGE_SIDE, SiftConfig
from vispriv.plugins.descriptor_release.payloads import DESCRIPTOR_DIM, RawFeatures

if TYPE_CHECKING:  # torch is imported where it runs: listing plugins must not load it
    import torch

#: Version of the extraction code, part of every cache key.
SIFT_VERSION = "1.1"

__all__ = ["MIN_IMAGE_SIDE", "SiftConfig", "check_sift_input", "describe_each", "dog_extractor", "extract_features", "l2_normalise", "quantize_colmap"]


def quantize_colmap(descriptors: np.ndarray) -> np.ndarray:
    """COLMAP's uint8 store of an L2 SIFT descriptor, re-L2-normalised as float32.

    ``q = min(round(512 d), 255)``, then ``q / ||q||``. All-zero rows stay zero.
    """
    d = np.asarray(descriptors, dtype=np.float32)
    q = np.minimum(np.round(512.0 * np.maximum(d, 0.0)), 255.0).astype(np.float32)
    norm = np.linalg.norm(q, axis=1, keepdims=True)
    return np.divide(q, norm, out=np.zeros_like(q), where=norm > 0)


def l2_normalise(descriptors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero)."""
    d = np.asarray(descriptors, dtype=np.float32)
    norm = np.linalg.norm(d, axis=1, keepdims=True)
    return np.divide(d, norm, out=np.zeros_like(d), where=norm > 0)


def to_grey_tensor(images: np.ndarray, size: int | None, precision: str = "float32") -> torch.Tensor:
    """(N, H, W, C) floats in [0, 1] -> (N, 1, H', W') grey tensor (resized when ``size``) of ``precision``."""
    import torch
    dtype = np.dtype(precision)
    arr = np.asarray(images, dtype=dtype)
    with blas_threads(1):  # a threaded gemv rounds by the machine's core count
        grey = arr.mean(axis=-1) if arr.shape[-1] == 1 else arr @ np.array([0.299, 0.587, 0.114], dtype)
    t = torch.from_numpy(np.ascontiguousarray(grey))[:, None]
    if size is not None and tuple(t.shape[-2:]) != (size, size):
        t = torch.nn.functional.interpolate(t, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
    return t.clamp(0.0, 1.0)


@lru_cache(maxsize=4)
def _dog_extractor(max_keypoints: int, backend: str, upright: bool, precision: str = "float32") -> torch.nn.Module:
    import kornia.feature as KF
    import torch

    return KF.SIFTFeatureScaleSpace(
        max_keypoints, upright=upright, rootsift=False, descriptor_backend=backend
    ).eval().to(getattr(torch, precision))


def dog_extractor(cfg: SiftConfig) -> torch.nn.Module:
    """The kornia DoG SIFT module for ``cfg`` (shared by every caller so they compute alike)."""
    return _dog_extractor(cfg.max_keypoints, cfg.descriptor_backend, cfg.upright, cfg.precision)


@lru_cache(maxsize=2)
def _patch_descriptor(precision: str = "float32") -> torch.nn.Module:
    import kornia.feature as KF
    import torch

    return KF.LAFDescriptor(KF.SIFTDescriptor(patch_size=41, rootsift=False), patch_size=41).eval().to(getattr(torch, precision))


def dense_grid(height: int, width: int, step: int, margin: float) -> np.ndarray:
    """(x, y) centres of a regular grid ``step`` px apart, at least ``margin`` px from the border."""
    lo = int(np.ceil(margin))
    xs = np.arange(lo, width - lo, step, dtype=np.float32)
    ys = np.arange(lo, height - lo, step, dtype=np.float32)
    if len(xs) == 0 or len(ys) == 0:
        return np.zeros((0, 2), np.float32)
    gx, gy = np.meshgrid(xs, ys)
    return np.stack([gx.ravel(), gy.ravel()], axis=1)


def _extract_one_dog(img: torch.Tensor, cfg: SiftConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import torch
    from kornia.feature import get_laf_center, get_laf_orientation, get_laf_scale

    extractor = dog_extractor(cfg)
    with torch.no_grad():
        lafs, responses, desc = extractor(img[None])
    resp = responses[0].abs().numpy()
    d = desc[0].numpy()
    keep = (resp > cfg.response_threshold) & (np.linalg.norm(d, axis=1) > 0)
    geometry = np.stack([get_laf_scale(lafs)[0, :, 0, 0].numpy(), get_laf_orientation(lafs)[0, :, 0].numpy()], axis=1)
    return get_laf_center(lafs)[0].numpy()[keep], d[keep], geometry[keep]


def _extract_one_dense(img: torch.Tensor, cfg: SiftConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import torch
    from kornia.feature import laf_from_center_scale_ori

    h, w = img.shape[-2:]
    centres = dense_grid(h, w, cfg.dense_step, margin=cfg.dense_scale / 2)[: cfg.max_keypoints]
    if len(centres) == 0:
        return centres, np.zeros((0, DESCRIPTOR_DIM), np.float32), np.zeros((0, 2), np.float32)
    c = torch.from_numpy(centres)[None].to(img.dtype)
    scale = torch.full((1, len(centres), 1, 1), float(cfg.dense_scale), dtype=img.dtype)
    ori = torch.zeros(1, len(centres), 1, dtype=img.dtype)
    with torch.no_grad():
        desc = _patch_descriptor(cfg.precision)(img[None], laf_from_center_scale_ori(c, scale, ori))
    d = desc[0].numpy()
    keep = np.linalg.norm(d, axis=1) > 0
    geometry = np.stack([np.full(len(centres), cfg.dense_scale, np.float32), np.zeros(len(centres), np.float32)], axis=1)
    return centres[keep], d[keep], geometry[keep]


def _extract_one(grey: torch.Tensor, cfg: SiftConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(keypoints, raw descriptors, geometry) of one (1, H, W) grey image, float32."""
    one = _extract_one_dog if cfg.detector == "dog" else _extract_one_dense
    with torch_threads(1):  # small images are overhead-bound: more threads on a loaded 2-core machine ran 15x slower
        k, d, g = one(grey, cfg)
    return k.astype(np.float32), d.astype(np.float32), g.astype(np.float32)


def _finish(descriptors: np.ndarray, cfg: SiftConfig) -> np.ndarray:
    """Raw descriptors as released: COLMAP-quantised or L2-normalised (row by row)."""
    return quantize_colmap(descriptors) if cfg.quantize else l2_normalise(descriptors)


def describe_each(images: Iterable[np.ndarray], cfg: SiftConfig) -> Iterator[np.ndarray]:
    """The (n_i, 128) float32 descriptors of each (H, W, C) image in turn, one image in memory at a time.

    Row for row the descriptors :func:`extract_features` gives the same images (every step is
    per image or per row), for callers that stream many images to disk (dictionaries).
    """
    for image in images:
        grey = to_grey_tensor(np.asarray(image)[None], cfg.image_size, cfg.precision)
        yield _finish(_extract_one(grey[0], cfg)[1], cfg)


def _extract(images: Images, cfg: SiftConfig, progress: Progress = no_progress) -> dict[str, np.ndarray]:
    grey = to_grey_tensor(images.images, cfg.image_size, cfg.precision)
    kps, descs, geoms, index = [], [], [], []
    for i in progress(range(len(grey)), desc="SIFT", total=len(grey)):
        k, d, g = _extract_one(grey[i], cfg)
        kps.append(k)
        descs.append(d)
        geoms.append(g)
        index.append(np.full(len(k), i, np.int64))
    descriptors = _finish(np.concatenate(descs) if descs else np.zeros((0, DESCRIPTOR_DIM), np.float32), cfg)
    return {
        "keypoints": np.concatenate(kps).reshape(-1, 2) if kps else np.zeros((0, 2), np.float32),
        "descriptors": descriptors,
        "image_index": np.concatenate(index) if index else np.zeros(0, np.int64),
        "geometry": np.concatenate(geoms).reshape(-1, 2) if geoms else np.zeros((0, 2), np.float32),
        "size": np.array(grey.shape[-2:], np.int64),
    }


def check_sift_input(images: Images, cfg: SiftConfig) -> None:
    """One-line InputError unless ``images`` are :class:`Images` SIFT can run on (>= 32 px a side or resized)."""
    if not isinstance(images, Images):
        raise InputError(f"extract_features needs vispriv.harness.Images; got {type(images).__name__}")
    h, w = images.images.shape[1:3]
    if cfg.image_size is None and min(h, w) < MIN_IMAGE_SIDE:
        raise InputError(f"images are {h}x{w} px; SIFT needs at least {MIN_IMAGE_SIDE} px a side (or set image_size)")


def extract_features(
    images: Images, cfg: SiftConfig, cache: Cache | None = None, progress: Progress = no_progress
) -> RawFeatures:
    """SIFT keypoints + 128-d L2 SIFT descriptors of every image, flat (see :mod:`.payloads`).

    Args:
        images: the images (N, H, W, C) in [0, 1]; C = 1 or 3.
        cfg: extraction settings (:class:`SiftConfig`).
        cache: when given, the result is cached by content (config + image bytes + ids).
        progress: wraps the loop over images when they are extracted (a cache miss), e.g.
            ``ctx.progress``: a heartbeat line every 30 s off a terminal.

    Returns:
        :class:`RawFeatures` whose ``image_ids`` are ``images.ids``; images without keypoints
        have no rows. Raises :class:`InputError` for images smaller than 32 px a side.
    """
    check_sift_input(images, cfg)
    parts = {"version": SIFT_VERSION, "cfg": cfg, "images": fingerprint(images.images), "ids": images.ids}
    arrays = (cache or Cache(None)).arrays("sift", parts, lambda: _extract(images, cfg, progress))
    return RawFeatures(
        keypoints=arrays["keypoints"],
        image_index=arrays["image_index"],
        image_ids=list(images.ids),
        image_size=(int(arrays["size"][0]), int(arrays["size"][1])),
        descriptors=arrays["descriptors"],
        scales=arrays["geometry"][:, 0],
        orientations=arrays["geometry"][:, 1],
    )
