"""The inversion attacks as plugins: estimates, the shared cache, artifacts, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from vispriv.harness import Cache, CellContext, Images
from vispriv.harness.artifacts import spread_indices
from vispriv.harness.errors import InputError
from vispriv.plugins.attacks.inversion import Dia, InvertLdp, InvertRaw, MeanImage
from vispriv.plugins.descriptor_release.payloads import DescriptorPublic, LdpFeatures, LiftedFeatures, RawFeatures
from vispriv.plugins.descriptor_release.sift import SiftConfig, extract_features
from vispriv.plugins.descriptor_release.splits import load_split
from vispriv.plugins.descriptor_release.subspace import lift
from vispriv.plugins.metrics.inversion_report import ReconstructionReport

SIZE = 64
NET = {"crop": 32, "depth": 2, "width": 8, "max_width": 16, "projection": 8, "batch_size": 2, "steps": 3, "flip": False}
SIFT = SiftConfig(max_keypoints=200)


@pytest.fixture(scope="module")
def scene():
    test = load_split("test", SIZE)
    public = DescriptorPublic(lifting=load_split("lifting", SIZE), public=load_split("public", SIZE))
    return test, public, extract_features(test, SIFT)


def ctx_for(tmp_path):
    return CellContext(seed=0, cache=Cache(tmp_path / "cache"), artifact_dir=tmp_path / "art", quiet=True)


def raw_attack(**extra):
    """InvertRaw with the tiny network; 3 refinement steps (the stage runs, its result is tested in test_refine*)."""
    return InvertRaw(InvertRaw.Config(sift=SIFT, network=NET, train_on=("public",), refine={"steps": 3}, **extra))


def test_invert_raw_estimates_every_image_and_second_run_loads_the_checkpoint(scene, tmp_path):
    test, public, raw = scene
    ctx = ctx_for(tmp_path)
    first = raw_attack().attack(raw, public, ctx)
    est = first.estimate["images"]
    assert est.images.shape == (len(test.ids), SIZE, SIZE, 1)
    assert est.ids == test.ids
    assert first.metrics["trained"] == 1.0 and first.metrics["train_images_per_second"] > 0
    assert first.metrics["keypoints_per_image"] == pytest.approx(raw.n_keypoints / len(test.ids))
    assert (tmp_path / "art" / "invert-raw_reconstructions.png").stat().st_size > 0
    second = raw_attack().attack(raw, public, ctx)
    assert second.metrics["trained"] == 0.0
    np.testing.assert_allclose(second.estimate["images"].images, est.images, atol=1e-6)
    # a user-supplied checkpoint is used as is; a lifted release does not fit its channels
    path = next((ctx.cache.root / "inversion-net").glob("*.ckpt"))
    third = raw_attack(checkpoint=str(path)).attack(raw, public, CellContext(seed=0, quiet=True))
    np.testing.assert_allclose(third.estimate["images"].images, est.images, atol=1e-6)
    lifted = _lifted(raw, 2)
    dia = Dia(Dia.Config(sift=SIFT, network=NET, train_on=("public",), checkpoint=str(path), mode="random"))
    with pytest.raises(InputError, match="387 channels but the inversion network expects 131"):
        dia.attack(lifted, public, CellContext(seed=0, quiet=True))


def test_bad_public_and_release_types(scene, tmp_path):
    _, public, raw = scene
    with pytest.raises(InputError, match="DescriptorPublic"):
        raw_attack().attack(raw, Images(np.zeros((1, 64, 64, 3))), ctx_for(tmp_path))
    with pytest.raises(InputError, match="needs RawFeatures"):
        raw_attack().attack(_lifted(raw, 2), public, ctx_for(tmp_path))
    with pytest.raises(InputError, match="not found"):
        raw_attack(checkpoint=str(tmp_path / "nope.ckpt")).attack(raw, public, ctx_for(tmp_path))


def _lifted(raw, m):
    lifting = lift(raw.descriptors, m, "random", np.random.default_rng(0))
    return LiftedFeatures(**raw.keypoint_fields(), offsets=lifting.offsets, bases=lifting.bases)


def test_dia_reads_offset_and_basis_channels(scene, tmp_path):
    test, public, raw = scene
    attack = Dia(Dia.Config(sift=SIFT, network=NET, train_on=("public",), mode="random", refine={"steps": 3}))
    feats = attack.release_features(_lifted(raw, 2))
    assert feats.channels == 3 * 128 + 3  # offset, 2 basis vectors, scale/cos/sin
    result = attack.attack(_lifted(raw, 2), public, ctx_for(tmp_path))
    assert result.estimate["images"].images.shape == (len(test.ids), SIZE, SIZE, 1)


def test_invert_ldp_stacks_m_candidates(scene, tmp_path):
    test, public, raw = scene
    rng = np.random.default_rng(0)
    cands = rng.normal(size=(raw.n_keypoints, 2, 128)).astype(np.float32)
    release = LdpFeatures(**raw.keypoint_fields(), candidates=cands)
    attack = InvertLdp(InvertLdp.Config(sift=SIFT, network=NET, train_on=("public",), dictionary_size=16))
    feats = attack.release_features(release)
    assert feats.channels == 256 + 3
    np.testing.assert_array_equal(feats.features[:, 128:256], cands[:, 1])
    result = attack.attack(release, public, ctx_for(tmp_path))
    assert result.estimate["images"].images.shape == (len(test.ids), SIZE, SIZE, 1)


def test_mean_image_and_reconstruction_report(scene, tmp_path):
    test, public, raw = scene
    est = MeanImage().attack(raw, public, ctx_for(tmp_path)).estimate["images"]
    expected = public.public.images.mean(axis=-1).mean(axis=0)
    assert est.images.shape == (len(test.ids), SIZE, SIZE, 1)
    np.testing.assert_allclose(est.images[2, :, :, 0], expected, atol=1e-5)
    ctx = ctx_for(tmp_path)
    scores = ReconstructionReport().score(test, est, ctx)
    assert 0 <= scores["ssim_min"] <= scores["ssim_median"] < 1
    perfect = ReconstructionReport().score(test, Images(test.images.mean(-1, keepdims=True), test.ids), ctx)
    assert perfect["ssim_min"] == pytest.approx(1.0)
    assert (tmp_path / "art" / "reconstruction_grid.png").stat().st_size > 0
    assert (tmp_path / "art" / "reconstruction_per_image.csv").read_text().count("\n") == len(test.ids) + 1
    with np.load(tmp_path / "art" / "reconstruction_sample.npz") as sample:
        picked = spread_indices(len(test.ids), ReconstructionReport.max_grid)
        assert sample["ids"].tolist() == [test.ids[k] for k in picked]
        grey = np.round(test.images[picked].mean(axis=-1, keepdims=True) * 255)
        np.testing.assert_array_equal(sample["truth"], grey.astype(np.uint8))
        np.testing.assert_array_equal(sample["truth"], sample["estimate"])  # the last call's estimate was the truth


def test_networks_train_only_on_the_attackers_public_images_by_default(scene, tmp_path):
    """Issue 14 item 7: the lifting photos (behind W) are in no attack's threat model; training uses public images."""
    _, public, raw = scene
    ctx = ctx_for(tmp_path)
    for attack, release in ((InvertRaw(InvertRaw.Config(sift=SIFT, network=NET)), raw),
                            (Dia(Dia.Config(sift=SIFT, network=NET, mode="random")), _lifted(raw, 2))):
        sets = attack.training_sets(release, public, ctx)
        ids = [i for images, _feats in sets for i in images.ids]
        assert ids and all(i.startswith("public/") for i in ids)
        assert len(ids) == len(public.public.ids)  # flip off, one scale: each public image once
    granted = InvertRaw(InvertRaw.Config(sift=SIFT, network=NET, train_on=("public", "lifting")))
    ids = [i for images, _ in granted.training_sets(raw, public, ctx) for i in images.ids]
    assert sum(i.startswith("lifting/") for i in ids) == len(public.lifting.ids)  # only on explicit request


