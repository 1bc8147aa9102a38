"""The ldp-feat defense plugin end to end on tiny images (simulated jittered dictionary)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from vispriv.harness import Cache, CellContext, Images
from vispriv.plugins.defenses.ldp_feat import LdpFeat, candidate_distance, word_distance
from vispriv.plugins.descriptor_release import ldp
from vispriv.plugins.descriptor_release.payloads import DescriptorPublic, LdpFeatures, RawFeatures

SIFT = {"max_keypoints": 64, "detector": "dense", "dense_step": 8}


def _images(names: list[str], size: int = 64) -> Images:
    from skimage import color, data, transform

    out = []
    for n in names:
        a = np.asarray(getattr(data, n)(), np.float32)
        a = a / 255.0 if a.max() > 1.5 else a
        a = color.rgb2gray(a[..., :3]) if a.ndim == 3 else a
        out.append(transform.resize(a, (size, size), anti_aliasing=True).astype(np.float32))
    return Images(np.stack(out)[..., None], names)


@pytest.fixture(scope="module")
def scene():
    return _images(["camera", "astronaut"]), DescriptorPublic(_images(["coffee", "coins", "moon"]), _images(["brick"]))


def _defense(**kw) -> LdpFeat:
    base = dict(dictionary_size=64, dictionary_source="jittered", sift=SIFT, audit_trials=4000, utility=False)
    return LdpFeat(LdpFeat.Config(**{**base, **kw}))


def _ctx(tmp_path) -> CellContext:
    return CellContext(seed=0, cache=Cache(tmp_path / "cache"), artifact_dir=tmp_path / "art", quiet=True)


def test_release_is_m_subsets_of_the_public_dictionary(scene, tmp_path):
    private, public = scene
    d = _defense(epsilon=2.0, m=3)
    out = d.protect(private, public, _ctx(tmp_path))
    rel, k = out.release, d.dictionary(public, _ctx(tmp_path))
    assert isinstance(rel, LdpFeatures) and rel.m == 3 and rel.n_keypoints > 50
    assert np.array_equal(rel.candidates, k[rel.candidate_ids])
    assert all(len(set(r)) == 3 for r in rel.candidate_ids.tolist())
    assert set(vars(rel)) == {"keypoints", "image_index", "image_ids", "image_size", "scales", "orientations", "candidates", "candidate_ids",
                              "epsilon", "dictionary_size"}
    assert rel.epsilon == 2.0 and rel.dictionary_size == d.config.dictionary_size
    assert isinstance(out.truth["descriptors"], RawFeatures) and out.truth["images"] is private
    u = out.utility
    assert u["inclusion_probability"] == pytest.approx(3 * math.exp(2) / (3 * math.exp(2) + 64 - 3))
    assert 0 <= u["epsilon_empirical_lb"] <= 2.0 and u["epsilon_empirical_violation"] == 0.0
    assert (tmp_path / "art" / "privacy_audit.json").exists()
    again = d.protect(private, public, _ctx(tmp_path)).release  # same seed, same release
    assert np.array_equal(again.candidate_ids, rel.candidate_ids)


def test_epsilon_inf_releases_the_exact_nearest_neighbour(scene, tmp_path):
    private, public = scene
    d = _defense(epsilon=math.inf, m=1)
    out = d.protect(private, public, _ctx(tmp_path))
    k = d.dictionary(public, _ctx(tmp_path))
    desc = out.truth["descriptors"].descriptors
    brute = np.argmin(((desc[:, None, :] - k[None]) ** 2).sum(-1), axis=1)
    assert np.array_equal(out.release.candidate_ids[:, 0], brute)
    assert out.utility["inclusion_rate"] == 1.0


def test_naive_variant_has_no_utility(scene, tmp_path):
    private, public = scene
    out = _defense(dictionary_size="full", epsilon=10.0, m=2).protect(private, public, _ctx(tmp_path))
    assert out.release.candidate_ids is None and out.release.m == 2
    assert out.utility["log10_inclusion_probability"] < -300 and out.utility["inclusion_rate"] == 0.0
    assert out.utility["best_candidate_cosine"] < 0.9


def test_matching_utility_with_all_candidates(scene, tmp_path):
    private, public = scene
    matching = {"homographies_per_image": 1, "stereo": False}
    good = _defense(epsilon=math.inf, m=1, utility=True, matching=matching).protect(private, public, _ctx(tmp_path))
    bad = _defense(epsilon=0.0, m=1, utility=True, matching=matching).protect(private, public, _ctx(tmp_path))
    assert "warp_homography_acc" in good.utility and "warp_correct_matches_3px" in good.utility
    assert good.utility["warp_correct_matches_3px"] >= bad.utility["warp_correct_matches_3px"]


def test_vocabulary_matching_pairs_keypoints_that_share_a_word():
    """Table 3's criterion: a match wherever the reference's word is one of the released ids."""
    from vispriv.plugins.descriptor_release.matching import MatchingConfig, _match_rows

    rng = np.random.default_rng(1)
    dictionary = rng.random((50, 128)).astype(np.float32)
    dictionary /= np.linalg.norm(dictionary, axis=1, keepdims=True)
    quant = ldp.Quantiser(dictionary)
    ref_desc = dictionary[[3, 7, 9, 3]] + rng.normal(0, 1e-3, (4, 128)).astype(np.float32)
    ref = RawFeatures(np.zeros((4, 2), np.float32), np.zeros(4, np.int64), ["r"], (8, 8), ref_desc)
    ids = np.array([[3, 20], [40, 9]])
    release = LdpFeatures(np.zeros((2, 2), np.float32), np.zeros(2, np.int64), ["q"], (8, 8), dictionary[ids], ids)
    dist = word_distance(quant)(release, np.arange(2), ref, np.arange(4))
    assert np.array_equal(np.isfinite(dist), [[True, False, False, True], [False, False, True, False]])
    matches = _match_rows(release, np.arange(2), ref, np.arange(4), word_distance(quant), MatchingConfig(criterion="vocabulary"))
    assert sorted(map(tuple, matches.tolist())) == [(0, 0), (0, 3), (1, 2)]
    mutual = _match_rows(release, np.arange(2), ref, np.arange(4), candidate_distance, MatchingConfig())
    # keypoint 0's candidates (words 3, 20) are equally near references 0 and 3 (both word 3): the
    # ratio test rejects it; keypoint 1 (words 40, 9) has one clear nearest, reference 2 (word 9), mutually.
    assert mutual.tolist() == [[1, 2]]


def test_vocabulary_matching_mma_equals_brute_force(scene, tmp_path):
    """eps = inf, m = 1 releases each keypoint's nearest word; vocabulary matching pairs every query and
    reference keypoint of one word. MMA_t recomputed by brute force: argmin words, all same-word pairs,
    the query keypoint mapped by the pair's known homography, the fraction within t px, averaged over pairs."""
    from vispriv.plugins.descriptor_release.matching import MatchingConfig, random_homography, warp_image
    from vispriv.plugins.descriptor_release.sift import SiftConfig, extract_features

    private, public = scene
    matching = {"homographies_per_image": 2, "stereo": False, "criterion": "vocabulary"}
    d = _defense(epsilon=math.inf, m=1, utility=True, matching=matching)
    out = d.protect(private, public, _ctx(tmp_path))
    k = d.dictionary(public, _ctx(tmp_path)).astype(np.float64)
    cfg, sift = MatchingConfig(**matching), SiftConfig(**SIFT)

    def words(desc: np.ndarray) -> list[int]:
        return [int(np.argmin([np.sum((row - w) ** 2) for w in k])) for row in desc.astype(np.float64)]

    rng = np.random.default_rng(cfg.warp_seed)
    fractions: dict[int, list[float]] = {t: [] for t in cfg.thresholds}
    n_pairs, all_errors = [], []
    for image in private.images:
        for _ in range(cfg.homographies_per_image):
            hom = random_homography(rng, *image.shape[:2], cfg.homography_strength)
            q = extract_features(Images(image[None], ["q"]), sift)
            r = extract_features(Images(warp_image(image, hom)[None], ["r"]), sift)
            qw, rw = words(q.descriptors), words(r.descriptors)
            errors = []
            for a in range(len(qw)):
                for b in range(len(rw)):
                    if qw[a] == rw[b]:
                        x, y, z = hom @ np.array([*q.keypoints[a], 1.0])
                        errors.append(math.hypot(x / z - r.keypoints[b][0], y / z - r.keypoints[b][1]))
            n_pairs.append(len(errors))
            all_errors += errors
            for t in cfg.thresholds:
                fractions[t].append(sum(e <= t for e in errors) / len(errors) if errors else 0.0)
    assert out.utility["warp_n_matches"] == pytest.approx(np.mean(n_pairs)) and min(n_pairs) > 0
    for t in cfg.thresholds:
        assert out.utility[f"warp_mma_{t}px"] == pytest.approx(np.mean(fractions[t]), abs=1e-12), t
    # a case with both right and wrong word matches, so the fractions are not trivially 0 or 1
    assert min(all_errors) <= 1.0 and max(all_errors) > 5.0


