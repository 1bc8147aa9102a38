"""``invert-patches`` (Weinzaepfel et al., CVPR 2011; issue 12): exact reconstruction when the
database holds the image's own patches, its use as an attack, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from skimage.filters import gaussian
from skimage.metrics import structural_similarity

from vispriv.harness import Cache, CellContext, Images
from vispriv.harness.errors import InputError
from vispriv.plugins.attacks.patch_inversion import InvertPatches
from vispriv.plugins.descriptor_release.patches import build_patch_database, nearest_patches, paste_patches
from vispriv.plugins.descriptor_release.payloads import DescriptorPublic, LdpFeatures
from vispriv.plugins.descriptor_release.sift import SiftConfig, extract_features

SIZE = 96
SIFT = SiftConfig(max_keypoints=300)


def synthetic(seed: int) -> np.ndarray:
    """A textured grey image: smoothed noise at two scales plus a few bright discs."""
    rng = np.random.default_rng(seed)
    img = gaussian(rng.random((SIZE, SIZE)), 3) * 2 + gaussian(rng.random((SIZE, SIZE)), 1.2)
    yy, xx = np.mgrid[:SIZE, :SIZE]
    for cx, cy, r in rng.uniform([10, 10, 4], [SIZE - 10, SIZE - 10, 12], (6, 3)):
        img += 0.5 * ((xx - cx) ** 2 + (yy - cy) ** 2 < r**2)
    img = (img - img.min()) / (img.max() - img.min())
    return img.astype(np.float32)[..., None]


@pytest.fixture(scope="module")
def own_database():
    image = Images(synthetic(0)[None], ["s0"])
    return image, build_patch_database([image], SIFT, patch_size=32)


def ssim_on_support(truth: np.ndarray, estimate: np.ndarray, support: np.ndarray) -> float:
    _, full = structural_similarity(truth, estimate, data_range=1.0, full=True)
    return float(full[support].mean())


def test_image_whose_patches_are_in_the_database_is_reconstructed_on_the_keypoints_support(own_database):
    image, db = own_database
    assert len(db.descriptors) >= 20
    patches, dist = nearest_patches(db, db.descriptors)
    assert np.allclose(dist, 0.0, atol=1e-3)
    index = np.zeros(len(db.lafs), np.int64)
    recon, coverage = paste_patches(db.lafs, patches, index, 1, (SIZE, SIZE))
    support = coverage[0] > 0.05
    assert support.mean() > 0.3
    truth = image.images[0, ..., 0]
    assert ssim_on_support(truth, recon[0, ..., 0], support) > 0.9
    # the same pasting with the patches shuffled between keypoints must not score so (the test can fail)
    shuffled = patches[np.random.default_rng(0).permutation(len(patches))]
    wrong, _ = paste_patches(db.lafs, shuffled, index, 1, (SIZE, SIZE))
    assert ssim_on_support(truth, wrong[0, ..., 0], support) < 0.6


def public_scene(images: np.ndarray) -> DescriptorPublic:
    imgs = Images(images, [f"p{i}" for i in range(len(images))])
    return DescriptorPublic(lifting=imgs, public=imgs, sift=SIFT)


def ctx_for(tmp_path):
    return CellContext(seed=0, cache=Cache(tmp_path / "cache"), artifact_dir=tmp_path / "art", quiet=True)


def test_attack_reconstructs_raw_and_ldp_releases_and_writes_its_grid(tmp_path):
    public = public_scene(np.stack([synthetic(s) for s in (1, 2, 3)]))
    private = Images(np.stack([synthetic(4), synthetic(5)]), ["a", "b"])
    raw = extract_features(private, SIFT)
    ctx = ctx_for(tmp_path)
    out = InvertPatches().attack(raw, public, ctx)
    est = out.estimate["images"]
    assert est.images.shape == (2, SIZE, SIZE, 1) and est.ids == ["a", "b"]
    assert np.isfinite(est.images).all() and est.images.std() > 0.01
    assert out.metrics["database_rows"] > 0 and 0 < out.metrics["covered_share"] <= 1
    assert (tmp_path / "art" / "invert-patches_reconstructions.png").exists()
    cands = np.stack([raw.descriptors, raw.descriptors[::-1]], axis=1)
    ldp = LdpFeatures(raw.keypoints, raw.image_index, raw.image_ids, raw.image_size, candidates=cands)
    ldp_est = InvertPatches().attack(ldp, public, ctx).estimate["images"]
    assert ldp_est.images.shape == est.images.shape and not np.allclose(ldp_est.images, est.images)


def test_bad_input_gets_one_clear_error_each(tmp_path):
    public = public_scene(np.stack([synthetic(1)]))
    private = Images(synthetic(4)[None], ["a"])
    raw = extract_features(private, SIFT)
    ctx = ctx_for(tmp_path)
    empty = type(raw)(np.zeros((0, 2)), np.zeros(0, np.int64), ["a"], raw.image_size)
    with pytest.raises(InputError, match="no keypoints"):
        InvertPatches().attack(empty, public, ctx)
    outside = type(raw)(raw.keypoints + SIZE, raw.image_index, raw.image_ids, raw.image_size, descriptors=raw.descriptors)
    with pytest.raises(InputError, match="outside the 96x96 image"):
        InvertPatches().attack(outside, public, ctx)
    flat = public_scene(np.full((2, SIZE, SIZE, 1), 0.5, np.float32))
    with pytest.raises(InputError, match="patch database is empty"):
        InvertPatches().attack(raw, flat, ctx)
    with pytest.raises(InputError, match="needs RawFeatures or LdpFeatures"):
        InvertPatches().attack(private, public, ctx)
