"""SIFT extraction, dictionaries, matching utility and data loaders of the descriptor-release scenario."""

import warnings

import numpy as np
import pytest

from vispriv.harness import Cache, Images
from vispriv.harness.data.bundled import load_bundled, load_stereo_motorcycle, to_rgb_float
from vispriv.harness.data.image_folder import load_image_folder
from vispriv.harness.errors import ConfigError, InputError
from vispriv.plugins.descriptor_release.dictionary import (
    allot_words,
    build_dictionary,
    hierarchical_kmeans,
    nearest_neighbours,
    spherical_kmeans,
)
from vispriv.plugins.descriptor_release.matching import (
    apply_homography,
    corner_error,
    homography_from_corners,
    random_homography,
    ransac,
    ratio_match,
    squared_distances,
)
from vispriv.plugins.descriptor_release.sift import SiftConfig, extract_features, quantize_colmap
from vispriv.plugins.descriptor_release.splits import BUNDLED_SPLITS


@pytest.fixture(scope="module")
def photos():
    return load_bundled(["astronaut", "coffee"], 96)


def test_sift_plain_l2_quantised_and_cached(photos, tmp_path):
    cache = Cache(tmp_path)
    feats = extract_features(photos, SiftConfig(max_keypoints=64), cache)
    assert feats.image_ids == ["astronaut", "coffee"] and feats.image_size == (96, 96)
    counts = np.bincount(feats.image_index, minlength=2)
    assert np.all(counts > 10) and np.all(counts <= 64)
    np.testing.assert_allclose(np.linalg.norm(feats.descriptors, axis=1), 1.0, atol=1e-5)
    # COLMAP lattice: 512*d rounds to integers up to a common scale
    np.testing.assert_allclose(quantize_colmap(feats.descriptors), feats.descriptors, atol=1e-6)
    assert np.all((feats.keypoints >= 0) & (feats.keypoints < 96))
    again = extract_features(photos, SiftConfig(max_keypoints=64), cache)
    assert cache.hits >= 1
    np.testing.assert_array_equal(again.descriptors, feats.descriptors)


def test_a_dictionarys_sift_and_kmeans_report_their_progress_and_a_cache_hit_reports_none(photos, tmp_path):
    """Localisation Table 2 extracted SIFT of 3,360 views for minutes without a line off a terminal."""
    seen: list[tuple[str, int | None, int]] = []

    def progress(iterable, desc="", total=None):  # type: ignore[no-untyped-def]
        items = list(iterable)
        seen.append((desc, total, len(items)))
        return items

    cache = Cache(tmp_path)
    cfg = SiftConfig(max_keypoints=64)
    words = build_dictionary(photos, 8, cfg, seed=0, augment=1, cache=cache, method="hierarchical", progress=progress)
    assert seen[0] == ("SIFT", 4, 4)  # 2 photos + 1 random view each
    assert seen[1][0] == "k-means per top cluster" and seen[1][1] == seen[1][2] >= 1
    quiet = build_dictionary(photos, 8, cfg, seed=0, augment=1, method="hierarchical")  # computed again, uncached
    np.testing.assert_array_equal(quiet, words)  # the progress callable never changes the words
    seen.clear()
    build_dictionary(photos, 8, cfg, seed=0, augment=1, cache=cache, method="hierarchical", progress=progress)
    assert seen == []


def test_descriptors_are_plain_sift_the_hellinger_map_of_which_is_rootsift(photos):
    """Ref [11] lifts plain L2 SIFT. RootSIFT (Arandjelovic and Zisserman) is the Hellinger map sqrt(d / |d|_1)
    of the same descriptor: so the map of ours equals kornia's RootSIFT at the same keypoints, and ours do not."""
    import kornia.feature as KF
    import torch

    from vispriv.plugins.descriptor_release.sift import to_grey_tensor

    cfg = SiftConfig(detector="dense", quantize=False, max_keypoints=40)
    feats = extract_features(Images(photos.images[:1], photos.ids[:1]), cfg)
    centres = torch.from_numpy(feats.keypoints)[None]
    lafs = KF.laf_from_center_scale_ori(centres, torch.full((1, len(feats.keypoints), 1, 1), cfg.dense_scale),
                                        torch.zeros(1, len(feats.keypoints), 1))
    rootsift = KF.LAFDescriptor(KF.SIFTDescriptor(patch_size=41, rootsift=True), patch_size=41).eval()
    with torch.no_grad():
        root = rootsift(to_grey_tensor(photos.images[:1], None), lafs)[0].numpy()
    d = feats.descriptors.astype(np.float64)
    np.testing.assert_allclose(np.sqrt(d / d.sum(axis=1, keepdims=True)), root, atol=1e-4)
    assert np.abs(d - root).max() > 0.05