def test_vocabulary_words_of_the_naive_domain_are_exact_vectors():
    rng = np.random.default_rng(2)
    ref_desc = rng.random((3, 128)).astype(np.float32)
    ref = RawFeatures(np.zeros((3, 2), np.float32), np.zeros(3, np.int64), ["r"], (8, 8), ref_desc)
    cand = np.stack([ref_desc[[2, 0]], ref_desc[[1, 1]] + 1e-3]).astype(np.float32)
    release = LdpFeatures(np.zeros((2, 2), np.float32), np.zeros(2, np.int64), ["q"], (8, 8), cand)
    dist = word_distance(None)(release, np.arange(2), ref, np.arange(3))
    assert np.array_equal(np.isfinite(dist), [[True, False, True], [False, False, False]])


def test_vocabulary_criterion_without_words_is_one_clear_error():
    from vispriv.harness.errors import ConfigError
    from vispriv.plugins.descriptor_release.matching import MatchingConfig, evaluate_utility
    from vispriv.plugins.descriptor_release.sift import SiftConfig

    images = _images(["camera"])
    with pytest.raises(ConfigError, match="needs a defense whose release defines visual words"):
        evaluate_utility(images, SiftConfig(), lambda r: r, MatchingConfig(criterion="vocabulary"), 0)


