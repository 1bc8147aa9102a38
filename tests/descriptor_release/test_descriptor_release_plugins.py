"""The descriptor-release cell flow: dataset -> defense -> attacks -> metrics, on tiny settings."""

import dataclasses

import numpy as np
import pytest

from vispriv.harness import Cache, CellContext
from vispriv.harness.errors import ConfigError, InputError
from vispriv.plugins.attacks.clustering import ClusteringAttack
from vispriv.plugins.attacks.database import DatabaseAttack, default_v_size
from vispriv.plugins.attacks.nearest import NearestAttack
from vispriv.plugins.defenses.affine_lifting import AffineLifting
from vispriv.plugins.defenses.identity_features import RawFeaturesRelease
from vispriv.plugins.descriptor_release.attack_common import adversarial_count
from vispriv.plugins.descriptor_release.datasets import BundledImages
from vispriv.plugins.descriptor_release.matching import MatchingConfig
from vispriv.plugins.descriptor_release.payloads import (
    LiftedFeatures,
    LiftingTruth,
    RawFeatures,
    RecoveredFeatures,
    RecoveryTrace,
)
from vispriv.plugins.descriptor_release.subspace import point_subspace_sqdist
from vispriv.plugins.metrics.descriptor_recovery import DescriptorRecovery, LiftingAssumptions

SMALL_MATCHING = MatchingConfig(homographies_per_image=1, stereo=False)
SMALL_Z = dict(database_size=256, database_augment=1)


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    root = tmp_path_factory.mktemp("dr")
    return CellContext(seed=0, cache=Cache(root / "cache"), artifact_dir=root / "art", quiet=True)


@pytest.fixture(scope="module")
def scene(ctx):
    return BundledImages(BundledImages.Config(size=96)).load(ctx)


@pytest.fixture(scope="module")
def lifted(scene, ctx):
    cfg = AffineLifting.Config(mode="sub-hybrid", m=2, database_size=256, database_augment=1, matching=SMALL_MATCHING)
    return AffineLifting(cfg).protect(scene.private, scene.public, ctx)


def test_scene_is_disjoint(scene):
    ids = [set(scene.private.ids), set(scene.public.lifting.ids), set(scene.public.public.ids)]
    assert all(not (a & b) for i, a in enumerate(ids) for b in ids[i + 1 :])


def test_none_releases_raw_features_with_utility(scene, ctx):
    cfg = RawFeaturesRelease.Config(matching=MatchingConfig(homographies_per_image=1, stereo_width=128))
    out = RawFeaturesRelease(cfg).protect(scene.private, scene.public, ctx)
    assert isinstance(out.release, RawFeatures) and out.truth["descriptors"] is out.release
    assert out.utility["warp_mma_3px"] > 0.7 and out.utility["stereo_mma_3px"] > 0.5
    assert all(out.utility_directions.values())


def test_warped_test_pairs_are_common_to_every_cell(scene, ctx):
    """The warps depend on ``matching.warp_seed`` only: two cells (other seeds) match the same pairs."""
    from vispriv.plugins.descriptor_release.matching import evaluate_utility
    from vispriv.plugins.descriptor_release.sift import SiftConfig

    cfg = MatchingConfig(homographies_per_image=1, stereo=False)
    runs = [evaluate_utility(scene.private, SiftConfig(), lambda r: r, cfg, seed, cache=ctx.cache) for seed in (1, 2)]
    assert runs[0]["warp_n_matches"] == runs[1]["warp_n_matches"]
    assert runs[0]["warp_mma_3px"] == runs[1]["warp_mma_3px"]
    other = evaluate_utility(scene.private, SiftConfig(), lambda r: r, cfg.model_copy(update={"warp_seed": 7}), 1, cache=ctx.cache)
    assert other["warp_n_matches"] != runs[0]["warp_n_matches"]


