"""Visual localisation utility of a descriptor defense (LDP-Feat section 6.2, Tables 2 and 3).

The server holds a map (reference SIFT triangulated from known poses, :mod:`.map`);
a user sends the defense's release of each query photo's SIFT; the server matches the release
to the map with the defense's own matcher and registers the query by absolute pose. As in the
paper (and in ref [11]), only the queries are protected; the map is raw.

Per query:

* SIFT of the photo (at most ``max_side`` px; keypoints back in the photo's pixels),
  ``protect`` (the defense), then matches to the map's points by
  :func:`~.matching._match_rows` with the defense's distance and ``MatchingConfig``: mutual
  nearest neighbour + ratio test for raw and lifted features, and for LDP-Feat's candidates
  (min over the m candidates), or vocabulary matching (every observation whose visual word is
  one of the query keypoint's m released words, Nister & Stewenius [28]; Table 3's voc-match),
  against each reference image's observations in turn (:func:`match_to_map`). Every match of
  a keypoint is a 2D-3D correspondence (one 2D point may meet several 3D points; repeated
  pairs count once).
* pycolmap's ``estimate_and_refine_absolute_pose``: LO-RANSAC (P3P) with the query's known
  intrinsics, then non-linear refinement; ``ransac_trials`` is the RANSAC budget (Table 3's
  RANSAC iterations), ``ransac_max_error`` the inlier threshold in px (hloc: 12 px at Aachen's
  1024-1600 px photos), ``ransac_min_inlier_ratio`` COLMAP's assumed worst inlier ratio, which
  caps the trials (COLMAP's default 0.1 allows ~35k P3P trials, so 1M needs it below 0.03).
* Errors against the ground truth: camera-centre distance (m) and the angle of R_est R_gt^T (deg).

Reported (``utility/`` in MLflow; percentages in 0..100 as the paper prints them):
``localised_{t}m_{r}deg`` -- % of queries (with ground truth) within t metres and r degrees,
a query without a pose counting as not localised -- with its binomial standard error
``localised_{t}m_{r}deg_se``; ``localisation_registered`` (% with a pose);
``localisation_median_position_error_m`` / ``_rotation_error_deg`` over the registered queries;
``localisation_median_inliers`` and ``localisation_median_matches`` over all queries (0 when
none); ``localisation_queries``, ``localisation_map_points``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import Field

from vispriv.harness import Cache, Images, PluginConfig, Progress, no_progress
from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release.localisation.map import LocalisationMap, build_map, view_features
from vispriv.plugins.descriptor_release.localisation.reader import Benchmark, View, pycolmap_camera
from vispriv.plugins.descriptor_release.sift import SiftConfig

#: Table 2's thresholds: (metres, degrees).
PAPER_THRESHOLDS: tuple[tuple[float, float], ...] = ((0.25, 2.0), (0.5, 5.0), (5.0, 10.0))


class LocalisationProtocol(PluginConfig):
    """Settings of the localisation evaluation (map building, matching scale, RANSAC, thresholds)."""

    max_side: int | None = Field(None, ge=32, description="SIFT on photos resized to this longer side; None = full size")
    query_keypoints: int | None = Field(None, ge=1, le=20000, description="SIFT keypoints per query; None = the defense's sift.max_keypoints")
    map_keypoints: int | None = Field(None, ge=1, le=20000, description="SIFT keypoints per reference; None = as the queries")
    pair_neighbours: int = Field(8, ge=1, description="map: pairs of each reference with its nearest references")
    pair_max_angle: float = Field(75.0, gt=0.0, le=180.0, description="map: largest angle (deg) between paired optical axes")
    map_ratio: float = Field(0.8, gt=0.0, le=1.0, description="map: ratio test of the reference matches")
    triangulation_max_error: float = Field(1.0, gt=0.0, description="map: angular inlier threshold (deg) of triangulation")
    min_triangulation_angle: float = Field(1.5, ge=0.0, description="map: smallest triangulation angle (deg)")
    ransac_trials: int = Field(100_000, ge=1, description="LO-RANSAC budget (max trials) of the absolute pose")
    ransac_max_error: float = Field(12.0, gt=0.0, description="inlier threshold of the absolute pose (px)")
    ransac_min_inlier_ratio: float = Field(0.01, gt=0.0, le=1.0, description="COLMAP's assumed worst inlier ratio (caps trials)")
    retrieval: int | None = Field(None, ge=1, description="keep the matches of the N reference images with most matches; None = all")
    min_inliers: int = Field(0, ge=0, description="a pose with fewer inliers counts as not registered")
    thresholds: tuple[tuple[float, float], ...] = Field(PAPER_THRESHOLDS, description="(metres, degrees) pairs")


@dataclass
class LocalisationImages(Images):
    """The query photos (square-resized: what the attacks see) plus the benchmark the utility reads.

    ``images`` / ``ids`` are the private photos whose SIFT the defense releases; ``benchmark``
    holds the posed references, the queries' intrinsics and ground truth (public in a
    benchmark; the ground truth reaches the utility evaluation only).
    """

    benchmark: Benchmark | None = None
    protocol: LocalisationProtocol = field(default_factory=LocalisationProtocol)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.benchmark is None or len(self.benchmark.queries) != len(self.images):
            n = 0 if self.benchmark is None else len(self.benchmark.queries)
            raise InputError(f"LocalisationImages: {len(self.images)} images but {n} benchmark queries")


def pose_errors(rot_est: np.ndarray, trans_est: np.ndarray, rot_gt: np.ndarray, trans_gt: np.ndarray) -> tuple[float, float]:
    """(position error in metres, rotation error in degrees) of an estimated cam_from_world pose."""
    centre_est, centre_gt = -rot_est.T @ trans_est, -rot_gt.T @ trans_gt
    cos = (np.trace(rot_est @ rot_gt.T) - 1.0) / 2.0
    return float(np.linalg.norm(centre_est - centre_gt)), float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))))


def threshold_name(metres: float, degrees: float) -> str:
    """``localised_0.25m_2deg`` for (0.25, 2)."""
    return f"localised_{metres:g}m_{degrees:g}deg"


def summarise(position: np.ndarray, rotation: np.ndarray, has_truth: np.ndarray, registered: np.ndarray,
              inliers: np.ndarray, matches: np.ndarray, thresholds: tuple[tuple[float, float], ...]) -> dict[str, float]:
    """Per-query results -> the reported metrics (module docstring). Unregistered queries have infinite errors."""
    out: dict[str, float] = {"localisation_queries": float(len(registered))}
    n_truth = int(has_truth.sum())
    if n_truth:
        for metres, degrees in thresholds:
            ok = (position[has_truth] <= metres) & (rotation[has_truth] <= degrees)
            p = float(np.mean(ok))
            out[threshold_name(metres, degrees)] = 100.0 * p
            out[threshold_name(metres, degrees) + "_se"] = 100.0 * math.sqrt(p * (1.0 - p) / n_truth)
        done = has_truth & registered
        if done.any():
            out["localisation_median_position_error_m"] = float(np.median(position[done]))
            out["localisation_median_rotation_error_deg"] = float(np.median(rotation[done]))
    out["localisation_registered"] = 100.0 * float(np.mean(registered)) if len(registered) else 0.0
    out["localisation_median_inliers"] = float(np.median(inliers)) if len(inliers) else 0.0
    out["localisation_median_matches"] = float(np.median(matches)) if len(matches) else 0.0
    return out


def absolute_pose(points2d: np.ndarray, points3d: np.ndarray, view: View, protocol: LocalisationProtocol, seed: int) -> tuple[np.ndarray, np.ndarray, int] | None:
    """pycolmap LO-RANSAC + refinement: (R, t, inliers) of cam_from_world, or None when it fails."""
    import pycolmap

    if len(points2d) < 4:
        return None
    estimation = pycolmap.AbsolutePoseEstimationOptions()
    estimation.ransac.max_error = protocol.ransac_max_error
    estimation.ransac.max_num_trials = protocol.ransac_trials
    estimation.ransac.min_inlier_ratio = protocol.ransac_min_inlier_ratio
    estimation.ransac.random_seed = int(seed) & 0x7FFFFFFF
    result = pycolmap.estimate_and_refine_absolute_pose(
        np.ascontiguousarray(points2d, np.float64), np.ascontiguousarray(points3d, np.float64),
        pycolmap_camera(view.camera), estimation, pycolmap.AbsolutePoseRefinementOptions(),
    )
    if result is None:
        return None
    pose = result["cam_from_world"]
    n_inliers = int(result["num_inliers"])
    if n_inliers < protocol.min_inliers:
        return None
    return pose.rotation.matrix(), np.asarray(pose.translation, np.float64), n_inliers


def localisation_map(
    bench: Benchmark, sift_cfg: SiftConfig, protocol: LocalisationProtocol, cache: Cache | None, progress: Progress = no_progress,
) -> LocalisationMap:
    """The benchmark's map at the protocol's settings (cached)."""
    keypoints = protocol.map_keypoints or protocol.query_keypoints or sift_cfg.max_keypoints
    cfg = sift_cfg.model_copy(update={"image_size": None, "max_keypoints": keypoints})
    return build_map(
        bench, cfg, protocol.max_side, protocol.pair_neighbours, protocol.pair_max_angle, protocol.map_ratio,
        protocol.triangulation_max_error, protocol.min_triangulation_angle, cache=cache, progress=progress,
    )


def match_to_map(
    release: Any, n_query: int, reference: Any, per_image: list[np.ndarray], point: np.ndarray,
    distance: Any, cfg: Any, retrieval: int | None,
) -> np.ndarray:
    """Unique 2D-3D pairs (query row, point id): the query matched to each reference image's observations.

    ``retrieval`` keeps the matches of the ``retrieval`` reference images with the most matches
    (a vote standing in for the paper's image retrieval); None keeps every image's.
    """
    from vispriv.plugins.descriptor_release.matching import _match_rows

    q_rows = np.arange(n_query)
    found = [_match_rows(release, q_rows, reference, rows, distance, cfg) for rows in per_image]
    if retrieval is not None:
        keep = np.argsort([-len(m) for m in found], kind="stable")[:retrieval]
        found = [found[k] for k in keep]
    found = [m for m in found if len(m)]
    if not found:
        return np.zeros((0, 2), np.int64)
    pairs = np.concatenate(found)
    return np.unique(np.stack([pairs[:, 0], point[pairs[:, 1]]], axis=1), axis=0)


def localisation_utility(
    queries: LocalisationImages, sift_cfg: SiftConfig, protect: Any, cfg: Any, seed: int, distance: Any,
    protect_reference: bool = False, cache: Cache | None = None, progress: Progress | None = None,
) -> dict[str, float]:
    """Localise every query of ``queries.benchmark`` from its protected features (module docstring).

    Arguments as :func:`~.matching.evaluate_utility` (``cfg`` is its ``MatchingConfig``);
    ``protect_reference`` also protects the map (lifted-to-lifted), which the paper does not do;
    ``progress`` wraps the long loops (the cell's :meth:`CellContext.progress`; none when ``None``).
    """
    progress = progress or no_progress
    bench, protocol = queries.benchmark, queries.protocol
    assert bench is not None
    world = localisation_map(bench, sift_cfg, protocol, cache, progress)
    reference = protect(world.features) if protect_reference else world.features
    per_image = [rows for rows in world.image_rows() if len(rows)]
    q_cfg = sift_cfg.model_copy(update={"image_size": None, "max_keypoints": protocol.query_keypoints or sift_cfg.max_keypoints})
    n = len(bench.queries)
    position, rotation = np.full(n, np.inf), np.full(n, np.inf)
    has_truth, registered = np.zeros(n, bool), np.zeros(n, bool)
    inliers, matches = np.zeros(n), np.zeros(n)
    for i, view in enumerate(progress(bench.queries, desc="localise queries")):
        raw = view_features(bench.image_path(view), view.name, q_cfg, protocol.max_side, cache)
        release = protect(raw)
        pairs = match_to_map(release, raw.n_keypoints, reference, per_image, world.point, distance, cfg, protocol.retrieval)
        matches[i] = len(pairs)
        pose = absolute_pose(raw.keypoints[pairs[:, 0]], world.points[pairs[:, 1]], view, protocol, seed + i) if len(pairs) else None
        has_truth[i] = view.rotation is not None
        if pose is None:
            continue
        registered[i] = True
        inliers[i] = pose[2]
        if has_truth[i]:
            position[i], rotation[i] = pose_errors(pose[0], pose[1], view.rotation, view.translation)
    out = summarise(position, rotation, has_truth, registered, inliers, matches, protocol.thresholds)
    out["localisation_map_points"] = float(world.size)
    return out


#: Metric names (and suffixes) of this utility where lower is better.
LOWER_IS_BETTER_SUFFIXES = ("_se", "_error_m", "_error_deg")
