"""Pose errors and the reported rates by hand; pycolmap's absolute pose on known correspondences and on a tiny SIMULATED room."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from vispriv.harness import Cache, CellContext
from vispriv.plugins.descriptor_release.localisation import (
    LocalisationProtocol,
    absolute_pose,
    pose_errors,
    summarise,
)
from vispriv.plugins.descriptor_release.localisation.dataset import Localisation
from vispriv.plugins.descriptor_release.localisation.reader import View
from vispriv.plugins.descriptor_release.localisation.render import look_at
from vispriv.plugins.descriptor_release.matching import MatchingConfig, evaluate_utility

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "localisation.yaml"


def _rot_z(degrees: float) -> np.ndarray:
    a = math.radians(degrees)
    return np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]])


def test_pose_errors_by_hand() -> None:
    rot, trans = look_at(np.array([1.0, 2.0, 1.5]), np.array([1.0, 0.0, 0.0]))
    # 3 degrees about the camera's own z axis; the centre moved by (0.3, 0.4, 0) -> 0.5 m.
    rot_est = _rot_z(3.0) @ rot
    centre_est = np.array([1.3, 2.4, 1.5])
    position, rotation = pose_errors(rot_est, -rot_est @ centre_est, rot, trans)
    assert position == pytest.approx(0.5, abs=1e-12)
    assert rotation == pytest.approx(3.0, abs=1e-9)


def test_rates_and_medians_by_hand() -> None:
    position = np.array([0.1, 0.3, 0.2, 4.0, np.inf, 0.01])
    rotation = np.array([1.0, 1.0, 3.0, 9.0, np.inf, 0.5])
    truth = np.array([True, True, True, True, True, False])
    registered = np.array([True, True, True, True, False, True])
    out = summarise(position, rotation, truth, registered, np.array([50, 40, 30, 8, 0, 60.0]),
                    np.array([90, 80, 70, 50, 3, 100.0]), ((0.25, 2.0), (0.5, 5.0), (5.0, 10.0)))
    # 5 queries with ground truth: (0.1 m, 1 deg) only at 0.25 m / 2 deg; + (0.3, 1), (0.2, 3) at 0.5 / 5; + (4, 9) at 5 / 10.
    assert out["localised_0.25m_2deg"] == pytest.approx(20.0)
    assert out["localised_0.5m_5deg"] == pytest.approx(60.0)
    assert out["localised_5m_10deg"] == pytest.approx(80.0)
    assert out["localised_0.25m_2deg_se"] == pytest.approx(100 * math.sqrt(0.2 * 0.8 / 5))
    assert out["localisation_median_position_error_m"] == pytest.approx(0.25)  # median of 0.1, 0.3, 0.2, 4.0
    assert out["localisation_median_rotation_error_deg"] == pytest.approx(2.0)
    assert out["localisation_registered"] == pytest.approx(100 * 5 / 6)
    assert out["localisation_median_inliers"] == pytest.approx(35.0)
    assert out["localisation_median_matches"] == pytest.approx(75.0)


def test_absolute_pose_recovers_a_known_pose_among_outliers() -> None:
    rng = np.random.default_rng(0)
    rot, trans = look_at(np.array([0.5, -1.0, 1.2]), np.array([0.2, 1.0, -0.1]))
    camera = ("SIMPLE_RADIAL", 640, 480, (500.0, 320.0, 240.0, 0.01))
    cam_points = np.column_stack([rng.uniform(-2, 2, 200), rng.uniform(-1.5, 1.5, 200), rng.uniform(2, 8, 200)])
    world = (cam_points - trans) @ rot  # R^T (x - t)
    xy = cam_points[:, :2] / cam_points[:, 2:]
    r2 = (xy**2).sum(1, keepdims=True)
    pixels = 500.0 * xy * (1 + 0.01 * r2) + np.array([320.0, 240.0])
    pixels[:120] = rng.uniform([0, 0], [640, 480], size=(120, 2))  # 60 % outliers
    pose = absolute_pose(pixels, world, View("q", camera), LocalisationProtocol(ransac_trials=20000), seed=1)
    assert pose is not None
    position, rotation = pose_errors(pose[0], pose[1], rot, trans)
    assert position < 1e-6 and rotation < 1e-6
    assert 78 <= pose[2] <= 85  # the 80 inliers (+ an outlier that lands on its projection by chance)
    assert absolute_pose(pixels[:3], world[:3], View("q", camera), LocalisationProtocol(), seed=1) is None


@pytest.fixture(scope="module")
def tiny_scene(localisation_cache: Path):
    """The small SIMULATED room of examples/localisation.yaml (10 references, 6 queries), as the example builds it."""
    entry = {k: v for k, v in yaml.safe_load(EXAMPLE.read_text())["datasets"][0].items() if k != "name"}
    dataset = Localisation(Localisation.Config(**entry))
    cache = Cache(localisation_cache)
    return dataset.load(CellContext(cache=cache, quiet=True)), dataset.config.sift, cache


def test_raw_sift_localises_queries_of_a_tiny_simulated_room(tiny_scene) -> None:
    scene, sift, cache = tiny_scene
    out = evaluate_utility(scene.private, sift, lambda raw: raw, MatchingConfig(), 0, cache=cache)
    assert out["localisation_queries"] == 6 and out["localisation_map_points"] > 100
    # The small room's map is thin (160 x 120 px photos): at least half of the poses within 0.5 m / 5 deg.
    assert out["localised_0.5m_5deg"] >= 50, out
    assert out["localisation_median_position_error_m"] < 0.3
    assert out["localisation_median_rotation_error_deg"] < 4.0


def test_features_that_match_nothing_localise_nothing(tiny_scene) -> None:
    """Shuffled descriptors keep the keypoints but break every correspondence: the rate must fall to 0."""
    scene, sift, cache = tiny_scene
    rng = np.random.default_rng(0)

    def shuffle(raw):
        from vispriv.plugins.descriptor_release.payloads import RawFeatures

        return RawFeatures(**raw.keypoint_fields(), descriptors=raw.descriptors[rng.permutation(raw.n_keypoints)])

    out = evaluate_utility(scene.private, sift, shuffle, MatchingConfig(), 0, cache=cache)
    assert out["localised_0.25m_2deg"] == 0.0
    assert out["localised_0.25m_2deg_se"] == 0.0


def test_the_scene_is_cached(tiny_scene) -> None:
    scene, _, _ = tiny_scene
    root = scene.private.benchmark.root
    assert (root / ".complete").is_file()
    assert sorted(p.name for p in root.iterdir()) == [".complete", "images", "queries_gt.txt", "queries_with_intrinsics.txt", "sparse"]


def test_error_metrics_are_lower_is_better() -> None:
    from vispriv.plugins.descriptor_release.matching import utility_directions

    names = ["localised_0.25m_2deg", "localised_0.25m_2deg_se", "localisation_median_position_error_m",
             "localisation_median_rotation_error_deg", "localisation_median_inliers", "hpatches_mma_3px"]
    assert utility_directions(dict.fromkeys(names, 1.0)) == {
        "localised_0.25m_2deg": True, "localised_0.25m_2deg_se": False, "localisation_median_position_error_m": False,
        "localisation_median_rotation_error_deg": False, "localisation_median_inliers": True, "hpatches_mma_3px": True,
    }