def test_affine_lifting_release_hides_descriptors(lifted):
    rel, truth = lifted.release, lifted.truth
    assert isinstance(rel, LiftedFeatures) and rel.m == 2 and rel.database.shape == (256, 128)
    fields = {f.name for f in dataclasses.fields(rel)}
    assert fields == {"keypoints", "image_index", "image_ids", "image_size", "scales", "orientations",
                      "offsets", "bases", "database", "mode"}
    # the keypoints' geometry is released in the clear, like their location
    np.testing.assert_array_equal(rel.scales, truth["descriptors"].scales)
    assert rel.mode == "sub-hybrid"  # public, like m
    d = truth["descriptors"].descriptors
    assert np.min(np.linalg.norm(rel.offsets - d, axis=1)) > 1e-3  # offset is re-parameterised
    # but d lies on its subspace, and so does its adversarial row (hybrid: m/2 = 1)
    assert isinstance(truth["lifting"], LiftingTruth) and truth["lifting"].adversarial.shape == (len(d), 1, 128)
    for point in (d, truth["lifting"].adversarial[:, 0]):
        x = point - rel.offsets
        resid = x - np.einsum("kmd,km->kd", rel.bases, np.einsum("kmd,kd->km", rel.bases, x))
        assert np.abs(resid).max() < 1e-4
    assert "warp_homography_acc" in lifted.utility


def test_lifted_matching_under_the_identity_warp_is_exact(scene, ctx):
    """Homography strength 0: the reference is the query image itself, and each true descriptor lies on its own
    lifted subspace (distance 0), so every mutual ratio-test match pairs a keypoint with itself: MMA is 1 at every
    threshold (by hand), and nearly every keypoint is matched."""
    from vispriv.plugins.descriptor_release.sift import SiftConfig, extract_features

    identity = MatchingConfig(homographies_per_image=1, homography_strength=0.0, stereo=False)
    cfg = AffineLifting.Config(mode="sub-hybrid", m=2, database_size=256, database_augment=1, matching=identity)
    out = AffineLifting(cfg).protect(scene.private, scene.public, ctx)
    assert {out.utility[f"warp_mma_{t}px"] for t in identity.thresholds} == {1.0}
    n_keypoints = extract_features(scene.private, SiftConfig(), ctx.cache).n_keypoints / len(scene.private.ids)
    assert out.utility["warp_n_matches"] >= 0.9 * n_keypoints


def _assumptions_by_brute_force(truth: LiftingTruth, trace: RecoveryTrace, ratio: float = 0.8,
                                radius: float = 0.3) -> dict[str, float]:
    """ldp-feat.md S3.1/S3.2 checks by loops: S3.1, each of a subspace's first n neighbours has one generating
    vector (d or an adversarial row) nearer than ``ratio`` x the second, all different; S3.2, d lies farther than
    ``radius`` from every auxiliary subspace found to intersect its own (least squares onto offset + span)."""
    out: dict[str, float] = {}
    if trace.source == "lifting":
        holds, ok_all = [], []
        for i in range(len(truth.descriptors)):
            gens = [truth.descriptors[i], *truth.adversarial[i]]
            n = min(len(gens), trace.neighbours.shape[1])
            picked, oks = [], []
            for nb in trace.neighbours[i, :n].astype(np.float64):
                dist = sorted((float(np.linalg.norm(nb - g)), j) for j, g in enumerate(gens))
                picked.append(dist[0][1])
                oks.append(len(dist) < 2 or dist[0][0] < ratio * dist[1][0])
            ok_all += oks
            holds.append(all(oks) and len(set(picked)) == n)
        out |= {"s31_assumption_holds": float(np.mean(holds)), "s31_neighbour_match": float(np.mean(ok_all))}
    free = []
    for i, rows in enumerate(trace.aux_rows):
        dists = []
        for q in rows[rows >= 0]:
            basis = trace.bases[q].astype(np.float64).T  # (128, m)
            x = truth.descriptors[i].astype(np.float64) - trace.offsets[q]
            coef = np.linalg.lstsq(basis, x, rcond=None)[0]
            dists.append(float(np.linalg.norm(x - basis @ coef)))
        if dists:
            free.append(min(dists) > radius)
    if free:
        out["s32_collision_free"] = float(np.mean(free))
    return out


