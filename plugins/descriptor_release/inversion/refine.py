"""Refinement by descriptor matching: the image whose SIFT at the released frames is the released SIFT.

The U-Net of :mod:`.train` maps features to an image through a prior learned from a few
public photos; it does not check its output against the release. This stage does: it
starts from the network's estimate ``x0`` and minimises, by Adam on the pixels,

    E(x) = 1/K sum_k || f_k(x) - d_k ||^2  +  prior_weight * mean (x - x0)^2  +  tv_weight * TV(x)

where ``d_k`` is keypoint k's released (or recovered) descriptor and ``f_k(x)`` the SIFT
descriptor of ``x`` at keypoint k's frame (its released location, scale and orientation),
computed differentiably (:func:`sift_at_frames`). This is inversion by optimisation with a
total-variation regulariser as Mahendran and Vedaldi, "Understanding deep image
representations by inverting them" (CVPR 2015) do for dense SIFT and HOG, here on sparse
keypoints and started from the learned estimate, whose brightness and low frequencies SIFT
cannot give (a descriptor is invariant to an affine change of intensity).

Choices (all in :class:`~.config.RefineConfig`):

* **Descriptor.** ``f_k`` samples a ``patch_size`` x ``patch_size`` grid of the keypoint's
  frame (kornia's LAF, the grid kornia's scale-space SIFT uses: cell centres
  ``(2 i + 1) / P - 1`` of [-1, 1]) bilinearly from the image and describes it with
  ``kornia.feature.SIFTDescriptor`` (plain L2 SIFT, clipped at 0.2 and re-normalised). The
  release was described by kornia's pyramid backend on a Gaussian scale space instead;
  on Table 1's test crops the two agree to a median cosine of .91 at ``patch_size`` 16
  (tests/inversion/test_refine.py checks >= .85 on a bundled photo), so ``f`` is a close,
  differentiable proxy, not the released extractor itself.
* **Regularisers.** Without them the optimiser drives the descriptor term far below the
  truth's own value with high-frequency texture (docs/inversion.md, 'Step count and regularisation'): the prior
  term keeps what the network knows (brightness, which SIFT does not carry), TV
  (``kornia.losses.total_variation``, anisotropic, ``reduction="mean"``: the mean absolute
  vertical plus the mean absolute horizontal difference) suppresses the texture.
* **Grey.** SIFT sees luminance: a colour estimate is refined in its channel mean and the
  change added to every channel.
* Images without any keypoint are returned unchanged; images are optimised in chunks of
  at most ``chunk_keypoints`` keypoints (all of a chunk's images in one batch).

**What the attacker knows of d_k** (:class:`SiftTargets`). The data term above is the case
of one known descriptor per keypoint (raw SIFT, or a recovery attack's estimate). Two other
readings of a release give a term of the same kind:

* a *candidate set* ``C_k`` that holds d_k or a descriptor near it (the k cluster candidates
  of the clustering attack, section 4.2; the m LDP-Feat candidates, section 5): the term
  ``min_{c in C_k} ||f_k(x) - c||^2`` lets the image pick the candidate its own SIFT agrees
  with (a point set of one candidate is the plain term);
* the released *affine subspace* ``D_k`` (offset o_k, orthonormal basis B_k; LDP-Feat (ICCV 2023)
  section 3): d_k lies on D_k exactly, so ``dist(f_k(x), D_k)^2 = ||r||^2 - ||B_k r||^2``
  with ``r = f_k(x) - o_k`` (the point-to-subspace distance of section 4, Eq. (1)'s
  denominator squared) is zero at the truth. It needs no recovery at all (the DIA threat
  model) and, beside a recovered point, keeps wrong recoveries from pulling the image off
  the subspace.

Both terms may be present; the subspace term is weighted by ``subspace_weight``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from vispriv.harness import Progress, no_progress
from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release.inversion.config import RefineConfig
from vispriv.plugins.descriptor_release.payloads import DESCRIPTOR_DIM

if TYPE_CHECKING:
    import torch

__all__ = ["RefineConfig", "SiftTargets", "descriptor_loss", "refine_to_descriptors", "sift_at_frames"]


@lru_cache(maxsize=4)
def _sift_descriptor(patch_size: int) -> torch.nn.Module:
    import kornia.feature as KF

    return KF.SIFTDescriptor(patch_size, rootsift=False).eval().requires_grad_(False)


def _frame_grid(lafs: torch.Tensor, image_index: torch.Tensor, height: int, n_images: int, width: int, size: int) -> torch.Tensor:
    """grid_sample coordinates (1, K * size, size, 2) of each frame's size x size grid in the
    images stacked vertically (one atlas), clamped to the keypoint's own image."""
    import torch

    q = (2.0 * torch.arange(size, dtype=lafs.dtype) + 1.0) / size - 1.0
    yy, xx = torch.meshgrid(q, q, indexing="ij")
    local = torch.stack([xx, yy], -1)
    pts = torch.einsum("kij,xyj->kxyi", lafs[:, :, :2], local) + lafs[:, None, None, :, 2]
    x = pts[..., 0].clamp(0.0, width - 1.0)
    y = pts[..., 1].clamp(0.0, height - 1.0) + (image_index * height)[:, None, None].to(lafs.dtype)
    atlas_h = n_images * height
    grid = torch.stack([2.0 * (x + 0.5) / width - 1.0, 2.0 * (y + 0.5) / atlas_h - 1.0], -1)
    return grid.reshape(1, -1, size, 2)