def test_candidate_distance_is_min_over_candidates():
    rng = np.random.default_rng(0)
    cand = rng.random((3, 4, 128)).astype(np.float32)
    ref = rng.random((5, 128)).astype(np.float32)
    kp, idx = np.zeros((3, 2)), np.zeros(3, np.int64)
    q = LdpFeatures(kp, idx, ["a"], (8, 8), cand)
    r = RawFeatures(np.zeros((5, 2)), np.zeros(5, np.int64), ["b"], (8, 8), ref)
    got = candidate_distance(q, np.arange(3), r, np.arange(5))
    brute = np.linalg.norm(cand[:, :, None, :] - ref[None, None], axis=-1).min(axis=1)
    assert np.allclose(got, brute, atol=1e-5)


@pytest.mark.parametrize(
    "kw,match",
    [({"epsilon": -1.0}, "greater than or equal to 0"), ({"m": 65, "dictionary_size": 64}, "exceeds dictionary_size"),
     ({"epsilon": math.inf, "m": 2}, "m must be 1"), ({"dictionary_size": 1}, ">= 2 or 'full'")],
)
def test_bad_config(kw, match):
    with pytest.raises(ValidationError, match=match):
        LdpFeat.Config(**kw)


def test_registered_in_scenario_hooks():
    from vispriv.plugins.descriptor_release import hooks

    seen = []
    hooks.vispriv_register_defenses(seen.append)
    assert LdpFeat in seen and LdpFeat.produces == (LdpFeatures,)
    assert pytest.approx(1024 * math.log(2)) == ldp.NAIVE_LOG_DOMAIN_SIZE


def test_without_its_own_sift_the_defense_follows_the_scene(scene, tmp_path):
    """The scene's SIFT (DescriptorPublic.sift) decides the keypoints and the dictionary K, so K is the
    one the invert-ldp attacker rebuilds with the scene's settings (it was SiftConfig() before)."""
    from vispriv.plugins.descriptor_release.sift import SiftConfig, extract_features

    private, public = scene
    scene_sift = SiftConfig(max_keypoints=12)
    public = DescriptorPublic(public.lifting, public.public, scene_sift)
    follows = _defense(sift=None, epsilon=math.inf, m=1)
    out = follows.protect(private, public, _ctx(tmp_path))
    assert np.bincount(out.release.image_index).max() <= 12
    assert out.release.n_keypoints == extract_features(private, scene_sift).n_keypoints
    k = follows.dictionary(public, _ctx(tmp_path))
    assert np.array_equal(k, _defense(sift=scene_sift.model_dump()).dictionary(public, _ctx(tmp_path)))
    assert not np.array_equal(k, _defense(sift=SiftConfig().model_dump()).dictionary(public, _ctx(tmp_path)))