def test_attacks_recover_better_than_nearest(lifted, scene, ctx):
    truth = lifted.truth
    scores = {}
    for attack in (NearestAttack(NearestAttack.Config(**SMALL_Z)), DatabaseAttack(), ClusteringAttack(ClusteringAttack.Config(**SMALL_Z))):
        res = attack.attack(lifted.release, scene.public, ctx)
        est = res.estimate["descriptors"]
        assert isinstance(est, RawFeatures) and np.array_equal(est.keypoints, lifted.release.keypoints)
        # recovered features carry the attacked subspaces (for the inversion's refinement), each holding its truth
        assert isinstance(est, RecoveredFeatures) and np.array_equal(est.bases, lifted.release.bases)
        on = point_subspace_sqdist(truth["descriptors"].descriptors, est.offsets, est.bases)
        assert np.max(np.diagonal(on)) < 1e-4
        if attack.name == "clustering":  # its k = n_adv + 1 candidates, the estimate among them
            assert est.candidates.shape[1] == adversarial_count(lifted.release, None, "clustering") + 1
            assert np.min(np.abs(est.candidates - est.descriptors[:, None]).max(-1), axis=1).max() < 1e-6
        scores[attack.name] = DescriptorRecovery().score(truth["descriptors"], est, ctx)
        if "lifting" in res.estimate:
            checks = LiftingAssumptions().score(truth["lifting"], res.estimate["lifting"], ctx)
            assert checks == pytest.approx(_assumptions_by_brute_force(truth["lifting"], res.estimate["lifting"]))
            scores[attack.name].update(checks)
        if attack.name == "database":
            assert res.metrics["adversarial_found"] == 1.0
    assert scores["database"]["desc_cosine"] > scores["nearest"]["desc_cosine"]
    assert scores["clustering"]["desc_cosine"] > scores["nearest"]["desc_cosine"]
    assert "s31_assumption_holds" in scores["database"] and "s32_collision_free" in scores["clustering"]


def test_descriptor_recovery_metric_hand_cases(ctx):
    d = np.eye(128, dtype=np.float32)[:3]
    truth = RawFeatures(np.zeros((3, 2)), np.zeros(3), ["a"], (8, 8), d)
    perfect = DescriptorRecovery().score(truth, truth, ctx)
    assert perfect == pytest.approx({"desc_cosine": 1.0, "desc_l2": 0.0, "desc_recovered": 1.0})
    swapped = RawFeatures(np.zeros((3, 2)), np.zeros(3), ["a"], (8, 8), d[[1, 0, 2]])
    s = DescriptorRecovery().score(truth, swapped, ctx)
    assert s["desc_recovered"] == pytest.approx(1 / 3) and s["desc_cosine"] == pytest.approx(1 / 3)
    assert s["desc_l2"] == pytest.approx(2 * np.sqrt(2) / 3)
    with pytest.raises(InputError, match="rows must correspond"):
        DescriptorRecovery().score(truth, RawFeatures(np.zeros((1, 2)), np.zeros(1), ["a"], (8, 8), d[:1]), ctx)


def test_s31_hand_case(ctx):
    e = np.eye(128, dtype=np.float32)
    truth = LiftingTruth(descriptors=e[[0, 0]], adversarial=e[[[1], [1]]])
    # subspace 0: neighbours are near d and a -> holds; subspace 1: both near a -> fails
    nb = np.stack([np.stack([e[0] + 0.1 * e[5], e[1]]), np.stack([e[1] + 0.1 * e[5], e[1]])])
    trace = RecoveryTrace(nb, "lifting", np.zeros((2, 128)), np.zeros((2, 1, 128)), np.zeros((2, 0)))
    out = LiftingAssumptions().score(truth, trace, ctx)
    assert out == pytest.approx({"s31_assumption_holds": 0.5, "s31_neighbour_match": 1.0})


