"""hpatches: the native sequence layout, ground-truth homographies and the standard MMA / accuracy protocol."""

import numpy as np
import pytest
from dataset_layouts import write_hpatches

from vispriv.harness import Cache, CellContext, Images
from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release.hpatches import HPatches, HPatchesImages, to_original
from vispriv.plugins.descriptor_release.matching import MatchingConfig, evaluate_utility
from vispriv.plugins.descriptor_release.sift import SiftConfig

MATCHING = MatchingConfig(stereo=False, ransac_max_iter=20)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return write_hpatches(tmp_path_factory.mktemp("hp") / "hpatches-sequences-release")


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return CellContext(seed=0, cache=Cache(tmp_path_factory.mktemp("cache")), quiet=True)


def _utility(root, ctx, **cfg):
    scene = HPatches(HPatches.Config(root=str(root), size=64, **cfg)).load(ctx)
    return scene, evaluate_utility(scene.private, SiftConfig(), lambda r: r, MATCHING, 0, cache=ctx.cache)


def test_real_pairs_with_their_homographies_give_the_standard_metrics(root, ctx):
    scene, out = _utility(root, ctx)
    assert isinstance(scene.private, HPatchesImages) and scene.private.ids == ["i_astronaut", "v_coffee"]
    assert scene.private.images.shape == (2, 64, 64, 3)
    assert {f"hpatches_mma_{t}px" for t in range(1, 11)} <= set(out)
    assert {"hpatches_i_homography_acc_1px", "hpatches_v_homography_acc_5px", "hpatches_homography_acc"} <= set(out)
    # Raw SIFT on true warps of a photo: most matches are right and RANSAC finds every H.
    assert out["hpatches_v_homography_acc_5px"] == 1.0 and out["hpatches_i_homography_acc_3px"] == 1.0
    assert out["hpatches_mma_3px"] > 0.8
    # Five pairs per sequence: the overall number is the mean of the two splits; MMA grows with t.
    assert out["hpatches_mma_1px"] == pytest.approx((out["hpatches_i_mma_1px"] + out["hpatches_v_mma_1px"]) / 2)
    assert np.all(np.diff([out[f"hpatches_mma_{t}px"] for t in range(1, 11)]) >= 0)
    assert "stereo_n_matches" not in out and "hpatches_mma_1px" in out
    assert not [k for k in out if k.startswith("warp")]  # the benchmark's pairs, not synthetic warps


def test_synthetic_warps_of_other_images_are_not_logged_as_hpatches(root, ctx):
    """The same evaluator on plain images (random warps of the images themselves) says so: warp_*, never hpatches_*."""
    scene = HPatches(HPatches.Config(root=str(root), size=64)).load(ctx)
    plain = Images(scene.private.images, scene.private.ids)  # the same photos, but not the benchmark's pairs
    out = evaluate_utility(plain, SiftConfig(), lambda r: r, MatchingConfig(stereo=False, homographies_per_image=1), 0)
    assert {"warp_mma_3px", "warp_homography_acc", "warp_n_matches"} <= set(out)
    assert not [k for k in out if k.startswith("hpatches")]


def test_wrong_ground_truth_is_caught(root, ctx, tmp_path):
    """The metrics use the H files: shift every v_ homography by 20 px and nothing is correct at 5 px."""
    import shutil

    bad = tmp_path / "hp"
    shutil.copytree(root, bad)
    for k in range(2, 7):
        h = np.loadtxt(bad / "v_coffee" / f"H_1_{k}")
        np.savetxt(bad / "v_coffee" / f"H_1_{k}", np.array([[1, 0, 20], [0, 1, 0], [0, 0, 1]]) @ h)
    _, out = _utility(bad, ctx, sequences=["v_coffee"])
    assert out["hpatches_homography_acc_5px"] == 0.0 and out["hpatches_mma_5px"] < 0.05
    assert "hpatches_i_mma_1px" not in out


