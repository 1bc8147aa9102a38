"""The localisation map: SIFT of the reference photos triangulated from their known poses (LDP-Feat section 6.2).

"We generate the pre-built map by extracting SIFT descriptors from the reference images and
triangulating the database model from the camera poses and intrinsics provided." Here:

1. SIFT (the scenario's extractor, :func:`~.sift.extract_features`) of every reference photo,
   at most ``max_side`` px on its longer side; keypoints are mapped back to the photo's own
   pixels in COLMAP's convention (pixel centres at +0.5).
2. Image pairs from the known poses (hloc's ``pairs_from_poses`` idea): each reference with its
   ``pair_neighbours`` nearest references whose optical axes differ by at most
   ``pair_max_angle`` degrees.
3. Raw SIFT matches per pair: mutual nearest neighbour + Lowe's ratio test
   (:func:`~.matching.ratio_match`, the scenario's matcher).
4. Tracks: connected components of the matches (union-find).
5. One 3D point per track by pycolmap's multi-view LO-RANSAC triangulation
   (``estimate_triangulation``, angular residual ``triangulation_max_error`` degrees, minimum
   triangulation angle ``min_triangulation_angle``); tracks with fewer than two inlier views
   are dropped.

The map keeps every inlier observation of each point (its reference image, keypoint and
descriptor), so a query is matched to each reference image's observations in turn, as hloc
matches a query to its retrieved reference images: within one image a point appears once, so
the ratio test compares different points, and a visual word of any view of the point can
match. Built once per reference set and setting (cached).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vispriv.harness import Cache, Images, Progress, no_progress
from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release.frames import read_at_most
from vispriv.plugins.descriptor_release.localisation.reader import Benchmark, View, pycolmap_camera
from vispriv.plugins.descriptor_release.matching import pair_distance, ratio_match
from vispriv.plugins.descriptor_release.payloads import DESCRIPTOR_DIM, RawFeatures
from vispriv.plugins.descriptor_release.sift import SiftConfig, extract_features

MAP_VERSION = "1.1"


@dataclass
class LocalisationMap:
    """3D points (P, 3) and their observations: ``features`` (row o = observation o, its reference
    image in ``image_index``) and ``point`` (O,), the 3D point each observation sees."""

    features: RawFeatures
    points: np.ndarray
    point: np.ndarray

    @property
    def size(self) -> int:
        return len(self.points)

    def image_rows(self) -> list[np.ndarray]:
        """Observation rows of each reference image (the images without a point have none)."""
        return [self.features.rows_of(i) for i in range(len(self.features.image_ids))]


def load_photo(path: Path, max_side: int | None) -> tuple[np.ndarray, float]:
    """A photo in [0, 1] RGB, at most ``max_side`` px on its longer side, and the scale applied."""
    image, f, _ = read_at_most(path, max_side, "localisation photo")
    return image, f


def view_features(path: Path, name: str, sift_cfg: SiftConfig, max_side: int | None, cache: Cache | None) -> RawFeatures:
    """SIFT of one photo with keypoints in the photo's own pixels, COLMAP convention (centre of pixel 0 at 0.5)."""
    image, scale = load_photo(path, max_side)
    raw = extract_features(Images(image[None], [name]), sift_cfg.model_copy(update={"image_size": None}), cache)
    keypoints = (raw.keypoints.astype(np.float64) + 0.5) / scale
    return RawFeatures(**{**raw.keypoint_fields(), "keypoints": keypoints}, descriptors=raw.descriptors)


def reference_pairs(references: list[View], neighbours: int, max_angle: float) -> list[tuple[int, int]]:
    """Pairs (i < j) of references: each with its ``neighbours`` nearest (camera centres) within ``max_angle``."""
    centres = np.stack([v.centre for v in references])
    axes = np.stack([v.rotation[2] for v in references])
    cos_max = np.cos(np.deg2rad(max_angle))
    pairs = set()
    for i in range(len(references)):
        ok = np.flatnonzero((axes @ axes[i] >= cos_max) & (np.arange(len(references)) != i))
        order = ok[np.argsort(np.linalg.norm(centres[ok] - centres[i], axis=1), kind="stable")]
        for j in order[:neighbours]:
            pairs.add((min(i, int(j)), max(i, int(j))))
    return sorted(pairs)


