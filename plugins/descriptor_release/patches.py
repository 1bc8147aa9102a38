"""Public patch database and patch pasting of ``invert-patches``.

After Weinzaepfel, Jégou and Pérez, "Reconstructing an image from its local descriptors",
CVPR 2011: every keypoint of the public images gives a database row (its SIFT descriptor,
its image patch normalised by the keypoint's scale and orientation); a released keypoint
gets the patch of its nearest database descriptor (faiss), warped back to the keypoint's
position, scale and orientation, and blended with the others; pixels no patch covers are
filled. Public API::

    build_patch_database(images, sift, patch_size, support) -> PatchDatabase
    nearest_patches(database, queries, k) -> (Q, P, P) mean of the k nearest rows' patches
    lafs_from_geometry(centres, scales, angles_deg) -> (K, 2, 3) keypoint frames
    paste_patches(lafs, patches, image_index, n_images, size, support, ...) -> (images, coverage)
    fill_holes(images, coverage, fill, background) -> images

Choices (configurable in the attack):

* **Geometry.** A keypoint is kornia's local affine frame (LAF): centre, scale ``s`` and
  orientation. The patch covers ``support`` times the LAF (a square of side ``2 s support``
  px in the keypoint's frame), resampled to ``patch_size`` px a side
  (``kornia.feature.extract_patches_from_pyramid``); pasting is the inverse warp
  (``kornia.geometry.transform.warp_affine``), so extracting and pasting with the same
  frames reproduces the image on the patches' support.
* **Blending.** Each pasted patch is weighted by a Gaussian window of standard deviation
  ``blend_sigma`` (in the patch's [-1, 1] coordinates) and the image is the weighted mean,
  as the paper's blending of overlapping patches; the patches keep their own brightness
  (SIFT is invariant to brightness, so the database's is the best an attacker knows).
* **Holes** (weight below ``min_weight``): ``diffusion`` (default) fills them by normalised
  convolution at growing Gaussian scales (2, 4, ..., 64 px), the rest with the public mean;
  ``biharmonic`` uses scikit-image's ``inpaint_biharmonic`` (the paper uses a
  Poisson-type fill; both are smooth interpolants, diffusion is faster on 2 cores).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from vispriv.harness import Images, torch_threads
from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release.config import SiftConfig
from vispriv.plugins.descriptor_release.payloads import DESCRIPTOR_DIM
from vispriv.plugins.descriptor_release.sift import (
    dog_extractor,
    l2_normalise,
    quantize_colmap,
    to_grey_tensor,
)

#: Version of the database code, part of the attack's cache key.
PATCHES_VERSION = "1.0"


@dataclass
class PatchDatabase:
    """Rows of (SIFT descriptor, normalised grey patch) and the keypoints' frames in their source image."""

    descriptors: np.ndarray  # (N, 128) float32, L2 (and COLMAP-quantised as the scene's SIFT)
    patches: np.ndarray  # (N, P, P) float32 in [0, 1]
    lafs: np.ndarray  # (N, 2, 3) kornia LAF (px) of each keypoint in its source image

    @property
    def scales(self) -> np.ndarray:
        """LAF scale (px) of each row: sqrt|det A|."""
        return np.sqrt(np.abs(np.linalg.det(self.lafs[:, :, :2].astype(np.float64)))).astype(np.float32)

    def __post_init__(self) -> None:
        if len(self.descriptors) == 0:
            raise InputError("the public patch database is empty: the public images gave no keypoint "
                             "(give more or larger public images, or a lower SIFT response_threshold)")
        if len(self.descriptors) != len(self.patches) or self.descriptors.shape[1:] != (DESCRIPTOR_DIM,):
            raise InputError(f"patch database: descriptors {self.descriptors.shape} and patches {self.patches.shape} do not match")


def _patch_rows(grey, sift: SiftConfig, patch_size: int, support: float) -> dict[str, np.ndarray]:
    import torch
    from kornia.feature import extract_patches_from_pyramid, scale_laf

    extractor = dog_extractor(sift)
    descs, patches, frames = [], [], []
    for img in grey:
        with torch_threads(1), torch.no_grad():
            lafs, responses, desc = extractor(img[None])
            keep = (responses[0].abs() > sift.response_threshold) & (desc[0].norm(dim=1) > 0)
            lafs = lafs[:, keep]
            if lafs.shape[1]:
                patches.append(extract_patches_from_pyramid(img[None], scale_laf(lafs, support), patch_size)[0, :, 0].numpy())
                frames.append(lafs[0].numpy())
                descs.append(desc[0, keep].numpy())
    if not descs:
        return {"descriptors": np.zeros((0, DESCRIPTOR_DIM), np.float32),
                "patches": np.zeros((0, patch_size, patch_size), np.float32), "lafs": np.zeros((0, 2, 3), np.float32)}
    d = np.concatenate(descs).astype(np.float32)
    return {"descriptors": quantize_colmap(d) if sift.quantize else l2_normalise(d),
            "patches": np.concatenate(patches).astype(np.float32), "lafs": np.concatenate(frames).astype(np.float32)}