def test_quantize_colmap_hand_case():
    d = np.zeros((1, 128), np.float32)
    d[0, :2] = [0.6, 0.8]  # 512 * 0.6 = 307.2 -> clipped to 255; 512 * 0.8 -> 255
    q = quantize_colmap(d)
    np.testing.assert_allclose(q[0, :2], [2 ** -0.5, 2 ** -0.5], atol=1e-6)


def test_sift_dense_grid_and_flat_image(photos):
    flat = Images(np.full((1, 64, 64, 1), 0.5, np.float32), ["grey"])
    feats = extract_features(flat, SiftConfig())
    assert feats.n_keypoints == 0 and feats.image_ids == ["grey"]  # documented skip
    dense = extract_features(photos, SiftConfig(detector="dense", dense_step=16, dense_scale=8))
    assert np.bincount(dense.image_index).tolist() == [36, 36]  # 6 x 6 grid from 4 px to 84 px


def test_sift_bad_input():
    with pytest.raises(InputError, match="at least 32"):
        extract_features(Images(np.zeros((1, 20, 20, 3), np.float32)), SiftConfig())
    with pytest.raises(Exception, match="max_keypoints"):
        SiftConfig(max_keypoints=0)


def test_spherical_kmeans_and_nearest():
    rng = np.random.default_rng(0)
    centres = np.kron(np.eye(4), np.ones(32)) * np.abs(rng.normal(size=(4, 128)))  # orthogonal supports
    x = np.repeat(centres, 50, axis=0) + 0.01 * rng.normal(size=(200, 128))
    c = spherical_kmeans(x, 4, seed=0, niter=10, nredo=3)
    np.testing.assert_allclose(np.linalg.norm(c, axis=1), 1.0, atol=1e-5)
    unit = centres / np.linalg.norm(centres, axis=1, keepdims=True)
    assert np.max(c @ unit.T, axis=0).min() > 0.999
    d, idx = nearest_neighbours(unit, c, 2)
    assert d.shape == (4, 2) and np.all(d[:, 0] < 0.05) and len(set(idx[:, 0])) == 4
    with pytest.raises(InputError, match="at least 300"):
        spherical_kmeans(x, 300, seed=0)
    with pytest.raises(InputError, match="NaN"):
        spherical_kmeans(np.full((10, 128), np.nan), 2, seed=0)
    with pytest.raises(InputError, match="128"):
        spherical_kmeans(np.zeros((10, 64)), 2, seed=0)


def test_allot_words_hand_case_and_invariants():
    # shares 10 * n / 109 = .46 .09 9.17 .28 -> floor, at least 1: 1 1 9 1 (12) -> the 9 gives back 2
    np.testing.assert_array_equal(allot_words(np.array([5, 1, 100, 3]), 10), [1, 1, 7, 1])
    # shares 6 * n / 12 = 2 .5 3.5 -> 2 1 3: sums to 6 with no correction
    np.testing.assert_array_equal(allot_words(np.array([4, 1, 7]), 6), [2, 1, 3])
    rng = np.random.default_rng(1)
    for _ in range(50):
        n = rng.integers(1, 40, size=rng.integers(1, 12))
        k = int(rng.integers(len(n), n.sum() + 1))
        w = allot_words(n, k)
        assert w.sum() == k and np.all(w >= 1) and np.all(w <= n)
    with pytest.raises(InputError, match="cannot allot"):
        allot_words(np.array([2, 2]), 5)


def test_hierarchical_kmeans_finds_nested_blobs_and_keeps_small_clusters():
    rng = np.random.default_rng(0)
    # 4 orthogonal groups, each of 4 sub-blobs: branching 4 then 4 words per group = the 16 sub-blob centres
    subs = np.zeros((16, 128))
    for i in range(4):
        for j in range(4):
            subs[4 * i + j, 32 * i : 32 * i + 32] = 1.0
            subs[4 * i + j, 32 * i + 8 * j : 32 * i + 8 * j + 8] += 1.5
    x = np.repeat(subs, 30, axis=0) + 0.005 * rng.normal(size=(480, 128))
    c = hierarchical_kmeans(np.abs(x), 16, seed=0, branching=4, niter=10)
    assert c.shape == (16, 128) and len(np.unique(c, axis=0)) == 16
    np.testing.assert_allclose(np.linalg.norm(c, axis=1), 1.0, atol=1e-5)
    unit = subs / np.linalg.norm(subs, axis=1, keepdims=True)
    assert np.max(c @ unit.T, axis=0).min() > 0.999
    # as many words as distinct points: the words are the points
    pts = np.abs(rng.normal(size=(12, 128)))
    words = hierarchical_kmeans(pts, 12, seed=0, branching=3)
    unit_pts = pts / np.linalg.norm(pts, axis=1, keepdims=True)
    assert np.allclose(np.sort(words @ unit_pts.T, axis=1)[:, -1], 1.0, atol=1e-5)
    with pytest.raises(InputError, match="at least 13 distinct"):
        hierarchical_kmeans(pts, 13, seed=0)


