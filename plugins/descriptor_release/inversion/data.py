"""Augmented training samples for the inversion network ([30]'s recipe, from its public training code).

[30] augments with a random rescale, a random crop, a horizontal flip and keeping a
random 5-100% of the points. Rescaling and flipping change the descriptors themselves
(SIFT of a mirrored image is not a permuted SIFT), so those two are done on the images
before feature extraction (:func:`variant_sets`; the caller extracts features of
every variant once, cached); crops and keypoint dropping are drawn per sample here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from skimage.transform import rescale

from vispriv.harness import Images
from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release.inversion.featuremap import SparseFeatures, flat_pixel_index


def variant_sets(images: Images, scales: tuple[float, ...], flip: bool) -> list[Images]:
    """One :class:`Images` per (scale, flip) variant of ``images`` (ids suffixed)."""
    out = []
    for s in scales:
        base = images.images
        if s != 1.0:
            base = np.stack(
                [rescale(im, s, channel_axis=-1, anti_aliasing=s < 1, preserve_range=True) for im in images.images]
            ).astype(np.float32)
        out.append(Images(np.clip(base, 0, 1), [f"{i}@{s:g}" for i in images.ids]))
        if flip:
            out.append(Images(np.ascontiguousarray(base[:, :, ::-1]).clip(0, 1), [f"{i}@{s:g}f" for i in images.ids]))
    return out


class CropDataset(torch.utils.data.Dataset):
    """Random crops of public images with a random share of their keypoints.

    Sample ``idx`` is drawn from its own generator seeded by (seed, idx), so a training
    run is reproducible whatever the loader does.
    """

    def __init__(
        self,
        sets: list[tuple[Images, SparseFeatures]],
        crop: int,
        keep: tuple[float, float],
        color: bool,
        length: int,
        seed: int,
    ) -> None:
        self.crop, self.keep, self.length, self.seed = crop, keep, length, seed
        self.targets: list[np.ndarray] = []
        self.points: list[tuple[np.ndarray, np.ndarray]] = []
        for images, feats in sets:
            h, w = images.images.shape[1:3]
            if (h, w) != tuple(feats.image_size):
                raise InputError(f"features are for {feats.image_size} images but the images are {(h, w)}")
            if h < crop or w < crop:
                continue
            pix = feats.pixels()
            order = np.argsort(feats.image_index, kind="stable")
            bounds = np.searchsorted(feats.image_index[order], np.arange(len(images.images) + 1))
            for i, img in enumerate(images.images):
                rows = order[bounds[i] : bounds[i + 1]]
                if color and img.shape[-1] != 3:
                    raise InputError("color=True needs RGB training images")
                target = img if color else img.mean(axis=-1, keepdims=True)
                self.targets.append(np.ascontiguousarray(target.transpose(2, 0, 1), dtype=np.float32))
                self.points.append((pix[rows], feats.features[rows]))
        if not self.targets:
            raise InputError(f"no training image is at least {crop}x{crop} pixels; lower crop")
        self.channels = sets[0][1].channels

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, idx: int) -> dict[str, Any]:
        rng = np.random.default_rng([self.seed, idx])
        j = int(rng.integers(len(self.targets)))
        target = self.targets[j]
        pix, feats = self.points[j]
        _, h, w = target.shape
        top = int(rng.integers(h - self.crop + 1))
        left = int(rng.integers(w - self.crop + 1))
        inside = (pix[:, 0] >= top) & (pix[:, 0] < top + self.crop) & (pix[:, 1] >= left) & (pix[:, 1] < left + self.crop)
        rows = np.flatnonzero(inside)
        share = rng.uniform(*self.keep)
        rows = rows[rng.random(len(rows)) < share]
        return {
            "target": torch.from_numpy(target[:, top : top + self.crop, left : left + self.crop].copy()),
            "features": torch.from_numpy(feats[rows]),
            "rows": pix[rows, 0] - top,
            "cols": pix[rows, 1] - left,
        }


def collate(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Stack targets; concatenate features with flat pixel indices into the batch map."""
    target = torch.stack([s["target"] for s in samples])
    _, _, h, w = target.shape
    batch = np.concatenate([np.full(len(s["rows"]), b) for b, s in enumerate(samples)]).astype(np.int64)
    rows = np.concatenate([s["rows"] for s in samples]).astype(np.int64)
    cols = np.concatenate([s["cols"] for s in samples]).astype(np.int64)
    return {
        "target": target,
        "features": torch.cat([s["features"] for s in samples]),
        "index": torch.from_numpy(flat_pixel_index(batch, rows, cols, h, w)),
    }