def build_patch_database(image_sets: list[Images], sift: SiftConfig, patch_size: int = 32, support: float = 1.0) -> PatchDatabase:
    """(descriptor, patch) of every DoG keypoint of every image, with the scene's SIFT settings.

    Descriptors are computed exactly as :func:`~vispriv.plugins.descriptor_release.sift.extract_features`
    computes them (same kornia extractor, same response filter, same quantisation), so they
    compare with the released ones.
    """
    if sift.detector != "dog":
        raise InputError(f"invert-patches needs the DoG detector (keypoints with scale and orientation); the scene's SIFT uses {sift.detector!r}")
    parts = [_patch_rows(to_grey_tensor(s.images, sift.image_size, sift.precision), sift, patch_size, support) for s in image_sets if len(s.images)]
    if not parts:
        raise InputError("the public patch database is empty: no public image was given")
    return PatchDatabase(*(np.concatenate([p[k] for p in parts]) for k in ("descriptors", "patches", "lafs")))


def nearest_patches(database: PatchDatabase, queries: np.ndarray, k: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The mean patch of the ``k`` nearest database descriptors (faiss exact L2) of each query, and the distances."""
    import faiss

    index = faiss.IndexFlatL2(DESCRIPTOR_DIM)
    index.add(np.ascontiguousarray(database.descriptors, dtype=np.float32))
    k = min(k, len(database.descriptors))
    dist, rows = index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
    return database.patches[rows].mean(axis=1), np.sqrt(np.maximum(dist, 0.0))


def _paste_matrices(lafs: np.ndarray, patch_size: int, support: float) -> np.ndarray:
    """(K, 2, 3) affine maps from patch pixels (column, row) to image pixels (x, y).

    Patch pixel p in [0, P-1] is the frame coordinate u = 2 p / (P - 1) - 1 in [-1, 1]
    (kornia's normalised patch grid); the LAF [A | c] maps u to ``c + support * A u``.
    """
    a = support * np.asarray(lafs, np.float32)[:, :, :2]
    m = np.empty((len(a), 2, 3), np.float32)
    m[:, :, :2] = a * (2.0 / (patch_size - 1))
    m[:, :, 2] = np.asarray(lafs, np.float32)[:, :, 2] - a.sum(axis=2)
    return m


def lafs_from_geometry(centres: np.ndarray, scales: np.ndarray, angles_deg: np.ndarray) -> np.ndarray:
    """(K, 2, 3) LAFs of keypoints given centre (x, y), scale (px) and orientation (degrees, kornia's convention)."""
    import torch
    from kornia.feature import laf_from_center_scale_ori

    laf = laf_from_center_scale_ori(torch.from_numpy(np.array(centres, np.float32))[None],  # copies: releases are read-only
                                    torch.from_numpy(np.array(scales, np.float32)).reshape(1, -1, 1, 1),
                                    torch.from_numpy(np.array(angles_deg, np.float32)).reshape(1, -1, 1))
    return laf[0].numpy()


def paste_patches(
    lafs: np.ndarray,
    patches: np.ndarray,
    image_index: np.ndarray,
    n_images: int,
    size: tuple[int, int],
    support: float = 1.0,
    blend_sigma: float = 0.5,
    chunk: int = 256,
) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian-weighted mean of the patches warped to their keypoints: (N, H, W, 1) images and (N, H, W) weight sums.

    ``lafs`` (K, 2, 3) are the keypoints' frames in pixels (:func:`lafs_from_geometry`).
    """
    import torch
    from kornia.geometry.transform import warp_affine

    h, w = size
    p = patches.shape[-1]
    u = np.linspace(-1.0, 1.0, p, dtype=np.float32)
    window = np.exp(-(u[:, None] ** 2 + u[None, :] ** 2) / (2.0 * blend_sigma**2)).astype(np.float32)
    matrices = torch.from_numpy(_paste_matrices(lafs, p, support))
    src = torch.from_numpy(np.stack([patches * window, np.broadcast_to(window, patches.shape)], axis=1).astype(np.float32))
    num = np.zeros((n_images, h, w), np.float64)
    den = np.zeros((n_images, h, w), np.float64)
    with torch.no_grad():
        for lo in range(0, len(patches), chunk):
            out = warp_affine(src[lo:lo + chunk], matrices[lo:lo + chunk], (h, w), align_corners=True).numpy()
            np.add.at(num, image_index[lo:lo + chunk], out[:, 0])
            np.add.at(den, image_index[lo:lo + chunk], out[:, 1])
    images = np.divide(num, den, out=np.zeros_like(num), where=den > 1e-6)
    return images[..., None].astype(np.float32), den.astype(np.float32)


def fill_holes(
    images: np.ndarray, coverage: np.ndarray, background: float, fill: Literal["diffusion", "biharmonic"] = "diffusion",
    min_weight: float = 1e-3,
) -> np.ndarray:
    """Pixels whose blending weight is below ``min_weight`` filled (see the module docstring)."""
    from skimage.filters import gaussian

    out = images.copy()
    for i in range(len(images)):
        hole = coverage[i] < min_weight
        if not hole.any():
            continue
        if not (~hole).any():
            out[i, ..., 0] = background
            continue
        if fill == "biharmonic":
            from skimage.restoration import inpaint_biharmonic

            out[i, ..., 0] = inpaint_biharmonic(images[i, ..., 0], hole)
            continue
        known = (~hole).astype(np.float64)
        value, todo = images[i, ..., 0].astype(np.float64), hole.copy()
        for sigma in (2, 4, 8, 16, 32, 64):
            wsum = gaussian(known, sigma)
            est = np.divide(gaussian(value * known, sigma), wsum, out=np.zeros_like(wsum), where=wsum > 1e-3)
            ok = todo & (wsum > 1e-3)
            value[ok] = est[ok]
            todo &= ~ok
        value[todo] = background
        out[i, ..., 0] = value
    return np.clip(out, 0.0, 1.0)