def test_ratio_match_hand_case():
    dist = np.array([[0.1, 0.5, 0.9], [0.4, 0.45, 0.9], [0.2, 0.3, 0.05]])
    # row 0 -> 0 (0.1 < 0.8 * 0.5); row 1 fails the ratio test; row 2 -> 2 (0.05 < 0.16)
    np.testing.assert_array_equal(ratio_match(dist, 0.8, mutual=True), [[0, 0], [2, 2]])
    # mutual check: column 0's nearest row is 0, so row 1 -> 0 is dropped even without ratio
    np.testing.assert_array_equal(ratio_match(dist, 1.0, mutual=True), [[0, 0], [2, 2]])
    assert len(ratio_match(dist, 1.0, mutual=False)) == 3


def test_repeated_descriptors_get_bit_identical_distances_whatever_the_blas_kernel():
    """LDP-Feat releases repeat dictionary words: their distances must tie exactly.

    A BLAS ``gemm`` rounds a row by where it falls in the kernel's tiles (on AVX-512 a row and
    its copy 17 rows further differ in the last bit in about a quarter of such products), so
    mutual nearest neighbours would break the tie by the machine's kernel. Distances of equal
    rows are computed once and shared.
    """
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(9, 40))
        x = rng.random((n, 128)) * 255
        x[n - 1] = x[0]
        y = rng.random((int(rng.integers(5, 40)), 128)) * 255
        y[-1] = y[0]
        d = squared_distances(x, y)
        assert np.array_equal(d[0], d[n - 1])
        assert np.array_equal(d[:, 0], d[:, -1])
        np.testing.assert_allclose(d, ((x[:, None] - y[None]) ** 2).sum(-1), rtol=1e-9)


def test_a_tie_between_identical_queries_goes_to_the_first_in_mutual_matching():
    ref = np.array([[0.0, 0.0], [10.0, 10.0]])
    query = np.array([[1.0, 1.0], [9.0, 9.0], [1.0, 1.0]])  # rows 0 and 2 identical: both nearest to ref 0
    dist = np.sqrt(squared_distances(query, ref))
    assert dist[0, 0] == dist[2, 0]
    np.testing.assert_array_equal(ratio_match(dist, 0.8, mutual=True), [[0, 0], [1, 1]])


def test_homography_and_ransac():
    src = np.array([[0, 0], [10, 0], [10, 10], [0, 10]], float)
    dst = src * 2 + 3
    h = homography_from_corners(src, dst)
    np.testing.assert_allclose(apply_homography(h, np.array([[5.0, 5.0]])), [[13.0, 13.0]], atol=1e-9)
    rng = np.random.default_rng(0)
    hom = random_homography(rng, 100, 100, 0.15)
    pts = rng.uniform(0, 100, size=(60, 2))
    moved = apply_homography(hom, pts)
    moved[:15] = rng.uniform(0, 100, size=(15, 2))  # 25% outliers
    est, inliers = ransac(pts, moved, "homography", 2.0, 10, seed=0)
    assert est is not None and corner_error(est, hom, 100, 100) < 1.0
    assert inliers[15:].mean() > 0.95 and inliers[:15].mean() < 0.2
    assert ransac(pts[:3], moved[:3], "homography", 2.0, 10, 0)[0] is None


def test_bundled_split_and_stereo():
    names = [n for split in BUNDLED_SPLITS.values() for n in split]
    assert len(names) == len(set(names))  # disjoint
    assert {"astronaut", "camera", "grace_hopper"} <= set(BUNDLED_SPLITS["test"])
    imgs = load_bundled(["camera", "present"], 48)  # grey and RGBA photos
    assert imgs.images.shape == (2, 48, 48, 3)
    left, right, disp = load_stereo_motorcycle(128)
    assert left.shape == right.shape == (*disp.shape, 3)
    assert np.nanmax(disp) < 128 and np.isnan(disp).any()
    with pytest.raises(ConfigError, match="unknown bundled"):
        load_bundled(["nope"], 32)
    assert to_rgb_float(np.zeros((4, 4, 4), np.uint8)).shape == (4, 4, 3)


def test_image_folder_skips_unreadable_and_rejects_empty(tmp_path):
    from PIL import Image

    Image.fromarray((np.random.default_rng(0).uniform(size=(40, 50, 3)) * 255).astype(np.uint8)).save(tmp_path / "a.png")
    Image.fromarray(np.zeros((30, 30), np.uint8)).save(tmp_path / "b.JPG")
    (tmp_path / "broken.jpg").write_bytes(b"not an image")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        imgs = load_image_folder(tmp_path, 32)
    assert imgs.ids == ["a.png", "b.JPG"] and imgs.images.shape == (2, 32, 32, 3)
    assert any("broken.jpg" in str(w.message) for w in caught)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="no readable"):
        load_image_folder(empty, 32)
    with pytest.raises(ConfigError, match="does not exist"):
        load_image_folder(tmp_path / "missing", 32)