def _tracks(n_nodes: int, edges: np.ndarray) -> list[np.ndarray]:
    """Connected components (of size >= 2) of the graph on ``n_nodes`` with ``edges`` (E, 2), via scipy."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    if len(edges) == 0:
        return []
    graph = coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n_nodes, n_nodes))
    _, labels = connected_components(graph, directed=False)
    order = np.argsort(labels, kind="stable")
    bounds = np.flatnonzero(np.diff(labels[order])) + 1
    return [g for g in np.split(order, bounds) if len(g) >= 2]


def triangulate_map(
    features: list[RawFeatures], references: list[View], pairs: list[tuple[int, int]],
    ratio: float, max_error_deg: float, min_angle_deg: float, seed: int, progress: Progress = no_progress,
) -> dict[str, np.ndarray]:
    """Steps 3-5 of the module docstring: ``points`` (P, 3) and, per observation (inlier view of a
    point), ``descriptors`` (O, 128), ``image`` (O,), ``keypoint`` (O, 2), ``point`` (O,)."""
    import pycolmap

    offsets = np.cumsum([0] + [f.n_keypoints for f in features])
    edges = []
    for i, j in progress(pairs, desc="map: match reference pairs"):
        fi, fj = features[i], features[j]
        if fi.n_keypoints == 0 or fj.n_keypoints == 0:
            continue
        m = ratio_match(pair_distance(fi, np.arange(fi.n_keypoints), fj, np.arange(fj.n_keypoints)), ratio, True)
        edges.append(np.stack([offsets[i] + m[:, 0], offsets[j] + m[:, 1]], axis=1))
    tracks = _tracks(int(offsets[-1]), np.concatenate(edges) if edges else np.zeros((0, 2), np.int64))
    node_image = np.repeat(np.arange(len(features)), np.diff(offsets))
    keypoints = np.concatenate([f.keypoints for f in features]).astype(np.float64)
    descriptors = np.concatenate([f.descriptors for f in features])
    cameras = [pycolmap_camera(v.camera) for v in references]
    poses = [pycolmap.Rigid3d(pycolmap.Rotation3d(v.rotation), np.asarray(v.translation, np.float64)) for v in references]
    options = pycolmap.EstimateTriangulationOptions()
    options.min_tri_angle = float(np.deg2rad(min_angle_deg))
    options.ransac.max_error = float(np.deg2rad(max_error_deg))
    options.ransac.random_seed = int(seed) & 0x7FFFFFFF
    points, rows, owner = [], [], []
    for track in progress(tracks, desc="map: triangulate tracks"):
        images = node_image[track]
        result = pycolmap.estimate_triangulation(
            keypoints[track], [poses[k] for k in images], [cameras[k] for k in images], options
        )
        if result is None:
            continue
        inliers = track[np.asarray(result["inliers"], bool)]
        if len(np.unique(node_image[inliers])) < 2:
            continue
        rows.append(inliers)
        owner.append(np.full(len(inliers), len(points)))
        points.append(np.asarray(result["xyz"], np.float64).reshape(3))
    rows_arr = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    order = np.argsort(node_image[rows_arr], kind="stable")  # observations grouped by reference image
    rows_arr = rows_arr[order]
    return {
        "points": np.asarray(points, np.float64).reshape(-1, 3),
        "descriptors": descriptors[rows_arr] if len(rows_arr) else np.zeros((0, DESCRIPTOR_DIM), np.float32),
        "image": node_image[rows_arr],
        "keypoint": keypoints[rows_arr].reshape(-1, 2),
        "point": np.concatenate(owner)[order] if owner else np.zeros(0, np.int64),
    }


def _reference_fingerprint(bench: Benchmark) -> list[object]:
    """What identifies the reference set: names, cameras, poses, and each photo's size and mtime."""
    out: list[object] = []
    for v in bench.references:
        stat = bench.image_path(v).stat()
        out.append([v.name, list(v.camera[:3]), list(v.camera[3]), np.round(v.rotation, 9).tolist(),
                    np.round(v.translation, 9).tolist(), stat.st_size, stat.st_mtime_ns])
    return out


def build_map(
    bench: Benchmark, sift_cfg: SiftConfig, max_side: int | None, neighbours: int, max_angle: float, ratio: float,
    max_error_deg: float, min_angle_deg: float, seed: int = 0, cache: Cache | None = None,
    progress: Progress = no_progress,
) -> LocalisationMap:
    """The triangulated map of ``bench``'s references (module docstring), cached by content."""
    cache = cache or Cache(None)
    parts = {
        "version": MAP_VERSION, "refs": _reference_fingerprint(bench), "sift": sift_cfg, "max_side": max_side,
        "neighbours": neighbours, "max_angle": max_angle, "ratio": ratio, "max_error": max_error_deg,
        "min_angle": min_angle_deg, "seed": seed,
    }

    def compute() -> dict[str, np.ndarray]:
        feats = [
            view_features(bench.image_path(v), v.name, sift_cfg, max_side, cache)
            for v in progress(bench.references, desc="map: SIFT of the references")
        ]
        pairs = reference_pairs(bench.references, neighbours, max_angle)
        return triangulate_map(feats, bench.references, pairs, ratio, max_error_deg, min_angle_deg, seed, progress)

    arrays = cache.arrays("localisation-map", parts, compute)
    if len(arrays["points"]) == 0:
        raise InputError(
            f"no 3D point could be triangulated from the {len(bench.references)} reference photos under "
            f"{bench.images_dir}; the references need overlapping views"
        )
    names = [v.name for v in bench.references]
    features = RawFeatures(
        keypoints=arrays["keypoint"], image_index=arrays["image"], image_ids=names,
        image_size=(0, 0), descriptors=arrays["descriptors"],
    )
    return LocalisationMap(features, arrays["points"], arrays["point"])
