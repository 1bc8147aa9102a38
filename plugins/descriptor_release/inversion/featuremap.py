"""Sparse feature maps: each keypoint's feature vector at its pixel, zero elsewhere.

LDP-Feat (ICCV 2023) section 6.1 builds F in R^{256x256x128} from recovered descriptors, section
6.3 F in R^{256x256x(128m)} from stacked LDP-Feat candidates. Building F densely costs
H*W*C floats per image; here the (optional, bias-free) 1x1 projection of
[30]'s public training code is applied to the K feature vectors first and only the projected
vectors are scattered, which is the same linear map at a fraction of the cost.
Several keypoints on one pixel are averaged; a last channel marks occupied pixels.

Splatting (``radius`` > 0): each keypoint's vector is written on every pixel of a disc of
that radius around it (pixels outside the image are dropped; overlapping discs average).
A SIFT descriptor describes a region around its keypoint, not a pixel; with one pixel per
keypoint the network learnt the mean image plus a dot per keypoint even on its own
training photos (docs/inversion.md, 'Splatting and keypoint geometry'), with discs of radius 3 it draws regions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from vispriv.harness.errors import InputError

if TYPE_CHECKING:  # torch is imported where it runs: listing plugins must not load it
    import torch


@dataclass
class SparseFeatures:
    """Feature vectors at keypoints of N images of one size (flat, like the scenario payloads).

    ``keypoints`` (K, 2) are (x, y) pixel coordinates, ``features`` (K, C) one vector per
    keypoint, ``image_index`` (K,) the image each row belongs to.
    """

    keypoints: np.ndarray
    features: np.ndarray
    image_index: np.ndarray
    image_ids: list[str]
    image_size: tuple[int, int]

    def __post_init__(self) -> None:
        self.keypoints = np.asarray(self.keypoints, dtype=np.float32).reshape(-1, 2)
        self.features = np.asarray(self.features, dtype=np.float32)
        self.image_index = np.asarray(self.image_index, dtype=np.int64).reshape(-1)
        if self.features.ndim != 2 or len(self.features) != len(self.keypoints):
            raise InputError(
                f"features must be (K, C) with K = {len(self.keypoints)} keypoints; got {self.features.shape}"
            )
        if len(self.image_index) != len(self.keypoints):
            raise InputError(f"image_index has {len(self.image_index)} rows but there are {len(self.keypoints)} keypoints")
        if not np.all(np.isfinite(self.features)):
            raise InputError("features contain NaN or infinite values")
        self.image_size = (int(self.image_size[0]), int(self.image_size[1]))

    @property
    def channels(self) -> int:
        return int(self.features.shape[1])

    @property
    def n_images(self) -> int:
        return len(self.image_ids)

    def pixels(self) -> np.ndarray:
        """Integer (row, col) pixel of every keypoint, clipped into the image."""
        h, w = self.image_size
        col = np.clip(np.floor(self.keypoints[:, 0]), 0, w - 1).astype(np.int64)
        row = np.clip(np.floor(self.keypoints[:, 1]), 0, h - 1).astype(np.int64)
        return np.stack([row, col], axis=1)


def flat_pixel_index(batch: np.ndarray, rows: np.ndarray, cols: np.ndarray, height: int, width: int) -> np.ndarray:
    """Index of pixel (batch, row, col) in a flattened (B*H*W) map."""
    return (np.asarray(batch, np.int64) * height + np.asarray(rows, np.int64)) * width + np.asarray(cols, np.int64)


def disc_offsets(radius: int) -> np.ndarray:
    """(n, 2) integer (row, col) offsets of the pixels within ``radius`` of a centre."""
    dy, dx = np.mgrid[-radius : radius + 1, -radius : radius + 1]
    inside = dy**2 + dx**2 <= radius**2
    return np.stack([dy[inside], dx[inside]], axis=1)


def splat(values: torch.Tensor, flat_index: torch.Tensor, height: int, width: int, radius: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each (value, pixel) repeated on the pixels of a disc of ``radius`` inside its image."""
    import torch
    offsets = torch.from_numpy(disc_offsets(radius)).to(flat_index.device)
    image, pixel = flat_index // (height * width), flat_index % (height * width)
    rows = (pixel // width)[:, None] + offsets[None, :, 0]
    cols = (pixel % width)[:, None] + offsets[None, :, 1]
    inside = (rows >= 0) & (rows < height) & (cols >= 0) & (cols < width)
    index = (image[:, None] * height + rows) * width + cols
    source = torch.arange(len(values), device=values.device)[:, None].expand_as(index)
    # index_select, not values[...]: the backward of advanced indexing on the CPU accumulates
    # the disc's gradients with parallel atomic adds, in a different order on every call with
    # two or more threads; index_select's backward (index_add_) sums in index order.
    return torch.index_select(values, 0, source[inside]), index[inside]


def scatter_to_map(
    values: torch.Tensor, flat_index: torch.Tensor, batch: int, height: int, width: int, radius: int = 0
) -> torch.Tensor:
    """(B, C+1, H, W) map: mean of ``values`` (K, C) per pixel (on a disc of ``radius``
    around each keypoint when > 0), plus an occupancy channel."""
    import torch
    k, c = values.shape
    n_pix = batch * height * width
    if k and (int(flat_index.min()) < 0 or int(flat_index.max()) >= n_pix):
        raise InputError("keypoint pixel index outside the feature map")
    if radius > 0 and k:
        values, flat_index = splat(values, flat_index, height, width, radius)
        k = len(values)
    ones = torch.ones(k, 1, dtype=values.dtype, device=values.device)
    summed = torch.zeros(n_pix, c + 1, dtype=values.dtype, device=values.device)
    summed.index_add_(0, flat_index, torch.cat([values, ones], dim=1))
    count = summed[:, c:].clamp(min=1.0)
    summed = torch.cat([summed[:, :c] / count, (summed[:, c:] > 0).to(values.dtype)], dim=1)
    return summed.view(batch, height, width, c + 1).permute(0, 3, 1, 2).contiguous()