def test_resized_evaluation_reports_pixels_of_the_original_images(root, ctx):
    """With max_side the keypoints are mapped back: the homographies are still recovered within 5 px."""
    _, out = _utility(root, ctx, max_side=120, sequences=["v_coffee"])
    assert out["hpatches_homography_acc_5px"] >= 0.8
    # Pixel-centre convention: a half-size pixel 0 covers original pixels 0 and 1 (centre 0.5).
    assert np.allclose(to_original(np.array([[0.0, 0.0], [9.5, 4.5]]), (0.5, 0.5)), [[0.5, 0.5], [19.5, 9.5]])


def test_missing_h_file_is_one_line(root, tmp_path):
    import shutil

    bad = tmp_path / "hp"
    shutil.copytree(root, bad)
    (bad / "v_coffee" / "H_1_4").unlink()
    with pytest.raises(InputError) as err:
        HPatches(HPatches.Config(root=str(bad))).load(CellContext(cache=Cache(None)))
    assert str(err.value) == "hpatches sequence 'v_coffee' lacks H_1_4; each sequence needs 1.ppm..6.ppm and H_1_2..H_1_6"


def test_malformed_h_file_is_one_line(root, tmp_path):
    import shutil

    bad = tmp_path / "hp"
    shutil.copytree(root, bad)
    (bad / "i_astronaut" / "H_1_2").write_text("1 0 0\n0 1 0\n")
    with pytest.raises(InputError, match=r"H_1_2: expected a 3x3 homography of 9 finite numbers; found 6 values$"):
        HPatches(HPatches.Config(root=str(bad))).load(CellContext(cache=Cache(None)))


def test_a_non_finite_h_value_is_named_with_its_row_and_column(root, tmp_path):
    import shutil

    bad = tmp_path / "hp"
    shutil.copytree(root, bad)
    (bad / "v_coffee" / "H_1_3").write_text("1 0 0\n0 1 nan\n0 0 inf\n")
    with pytest.raises(InputError) as err:
        HPatches(HPatches.Config(root=str(bad))).load(CellContext(cache=Cache(None)))
    assert str(err.value) == (
        f"{bad / 'v_coffee' / 'H_1_3'}: H_1_3 has a non-finite value (nan) at row 2 col 3 (and 1 more); "
        "a homography needs 9 finite numbers"
    )


def test_high_resolution_sequences_are_excluded_by_default(root, tmp_path):
    import shutil

    folder = tmp_path / "hp"
    shutil.copytree(root, folder)
    shutil.copytree(folder / "i_astronaut", folder / "i_dc")
    scene = HPatches(HPatches.Config(root=str(folder), size=32)).load(CellContext(cache=Cache(None)))
    assert scene.private.ids == ["i_astronaut", "v_coffee"]
    scene = HPatches(HPatches.Config(root=str(folder), size=32, exclude=())).load(CellContext(cache=Cache(None)))
    assert scene.private.ids == ["i_astronaut", "i_dc", "v_coffee"]


def test_summary_by_hand():
    """Four pairs (two per split): MMA is the mean of per-pair accuracies, accuracy counts corner errors <= e."""
    from vispriv.plugins.descriptor_release.hpatches import summarise

    pairs = HPatchesImages(np.zeros((1, 8, 8, 3)), ["x"], [object()], None, (1, 3), (1.0, 3.0, 5.0))
    mma = np.array([[0.5, 1.0], [0.0, 0.5], [0.25, 0.25], [1.0, 1.0]])
    out = summarise(np.array(["i", "i", "v", "v"]), mma, np.array([0.5, 2.0, np.inf, 4.0]), np.array([4, 2, 0, 6]), pairs, 3.0)
    assert out["hpatches_mma_1px"] == pytest.approx(1.75 / 4) and out["hpatches_mma_3px"] == pytest.approx(2.75 / 4)
    assert out["hpatches_i_mma_1px"] == 0.25 and out["hpatches_v_mma_3px"] == 0.625
    assert (out["hpatches_homography_acc_1px"], out["hpatches_homography_acc_3px"], out["hpatches_homography_acc_5px"]) == (0.25, 0.5, 0.75)
    assert out["hpatches_i_homography_acc_3px"] == 1.0 and out["hpatches_v_homography_acc_3px"] == 0.0
    assert out["hpatches_homography_acc"] == 0.5 and out["hpatches_n_matches"] == 3.0
