"""``invert-patches``: training-free image inversion from local descriptors.

After Weinzaepfel, Jégou and Pérez, "Reconstructing an image from its local descriptors",
CVPR 2011: each released keypoint gets the patch of its nearest public descriptor (a
database of (SIFT descriptor, normalised patch) built from the scene's public images with
the scene's SIFT settings), warped back to the keypoint and blended; holes are filled. The
pieces (database, faiss search, warping, blending, filling) and their choices are in
:mod:`vispriv.plugins.descriptor_release.patches`.

It consumes raw features (``RawFeatures``), so it is also the second stage of the
recovery chains (``chain: [database, invert-patches]``, ``[clustering, ...]``,
``[nearest, ...]``), and LDP-Feat releases (``LdpFeatures``): choice, each of the m
candidates retrieves its nearest patch and the m patches are averaged (the true
descriptor's patch gets weight 1/m; a vote would need a patch-level consensus the paper
does not define).

Keypoint geometry: the paper pastes at the keypoint's scale and orientation. When the
release carries per-keypoint ``scales`` (px, LAF scale) and ``orientations`` (degrees)
they are used; today's payloads carry only the centres, so the attack then pastes at
``keypoint_scale`` (default: the median LAF scale of the public keypoints) with
orientation 0 -- a documented weakness of today's release format, not of the method.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from vispriv.harness import Attack, AttackResult, Cache, CellContext, Images, Payload, PluginConfig
from vispriv.harness.artifacts import save_image_grid
from vispriv.harness.errors import InputError
from vispriv.harness.hashing import fingerprint
from vispriv.plugins.attacks.baselines import public_mean_brightness
from vispriv.plugins.descriptor_release.config import SiftConfig, scene_sift
from vispriv.plugins.descriptor_release.datasets import SCENARIO, scene_public
from vispriv.plugins.descriptor_release.patches import PATCHES_VERSION, PatchDatabase
from vispriv.plugins.descriptor_release.payloads import DescriptorPublic, LdpFeatures, RawFeatures


class InvertPatchesConfig(PluginConfig):
    """Database, retrieval, pasting and filling settings of ``invert-patches``."""

    sift: SiftConfig | None = Field(None, description="SIFT of the public images; None = the scene's (DescriptorPublic.sift)")
    public_sets: tuple[Literal["public", "lifting"], ...] = Field(
        ("public", "lifting"), min_length=1, description="public image sets the patch database is built from")
    patch_size: int = Field(32, ge=4, le=128, description="side (px) of a normalised database patch")
    support: float = Field(1.0, gt=0.0, le=4.0, description="patch side in units of the keypoint frame (1 = SIFT's descriptor region)")
    neighbours: int = Field(1, ge=1, le=64, description="k nearest database rows whose patches are averaged")
    keypoint_scale: float | None = Field(None, gt=0.0, description="LAF scale (px) for releases without per-keypoint scales; None = public median")
    blend_sigma: float = Field(0.5, gt=0.0, description="Gaussian blending window, in the patch's [-1, 1] coordinates")
    fill: Literal["diffusion", "biharmonic"] = "diffusion"
    grid_images: int = Field(8, ge=1, description="reconstructions shown in the PNG grid")


def patch_database(public: DescriptorPublic, sets: tuple[str, ...], sift: SiftConfig, patch_size: int, support: float,
                   cache: Cache | None = None) -> PatchDatabase:
    """The public patch database of the named image sets, cached by content."""
    from vispriv.plugins.descriptor_release.patches import build_patch_database

    images = [getattr(public, s) for s in sets]
    parts = {"version": PATCHES_VERSION, "sift": sift, "patch_size": patch_size, "support": support,
             "images": [fingerprint(i.images) for i in images]}

    def compute() -> dict[str, np.ndarray]:
        db = build_patch_database(images, sift, patch_size, support)
        return {"descriptors": db.descriptors, "patches": db.patches, "lafs": db.lafs}

    arrays = (cache or Cache(None)).arrays("patch-database", parts, compute)
    return PatchDatabase(arrays["descriptors"], arrays["patches"], arrays["lafs"])


def _check_keypoints(release: RawFeatures | LdpFeatures) -> None:
    if release.n_keypoints == 0:
        raise InputError("invert-patches: the release has no keypoints; there is nothing to paste patches at")
    h, w = release.image_size
    k = release.keypoints
    outside = (k[:, 0] < 0) | (k[:, 0] > w - 1) | (k[:, 1] < 0) | (k[:, 1] > h - 1)
    if outside.any():
        i = int(np.flatnonzero(outside)[0])
        raise InputError(f"invert-patches: {int(outside.sum())} keypoints lie outside the {h}x{w} image "
                         f"(first: x={k[i, 0]:.1f}, y={k[i, 1]:.1f}); keypoints must be (x, y) pixels inside it")


class InvertPatches(Attack):
    """Nearest public patch per released descriptor, warped back and blended (Weinzaepfel et al., CVPR 2011)."""

    name = "invert-patches"
    version = "1.0"
    scenario = SCENARIO
    description = "training-free inversion: nearest public patch per descriptor, pasted and blended (Weinzaepfel et al. 2011)"
    consumes = (RawFeatures, LdpFeatures)
    produces = (Images,)
    Config = InvertPatchesConfig
    config: InvertPatchesConfig

    def attack(self, release: Payload, public: object, ctx: CellContext) -> AttackResult:
        from vispriv.plugins.descriptor_release.patches import (
            fill_holes,
            lafs_from_geometry,
            nearest_patches,
            paste_patches,
        )

        if not isinstance(release, self.consumes):
            raise InputError(f"invert-patches needs RawFeatures or LdpFeatures; got {type(release).__name__}")
        cfg = self.config
        pub = scene_public(public)
        _check_keypoints(release)
        db = patch_database(pub, cfg.public_sets, scene_sift(cfg.sift, pub), cfg.patch_size, cfg.support, ctx.cache)
        if isinstance(release, LdpFeatures):
            queries = release.candidates.reshape(-1, release.candidates.shape[-1])
            patches, dist = nearest_patches(db, queries, cfg.neighbours)
            patches = patches.reshape(release.n_keypoints, release.m, *patches.shape[1:]).mean(axis=1)
        else:
            patches, dist = nearest_patches(db, release.descriptors, cfg.neighbours)
        k = release.n_keypoints
        scales = getattr(release, "scales", None)
        if scales is None:
            scales = np.full(k, cfg.keypoint_scale or float(np.median(db.scales)), np.float32)
        angles = getattr(release, "orientations", None)
        angles = np.zeros(k, np.float32) if angles is None else angles
        lafs = lafs_from_geometry(release.keypoints, scales, angles)
        n = len(release.image_ids)
        images, coverage = paste_patches(lafs, patches, release.image_index, n, release.image_size, cfg.support, cfg.blend_sigma)
        images = fill_holes(images, coverage, public_mean_brightness(pub), cfg.fill)
        if ctx.artifact_dir is not None:
            shown = cfg.grid_images
            save_image_grid(ctx.artifact(f"{self.name}_reconstructions.png"),
                            [np.clip(coverage[:shown, ..., None], 0, 1), images[:shown]],
                            ["patch coverage", "reconstruction"], release.image_ids[:shown])
        metrics = {"keypoints_per_image": k / max(n, 1), "database_rows": float(len(db.descriptors)),
                   "neighbour_distance": float(dist[:, 0].mean()), "covered_share": float(np.mean(coverage >= 1e-3))}
        return AttackResult(estimate={"images": Images(images, list(release.image_ids))}, metrics=metrics,
                            metric_directions={"neighbour_distance": False, "covered_share": True})