def sift_at_frames(images: torch.Tensor, lafs: torch.Tensor, image_index: torch.Tensor, patch_size: int = 16) -> torch.Tensor:
    """(K, 128) L2 SIFT descriptors of grey ``images`` (N, 1, H, W) at the frames ``lafs``
    (K, 2, 3; kornia LAFs in pixels) of image ``image_index`` (K,); differentiable in ``images``."""
    import torch.nn.functional as F

    n, _, h, w = images.shape
    grid = _frame_grid(lafs, image_index, h, n, w, patch_size)
    atlas = images.reshape(1, 1, n * h, w)
    patches = F.grid_sample(atlas, grid, mode="bilinear", padding_mode="border", align_corners=False)
    return _sift_descriptor(patch_size)(patches.reshape(-1, 1, patch_size, patch_size))


def descriptor_loss(images: torch.Tensor, lafs: torch.Tensor, image_index: torch.Tensor, targets: SiftTargets,
                    patch_size: int) -> torch.Tensor:
    """Mean over the keypoints of :meth:`SiftTargets.data_term` of ``f_k(images)`` (the refinement's data term);
    ``lafs``, ``image_index`` and ``targets`` are row for row."""
    return targets.data_term(sift_at_frames(images, lafs, image_index, patch_size)).mean()