def test_geometry_channels_by_hand_and_switch():
    """log2(scale / 8), cos and sin of the orientation, times the gain; geometry: false drops them."""
    from vispriv.plugins.attacks.inversion import GEOMETRY_GAIN

    desc = np.eye(2, 128, dtype=np.float32)
    raw = RawFeatures(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([0, 0]), ["a"], (8, 8), desc,
                      scales=np.array([8.0, 32.0]), orientations=np.array([0.0, 90.0]))
    feats = InvertRaw(InvertRaw.Config(network=NET)).release_features(raw)
    np.testing.assert_allclose(feats.features[:, 128:], GEOMETRY_GAIN * np.array([[0, 1, 0], [2, 0, 1]]), atol=1e-6)
    np.testing.assert_array_equal(feats.features[:, :128], desc)
    assert InvertRaw(InvertRaw.Config(network=NET, geometry=False)).release_features(raw).channels == 128
    bare = RawFeatures(raw.keypoints, raw.image_index, ["a"], (8, 8), desc)
    with pytest.raises(InputError, match="geometry: false"):
        InvertRaw(InvertRaw.Config(network=NET)).release_features(bare)
    with pytest.raises(InputError, match="both or neither"):
        RawFeatures(raw.keypoints, raw.image_index, ["a"], (8, 8), desc, scales=np.array([8.0, 8.0]))
