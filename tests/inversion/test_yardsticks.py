"""Yardsticks of the inversion tables: flat-grey, oracle-flat, blur-equivalent (issue 12)."""

from __future__ import annotations

import numpy as np
import pytest
from skimage import data
from skimage.filters import gaussian
from skimage.transform import resize

from vispriv.harness import Cache, CellContext, Images
from vispriv.harness.errors import InputError
from vispriv.plugins.attacks.baselines import FlatGrey
from vispriv.plugins.descriptor_release.payloads import DescriptorPublic, RawFeatures
from vispriv.plugins.metrics.blur_equivalent import BlurEquivalent, OracleFlat, blur_equivalent
from vispriv.plugins.metrics.image_quality import _ssim


@pytest.fixture(scope="module")
def camera() -> np.ndarray:
    return resize(data.camera(), (96, 96), anti_aliasing=True).astype(np.float32)[..., None]


def test_blur_equivalent_of_a_sigma_2_blur_is_about_2(camera):
    blurred = gaussian(camera, sigma=2.0, channel_axis=-1, preserve_range=True)
    assert blur_equivalent(camera, _ssim(camera, blurred)) == pytest.approx(2.0, abs=0.05)


def test_blur_equivalent_of_the_truth_itself_is_0(camera):
    assert blur_equivalent(camera, _ssim(camera, camera)) == 0.0


def test_blur_equivalent_of_a_flat_image_is_the_cap(camera):
    flat = np.full_like(camera, camera.mean())
    assert blur_equivalent(camera, _ssim(camera, flat), max_sigma=16.0) == 16.0


def test_blur_equivalent_metric_reports_median_capped_share_and_csv(camera, tmp_path):
    truth = Images(np.stack([camera, camera]), ["a", "b"])
    est = Images(np.stack([gaussian(camera, sigma=3.0, channel_axis=-1, preserve_range=True), np.full_like(camera, 0.5)]), ["a", "b"])
    ctx = CellContext(seed=0, cache=Cache(None), artifact_dir=tmp_path, quiet=True)
    out = BlurEquivalent(BlurEquivalent.Config(max_sigma=16.0)).score(truth, est, ctx)
    assert out["blur_equivalent_capped"] == 0.5
    assert out["blur_equivalent_px"] == pytest.approx((3.0 + 16.0) / 2, abs=0.1)
    rows = (tmp_path / "blur_equivalent_per_image.csv").read_text().splitlines()
    assert len(rows) == 3 and rows[0].startswith("id")


def test_oracle_flat_is_the_ssim_of_each_images_own_mean_and_labelled_oracle(camera):
    other = camera[::-1].copy() * 0.5
    truth = Images(np.stack([camera, other]), ["a", "b"])
    out = OracleFlat().score(truth, truth, CellContext(seed=0, cache=Cache(None), quiet=True))
    expected = np.mean([_ssim(camera, np.full_like(camera, camera.mean())), _ssim(other, np.full_like(other, other.mean()))])
    assert out["oracle_flat_ssim"] == pytest.approx(expected)
    assert "ORACLE" in OracleFlat.description


def test_flat_grey_is_the_public_mean_brightness(camera):
    public_imgs = Images(np.stack([np.full((40, 40, 3), 0.2, np.float32), np.full((40, 40, 3), 0.6, np.float32)]), ["p0", "p1"])
    public = DescriptorPublic(lifting=public_imgs, public=public_imgs)
    release = RawFeatures(np.zeros((0, 2)), np.zeros(0, np.int64), ["x", "y"], (32, 48))
    est = FlatGrey().attack(release, public, CellContext(seed=0, cache=Cache(None), quiet=True)).estimate["images"]
    assert est.images.shape == (2, 32, 48, 1) and est.ids == ["x", "y"]
    assert np.allclose(est.images, 0.4)
    with pytest.raises(InputError, match="keypointed features"):
        FlatGrey().attack(public_imgs, public, CellContext(seed=0, cache=Cache(None), quiet=True))