@dataclass
class SiftTargets:
    """What the attacker knows of each keypoint's descriptor (module docstring): a candidate set
    ``candidates`` (K, C, 128) -- C = 1 for a known or recovered descriptor -- and/or the affine
    subspace ``offsets`` (K, 128) + orthonormal ``bases`` (K, m, 128) that holds it."""

    candidates: np.ndarray | None = None
    offsets: np.ndarray | None = None
    bases: np.ndarray | None = None
    subspace_weight: float = 1.0

    def __post_init__(self) -> None:
        if self.candidates is None and self.offsets is None:
            raise InputError("refinement needs descriptors, candidates or subspaces to match")
        if (self.offsets is None) != (self.bases is None):
            raise InputError("refinement: subspace offsets and bases come together")
        if self.candidates is not None:
            c = np.array(self.candidates, np.float32)  # a copy: releases are read-only
            self.candidates = c[:, None] if c.ndim == 2 else c
            if self.candidates.ndim != 3 or self.candidates.shape[-1] != DESCRIPTOR_DIM:
                raise InputError(f"refinement needs ({DESCRIPTOR_DIM})-d descriptors (K, {DESCRIPTOR_DIM}) or candidate "
                                 f"sets (K, C, {DESCRIPTOR_DIM}); got shape {np.shape(c)}")
        if self.offsets is not None:
            self.offsets = np.array(self.offsets, np.float32)
            self.bases = np.array(self.bases, np.float32)
            if self.offsets.shape[-1] != DESCRIPTOR_DIM or self.bases.ndim != 3 or self.bases.shape[-1] != DESCRIPTOR_DIM \
                    or len(self.bases) != len(self.offsets):
                raise InputError(f"refinement: subspaces need offsets (K, {DESCRIPTOR_DIM}) and bases (K, m, "
                                 f"{DESCRIPTOR_DIM}); got {self.offsets.shape} and {self.bases.shape}")
        if self.candidates is not None and self.offsets is not None and len(self.candidates) != len(self.offsets):
            raise InputError(f"refinement: {len(self.candidates)} candidate sets but {len(self.offsets)} subspaces")

    def __len__(self) -> int:
        return len(self.candidates if self.candidates is not None else self.offsets)

    def take(self, rows: np.ndarray) -> SiftTargets:
        """The targets of keypoints ``rows`` only (one copy per refinement chunk, not per step)."""
        def pick(a: np.ndarray | None) -> np.ndarray | None:
            return None if a is None else a[rows]

        return SiftTargets(pick(self.candidates), pick(self.offsets), pick(self.bases), self.subspace_weight)

    def data_term(self, f: torch.Tensor, rows: np.ndarray | None = None) -> torch.Tensor:
        """(K,) squared distance of each keypoint's SIFT ``f`` (K, 128) to what is known of d_k
        (of keypoints ``rows``; ``None`` = all, without a copy)."""
        import torch

        def part(a: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(a if rows is None else a[rows])

        term = torch.zeros(len(f), dtype=f.dtype)
        if self.candidates is not None:
            term = term + (f[:, None, :] - part(self.candidates)).square().sum(-1).amin(dim=1)
        if self.offsets is not None:
            r = f - part(self.offsets)
            along = torch.einsum("kmd,kd->km", part(self.bases), r)
            term = term + self.subspace_weight * (r.square().sum(-1) - along.square().sum(-1)).clamp(min=0.0)
        return term


def _chunks(counts: np.ndarray, limit: int) -> list[np.ndarray]:
    """Consecutive groups of images with keypoints, each holding at most ``limit`` keypoints (or one image)."""
    groups: list[np.ndarray] = []
    current: list[int] = []
    total = 0
    for i in np.flatnonzero(counts):
        if current and total + counts[i] > limit:
            groups.append(np.array(current))
            current, total = [], 0
        current.append(int(i))
        total += int(counts[i])
    if current:
        groups.append(np.array(current))
    return groups


def _check(images: np.ndarray, keypoints: np.ndarray, scales: np.ndarray | None, orientations: np.ndarray | None,
           targets: SiftTargets, image_index: np.ndarray) -> None:
    if images.ndim != 4:
        raise InputError(f"refinement needs images (N, H, W, C); got shape {images.shape}")
    if scales is None or orientations is None:
        raise InputError("refinement by descriptor matching needs each keypoint's scale and orientation; "
                         "the release carries none (set the attack's refine: {steps: 0})")
    k = len(keypoints)
    if not (len(scales) == len(orientations) == len(targets) == len(image_index) == k):
        raise InputError("refinement: keypoints, scales, orientations, descriptors and image_index differ in length")
    if k and (image_index.min() < 0 or image_index.max() >= len(images)):
        raise InputError(f"refinement: image_index outside 0..{len(images) - 1}")


def refine_to_descriptors(
    images: np.ndarray,
    keypoints: np.ndarray,
    scales: np.ndarray | None,
    orientations: np.ndarray | None,
    descriptors: np.ndarray | SiftTargets,
    image_index: np.ndarray,
    cfg: RefineConfig,
    progress: Progress = no_progress,
) -> tuple[np.ndarray, dict[str, float]]:
    """``images`` (N, H, W, C) in [0, 1] refined so that their SIFT at the keypoints' frames
    matches ``descriptors`` (K, 128) -- or, more generally, the candidate sets and/or subspaces
    of a :class:`SiftTargets` (module docstring); returns the images and
    ``{descriptor_loss_before, descriptor_loss_after}`` (keypoint-weighted means of the first
    and last step's data term)."""
    import torch
    from kornia.losses import total_variation

    from vispriv.plugins.descriptor_release.patches import lafs_from_geometry

    images = np.asarray(images, np.float32)
    targets = descriptors if isinstance(descriptors, SiftTargets) else SiftTargets(candidates=descriptors)
    _check(images, keypoints, scales, orientations, targets, image_index)
    out = images.copy()
    if cfg.steps == 0 or len(keypoints) == 0:
        return out, {}
    lafs_all = torch.from_numpy(lafs_from_geometry(keypoints, scales, orientations))
    counts = np.bincount(image_index, minlength=len(images))
    chunks = _chunks(counts, cfg.chunk_keypoints)
    grey = images.mean(axis=-1)
    before = after = 0.0
    steps = range(cfg.steps * len(chunks))
    ticks = iter(progress(steps, "refine (descriptor matching)", len(steps)))
    for chunk in chunks:
        rows = np.flatnonzero(np.isin(image_index, chunk))
        local = torch.from_numpy(np.searchsorted(chunk, image_index[rows]))
        lafs, part = lafs_all[rows], targets.take(rows)
        ref = torch.from_numpy(grey[chunk])[:, None]
        x = ref.clone().requires_grad_(True)
        opt = torch.optim.Adam([x], lr=cfg.lr)

        for step in range(cfg.steps):
            next(ticks, None)
            opt.zero_grad()
            data = descriptor_loss(x, lafs, local, part, cfg.patch_size)
            prior = ((x - ref) ** 2).mean()
            tv = total_variation(x, reduction="mean").mean()
            (data + cfg.prior_weight * prior + cfg.tv_weight * tv).backward()
            opt.step()
            with torch.no_grad():
                x.clamp_(0.0, 1.0)
            if step == 0:
                before += float(data.detach()) * len(rows)
        with torch.no_grad():
            after += float(descriptor_loss(x, lafs, local, part, cfg.patch_size)) * len(rows)
        change = (x.detach()[:, 0] - ref[:, 0]).numpy()[..., None]
        out[chunk] = np.clip(images[chunk] + change, 0.0, 1.0)
    for _ in ticks:  # close the progress bar
        pass
    return out, {"descriptor_loss_before": before / len(keypoints), "descriptor_loss_after": after / len(keypoints)}