def test_bad_configs_and_inputs(lifted, scene, ctx):
    with pytest.raises(ConfigError, match="pool has 4"):
        AffineLifting.Config(m=16, mode="sub-hybrid", database_size=64)
    no_db = dataclasses.replace(lifted.release, database=None)
    with pytest.raises(InputError, match="lifting database W"):
        DatabaseAttack().attack(no_db, scene.public, ctx)
    with pytest.raises(InputError, match="DescriptorPublic"):
        NearestAttack().attack(lifted.release, scene.private, ctx)
    too_big = len(lifted.release.database) + 1
    with pytest.raises(InputError, match="must be at most the database size"):
        DatabaseAttack(DatabaseAttack.Config(v_size=too_big)).attack(lifted.release, scene.public, ctx)
    with pytest.raises(InputError, match="u_size"):
        DatabaseAttack(DatabaseAttack.Config(v_size=4, u_size=5)).attack(lifted.release, scene.public, ctx)


def test_database_attack_default_v_is_an_eighth_of_w():
    """|V| = max(16, |W| / 8), never past |W| - n_adv (the calibration of benchmarks/probes/database_attack_calibration.py)."""
    assert default_v_size(4096, 1) == 512
    assert default_v_size(1024, 2) == 128
    assert default_v_size(64, 2) == 16
    assert default_v_size(16, 2) == 14


def test_hooks_register_everything():
    from vispriv.harness.registry import load_registry

    reg = load_registry(only=["descriptor-release"])
    assert not reg.failures
    for kind, name in [("dataset", "bundled-images"), ("dataset", "image-folder"), ("defense", "affine-lifting"),
                       ("defense", "none"), ("attack", "database"), ("attack", "clustering"), ("attack", "nearest"),
                       ("metric", "descriptor-recovery"), ("metric", "lifting-assumptions")]:
        assert reg.get(kind, name, "descriptor-release").name == name


@pytest.mark.parametrize("mode", ["random", "adversarial", "hybrid", "sub-hybrid"])
def test_database_and_clustering_attacks_in_every_lifting_mode(mode, scene, ctx):
    """Issue 14 item 6: both attacks count the adversarial rows the mode puts in (m, floor(m/2) or 0)."""
    m = 4
    n_adv = {"random": 0, "adversarial": m, "hybrid": m // 2, "sub-hybrid": m // 2}[mode]
    cfg = AffineLifting.Config(mode=mode, m=m, database_size=256, database_augment=1, utility=False)
    lifted = AffineLifting(cfg).protect(scene.private, scene.public, ctx)
    release, truth = lifted.release, lifted.truth
    assert release.mode == mode
    clustering = ClusteringAttack(ClusteringAttack.Config(**SMALL_Z)).attack(release, scene.public, ctx)
    assert clustering.estimate["lifting"].neighbours.shape[1] == n_adv + 1  # k = n_adv + 1 clusters (section 4.2)
    if release.database is None:
        assert mode == "random"
        with pytest.raises(InputError, match="lifting database W"):
            DatabaseAttack().attack(release, scene.public, ctx)
        return
    adv = truth["lifting"].adversarial / np.linalg.norm(truth["lifting"].adversarial, axis=2, keepdims=True)

    def estimate_quality(result):
        est = result.estimate["descriptors"].descriptors
        est = est / np.linalg.norm(est, axis=1, keepdims=True)
        is_adversarial_row = np.einsum("kd,kad->ka", est, adv).max(axis=1) > 0.99
        return is_adversarial_row.mean(), np.median(np.sum(est * truth["descriptors"].descriptors, axis=1))

    unlabelled = dataclasses.replace(release, mode=None)  # a release that does not say: W tells
    for rel in (release, unlabelled):
        result = DatabaseAttack().attack(rel, scene.public, ctx)
        assert result.metrics["adversarial_found"] == 1.0
        assert result.estimate["lifting"].neighbours.shape[1] == n_adv + 1
        adversarial_share, cosine = estimate_quality(result)
        assert adversarial_share < 0.05 and cosine > 0.6
    if mode == "adversarial":  # the old default floor(m/2) leaves adversarial rows at distance 0 in V
        adversarial_share, cosine = estimate_quality(DatabaseAttack(DatabaseAttack.Config(n_adversarial=m // 2)).attack(release, scene.public, ctx))
        assert adversarial_share > 0.3 and cosine < 0.6
    with pytest.raises(InputError, match="set n_adversarial"):
        ClusteringAttack(ClusteringAttack.Config(**SMALL_Z)).attack(unlabelled, scene.public, ctx)
