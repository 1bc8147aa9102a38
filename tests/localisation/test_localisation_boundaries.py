"""The localisation utility's arithmetic at its boundaries, by hand: a query exactly at a threshold, the inlier
floor, the fewest correspondences, retrieval's vote and its ties, repeated 2D-3D pairs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vispriv.plugins.descriptor_release.localisation import LocalisationProtocol, absolute_pose, summarise
from vispriv.plugins.descriptor_release.localisation.reader import View
from vispriv.plugins.descriptor_release.localisation.render import look_at
from vispriv.plugins.descriptor_release.localisation.utility import match_to_map, threshold_name
from vispriv.plugins.descriptor_release.matching import MatchingConfig

WORDS = MatchingConfig(criterion="vocabulary")


def _same_word(query, q_rows, ref, r_rows):
    """A vocabulary distance on integer words: 0 where the words agree."""
    return np.abs(query[q_rows][:, None] - ref[r_rows][None, :]).astype(float)


def test_a_query_exactly_at_both_thresholds_is_localised():
    position, rotation = np.array([0.25, 0.25, 0.2500001]), np.array([2.0, 2.0000001, 2.0])
    ones = np.ones(3, bool)
    out = summarise(position, rotation, ones, ones, np.zeros(3), np.zeros(3), ((0.25, 2.0),))
    assert out["localised_0.25m_2deg"] == pytest.approx(100 / 3)  # only the first: the others miss by 1e-7
    assert out["localised_0.25m_2deg_se"] == pytest.approx(100 * math.sqrt((1 / 3) * (2 / 3) / 3))


def test_no_ground_truth_no_rate_and_no_registered_query_no_median():
    n = 2
    out = summarise(np.full(n, np.inf), np.full(n, np.inf), np.zeros(n, bool), np.zeros(n, bool), np.zeros(n),
                    np.array([3.0, 5.0]), ((0.5, 5.0),))
    assert out == {"localisation_queries": 2.0, "localisation_registered": 0.0, "localisation_median_inliers": 0.0,
                   "localisation_median_matches": 4.0}
    truth = np.ones(n, bool)
    out = summarise(np.full(n, np.inf), np.full(n, np.inf), truth, np.zeros(n, bool), np.zeros(n), np.zeros(n), ((0.5, 5.0),))
    assert out["localised_0.5m_5deg"] == 0.0 and out["localised_0.5m_5deg_se"] == 0.0
    assert "localisation_median_position_error_m" not in out
    assert threshold_name(0.25, 2.0) == "localised_0.25m_2deg" and threshold_name(5.0, 10.0) == "localised_5m_10deg"


def _correspondences(n: int):
    rng = np.random.default_rng(0)
    rot, trans = look_at(np.array([0.5, -1.0, 1.2]), np.array([0.2, 1.0, -0.1]))
    cam = np.column_stack([rng.uniform(-2, 2, n), rng.uniform(-1.5, 1.5, n), rng.uniform(2, 8, n)])
    world = (cam - trans) @ rot
    pixels = 500.0 * cam[:, :2] / cam[:, 2:] + np.array([320.0, 240.0])
    return pixels, world, View("q", ("SIMPLE_PINHOLE", 640, 480, (500.0, 320.0, 240.0)))


def test_the_inlier_floor_is_inclusive_and_three_points_are_too_few():
    pixels, world, view = _correspondences(40)
    pose = absolute_pose(pixels, world, view, LocalisationProtocol(ransac_trials=200, min_inliers=40), seed=0)
    assert pose is not None and pose[2] == 40  # every correspondence is exact: 40 inliers, at the floor
    assert absolute_pose(pixels, world, view, LocalisationProtocol(ransac_trials=200, min_inliers=41), seed=0) is None
    assert absolute_pose(pixels[:3], world[:3], view, LocalisationProtocol(ransac_trials=200), seed=0) is None


def test_matches_to_the_map_are_unique_2d_3d_pairs_and_retrieval_keeps_the_most_voted_images():
    query = np.array([1, 2, 3])  # one visual word per query keypoint
    reference = np.array([1, 9, 2, 3, 1, 7])  # the map's observations
    point = np.array([10, 11, 12, 13, 15, 14])  # observation -> 3D point
    per_image = [np.array([0, 1]), np.array([2, 3, 4]), np.array([5])]
    every = match_to_map(query, 3, reference, per_image, point, _same_word, WORDS, None)
    assert every.tolist() == [[0, 10], [0, 15], [1, 12], [2, 13]]
    assert match_to_map(query, 3, reference, per_image, point, _same_word, WORDS, 1).tolist() == [[0, 15], [1, 12], [2, 13]]
    assert match_to_map(query, 3, reference, per_image, point, _same_word, WORDS, 2).tolist() == every.tolist()
    # the same 2D-3D pair seen from two images counts once
    twice = match_to_map(query, 3, np.array([1, 1]), [np.array([0]), np.array([1])], np.array([10, 10]), _same_word,
                         WORDS, None)
    assert twice.tolist() == [[0, 10]]
    # a tie in the vote goes to the image listed first
    tied = [np.array([2]), np.array([0])]  # one match each: word 2 (point 12), word 1 (point 10)
    assert match_to_map(query, 3, reference, tied, point, _same_word, WORDS, 1).tolist() == [[1, 12]]
    assert match_to_map(np.array([5]), 1, reference, per_image, point, _same_word, WORDS, None).shape == (0, 2)
