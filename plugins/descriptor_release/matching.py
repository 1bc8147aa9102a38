"""Utility of a descriptor defense: matching + geometric verification (LDP-Feat (ICCV 2023) sections 3, 6.2).

A defense is useful when a server can still match the protected features of a query image
against raw features of a reference image and verify the match geometrically. This
module measures that on two kinds of image pairs:

* **Synthetic homography pairs** (HPatches-style, made from the test images): each test
  image is warped by ``homographies_per_image`` random homographies (corners displaced by
  up to ``homography_strength`` x the image side). The original image is the query
  (protected), the warp the reference (raw). Reported under ``warp_*`` (what was measured:
  synthetic warps of the dataset's own images, not the HPatches benchmark, whose real pairs
  keep the ``hpatches_*`` names): mean matching accuracy of the putative matches at 1..5 px
  (``warp_mma_{t}px``, the fraction of matches whose query keypoint, mapped by the true
  homography, lands within t px of the reference keypoint, averaged over pairs), the
  fraction of pairs whose homography kornia's RANSAC recovers (mean corner error <=
  ``corner_threshold`` px, ``warp_homography_acc``) and the mean number of matches
  (``warp_n_matches``).
* **The scikit-image motorcycle stereo pair** (rectified, ground-truth disparity): left
  image protected, right raw; ``stereo_mma_{t}px`` over matches with a known disparity, and
  the fraction of putative matches kept by a fundamental-matrix RANSAC
  (``stereo_ransac_inliers``).

Matching is the mutual nearest neighbour with Lowe's ratio test on the distance a
``DistanceFn`` returns: Euclidean raw-to-raw, point-to-subspace raw-to-lifted,
subspace-to-subspace lifted-to-lifted (:func:`pair_distance`, ref [11]).

Public API (stable; the recovery attacks build on it)::

    evaluate_utility(images, sift_cfg, protect, cfg, seed, distance=pair_distance,
                     protect_reference=False, cache=None) -> dict[str, float]

``protect`` maps raw features (:class:`RawFeatures`) to any keypointed release payload
of the same rows; ``distance(a, a_rows, b, b_rows)`` returns the (len(a_rows), len(b_rows))
distance matrix between rows of two payloads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from pydantic import Field

from vispriv.harness import Cache, Images, PluginConfig, Progress, blas_threads
from vispriv.harness.errors import ConfigError, InputError
from vispriv.plugins.descriptor_release.payloads import LiftedFeatures, RawFeatures
from vispriv.plugins.descriptor_release.sift import SiftConfig, extract_features
from vispriv.plugins.descriptor_release.subspace import point_subspace_sqdist, subspace_sqdist

ProtectFn = Callable[[RawFeatures], Any]
DistanceFn = Callable[[Any, np.ndarray, Any, np.ndarray], np.ndarray]


class MatchingConfig(PluginConfig):
    """Settings of the utility evaluator (shared by every defense that reports matching utility)."""

    criterion: Literal["mutual-nn", "vocabulary"] = Field(
        "mutual-nn", description="mutual-nn: nearest neighbour + ratio test (+ mutual check) on the distance; "
        "vocabulary: every pair at distance 0, i.e. sharing a visual word (LDP-Feat, ICCV 2023, Table 3; "
        "vocabulary matching [28]); needs a defense whose distance defines words (ldp-feat)"
    )
    ratio: float = Field(0.8, gt=0.0, le=1.0)
    mutual: bool = True
    homographies_per_image: int = Field(2, ge=0, le=50)
    homography_strength: float = Field(0.15, ge=0.0, le=0.3)
    warp_seed: int = Field(
        0, ge=0, description="seed of the warped test pairs: the same pairs for every defense and cell "
        "(common random numbers, so a sweep compares like with like); RANSAC uses the cell's seed"
    )
    ransac_threshold: float = Field(3.0, gt=0.0)
    ransac_max_iter: int = Field(10, ge=1)
    corner_threshold: float = Field(5.0, gt=0.0)
    thresholds: tuple[int, ...] = (1, 2, 3, 4, 5)
    stereo: bool = True
    stereo_width: int = Field(256, ge=64, le=741)


# -- distances and matching -------------------------------------------------------------
def squared_distances(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(len(x), len(y)) squared Euclidean distances ``|x|^2 + |y|^2 - 2 x.y`` in float64.

    Released dictionary words repeat, so their distances to a reference tie. A BLAS ``gemm``
    rounds a row by where it falls in its kernel's tiles and by the thread count, so two copies
    of one row could differ in the last bit, by machine (AVX-512 vs AVX2 kernels) and core
    count, and mutual nearest neighbours would break the tie differently on another machine.
    The distinct rows of ``x`` and ``y`` are multiplied once, on one BLAS thread, and equal rows
    share their distances bit for bit (a tie then goes to the first row, ``np.argmin``'s rule).
    """
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    xu, x_of = _distinct_rows(x)
    yu, y_of = _distinct_rows(y)
    with blas_threads(1):
        sq = (xu * xu).sum(1)[:, None] + (yu * yu).sum(1)[None, :] - 2.0 * xu @ yu.T
    return sq[x_of][:, y_of]


def _distinct_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``a`` and, for each row of ``a``, the index of its distinct row."""
    if len(a) < 2:
        return a, np.arange(len(a))
    distinct, of = np.unique(a, axis=0, return_inverse=True)
    return distinct, of.reshape(-1)


def pair_distance(a: Any, a_rows: np.ndarray, b: Any, b_rows: np.ndarray) -> np.ndarray:
    """Distances between rows of two feature payloads (raw or lifted), (len(a_rows), len(b_rows)).

    raw-raw: Euclidean; lifted-raw (either order): point-to-subspace ``||w - p_D(w)||``;
    lifted-lifted: subspace-to-subspace (ref [11]).
    """
    if isinstance(a, RawFeatures) and isinstance(b, RawFeatures):
        sq = squared_distances(a.descriptors[a_rows], b.descriptors[b_rows])
    elif isinstance(a, LiftedFeatures) and isinstance(b, RawFeatures):
        sq = point_subspace_sqdist(b.descriptors[b_rows], a.offsets[a_rows], a.bases[a_rows])
    elif isinstance(a, RawFeatures) and isinstance(b, LiftedFeatures):
        sq = point_subspace_sqdist(a.descriptors[a_rows], b.offsets[b_rows], b.bases[b_rows]).T
    elif isinstance(a, LiftedFeatures) and isinstance(b, LiftedFeatures):
        sq = subspace_sqdist(a.offsets[a_rows], a.bases[a_rows], b.offsets[b_rows], b.bases[b_rows])
    else:
        raise InputError(f"no distance between {type(a).__name__} and {type(b).__name__}")
    return np.sqrt(np.maximum(np.asarray(sq, np.float64), 0.0))


def ratio_match(dist: np.ndarray, ratio: float = 0.8, mutual: bool = True) -> np.ndarray:
    """Matches (M, 2) of query row -> reference column: nearest neighbour, Lowe's ratio test, mutual check.

    The ratio test keeps a query whose nearest distance is below ``ratio`` x its second
    nearest (always kept when there is a single reference).
    """
    dist = np.asarray(dist, np.float64)
    if dist.ndim != 2 or dist.shape[0] == 0 or dist.shape[1] == 0:
        return np.zeros((0, 2), np.int64)
    nn = np.argmin(dist, axis=1)
    q = np.arange(len(dist))
    keep = np.ones(len(dist), bool)
    if dist.shape[1] > 1 and ratio < 1.0:
        two = np.partition(dist, 1, axis=1)[:, :2]
        keep &= two[:, 0] < ratio * two[:, 1]
    if mutual:
        keep &= np.argmin(dist, axis=0)[nn] == q
    return np.stack([q[keep], nn[keep]], axis=1).astype(np.int64)


# -- geometry ---------------------------------------------------------------------------
def homography_from_corners(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The 3x3 homography mapping 4 (x, y) points ``src`` to ``dst`` (direct linear solve)."""
    a, b = [], []
    for (x, y), (u, v) in zip(src, dst):
        a.append([x, y, 1, 0, 0, 0, -u * x, -u * y])
        a.append([0, 0, 0, x, y, 1, -v * x, -v * y])
        b += [u, v]
    h = np.linalg.solve(np.asarray(a, np.float64), np.asarray(b, np.float64))
    return np.append(h, 1.0).reshape(3, 3)


def apply_homography(h: np.ndarray, points: np.ndarray) -> np.ndarray:
    """(N, 2) points mapped by the 3x3 homography ``h``."""
    p = np.concatenate([np.asarray(points, np.float64), np.ones((len(points), 1))], axis=1) @ h.T
    return p[:, :2] / p[:, 2:3]


def random_homography(rng: np.random.Generator, height: int, width: int, strength: float) -> np.ndarray:
    """A homography moving each image corner by up to ``strength`` x the side (HPatches-like)."""
    corners = np.array([[0, 0], [width - 1, 0], [width - 1, height - 1], [0, height - 1]], np.float64)
    moved = corners + rng.uniform(-strength, strength, size=(4, 2)) * np.array([width, height])
    return homography_from_corners(corners, moved)


def warp_image(image: np.ndarray, h: np.ndarray) -> np.ndarray:
    """``image`` seen through the homography ``h`` (output pixel y shows input pixel h^-1 y).

    ``image`` may be read-only (cached and shared arrays are): skimage's Cython ``warp``
    refuses read-only buffers, so it gets a private float64 copy.
    """
    from skimage.transform import ProjectiveTransform, warp

    inverse = ProjectiveTransform(matrix=np.linalg.inv(h))
    return warp(np.array(image, dtype=np.float64), inverse, mode="constant", cval=0.0, preserve_range=True).astype(np.float32)


def corner_error(h_est: np.ndarray, h_true: np.ndarray, height: int, width: int) -> float:
    """Mean distance of the four image corners mapped by the estimated and the true homography."""
    corners = np.array([[0, 0], [width - 1, 0], [width - 1, height - 1], [0, height - 1]], np.float64)
    return float(np.mean(np.linalg.norm(apply_homography(h_est, corners) - apply_homography(h_true, corners), axis=1)))


def ransac(src: np.ndarray, dst: np.ndarray, model: str, threshold: float, max_iter: int, seed: int) -> tuple[np.ndarray | None, np.ndarray]:
    """kornia RANSAC of a ``homography`` or ``fundamental`` model: (3x3 model or None, inlier mask)."""
    import torch
    from kornia.geometry.ransac import RANSAC

    minimal = 4 if model == "homography" else 8
    if len(src) <= minimal:
        return None, np.zeros(len(src), bool)
    estimator = RANSAC(model_type=model, inl_th=threshold, max_iter=max_iter, seed=int(seed) & 0x7FFFFFFF)
    with torch.no_grad():
        est, inliers = estimator(
            torch.as_tensor(src, dtype=torch.float32), torch.as_tensor(dst, dtype=torch.float32)
        )
    est_np = est.double().numpy()
    if not np.any(est_np) or not np.all(np.isfinite(est_np)):
        return None, inliers.numpy().astype(bool)
    return est_np, inliers.numpy().astype(bool)


# -- the evaluator ----------------------------------------------------------------------
def _match_rows(
    query: Any, q_rows: np.ndarray, ref: Any, r_rows: np.ndarray, distance: DistanceFn, cfg: MatchingConfig
) -> np.ndarray:
    if len(q_rows) == 0 or len(r_rows) == 0:
        return np.zeros((0, 2), np.int64)
    dist = distance(query, q_rows, ref, r_rows)
    m = np.argwhere(dist <= 0.0) if cfg.criterion == "vocabulary" else ratio_match(dist, cfg.ratio, cfg.mutual)
    return np.stack([q_rows[m[:, 0]], r_rows[m[:, 1]]], axis=1) if len(m) else m


def _homography_utility(
    images: Images, sift_cfg: SiftConfig, protect: ProtectFn, cfg: MatchingConfig, seed: int,
    distance: DistanceFn, protect_reference: bool, cache: Cache | None,
) -> dict[str, float]:
    rng = np.random.default_rng(cfg.warp_seed)
    n_img, h, w = images.images.shape[:3]
    truths, warped, ids, sources = [], [], [], []
    for i in range(n_img):
        for j in range(cfg.homographies_per_image):
            hom = random_homography(rng, h, w, cfg.homography_strength)
            truths.append(hom)
            warped.append(warp_image(images.images[i], hom))
            ids.append(f"{images.ids[i]}#H{j}")
            sources.append(i)
    query_raw = extract_features(images, sift_cfg, cache)
    ref_raw = extract_features(Images(np.stack(warped), ids), sift_cfg, cache)
    query = protect(query_raw)
    ref = protect(ref_raw) if protect_reference else ref_raw
    mma = {t: [] for t in cfg.thresholds}
    recovered, n_matches = [], []
    for p, (hom, i) in enumerate(zip(truths, sources)):
        matches = _match_rows(query, query_raw.rows_of(i), ref, ref_raw.rows_of(p), distance, cfg)
        n_matches.append(len(matches))
        src, dst = query_raw.keypoints[matches[:, 0]], ref_raw.keypoints[matches[:, 1]]
        err = np.linalg.norm(apply_homography(hom, src) - dst, axis=1) if len(matches) else np.zeros(0)
        for t in cfg.thresholds:
            mma[t].append(float(np.mean(err <= t)) if len(err) else 0.0)
        est, _ = ransac(src, dst, "homography", cfg.ransac_threshold, cfg.ransac_max_iter, seed + p)
        recovered.append(est is not None and corner_error(est, hom, h, w) <= cfg.corner_threshold)
    out = {f"warp_mma_{t}px": float(np.mean(v)) for t, v in mma.items()}
    out["warp_homography_acc"] = float(np.mean(recovered))
    out["warp_n_matches"] = float(np.mean(n_matches))
    return out


def _stereo_utility(
    sift_cfg: SiftConfig, protect: ProtectFn, cfg: MatchingConfig, seed: int,
    distance: DistanceFn, protect_reference: bool, cache: Cache | None,
) -> dict[str, float]:
    from vispriv.harness.data.bundled import load_stereo_motorcycle

    left, right, disp = load_stereo_motorcycle(cfg.stereo_width)
    left_raw = extract_features(Images(left[None], ["motorcycle_left"]), sift_cfg, cache)
    right_raw = extract_features(Images(right[None], ["motorcycle_right"]), sift_cfg, cache)
    query = protect(left_raw)
    ref = protect(right_raw) if protect_reference else right_raw
    matches = _match_rows(
        query, np.arange(left_raw.n_keypoints), ref, np.arange(right_raw.n_keypoints), distance, cfg
    )
    out: dict[str, float] = {"stereo_n_matches": float(len(matches))}
    src, dst = left_raw.keypoints[matches[:, 0]], right_raw.keypoints[matches[:, 1]]
    xi = np.clip(np.round(src[:, 0]).astype(int), 0, disp.shape[1] - 1)
    yi = np.clip(np.round(src[:, 1]).astype(int), 0, disp.shape[0] - 1)
    d = disp[yi, xi] if len(matches) else np.zeros(0)
    known = np.isfinite(d)
    for t in cfg.thresholds:
        ok = (np.abs(dst[known, 0] - (src[known, 0] - d[known])) <= t) & (np.abs(dst[known, 1] - src[known, 1]) <= t)
        out[f"stereo_mma_{t}px"] = float(np.mean(ok)) if known.any() else 0.0
    _, inliers = ransac(src, dst, "fundamental", cfg.ransac_threshold, cfg.ransac_max_iter, seed)
    out["stereo_ransac_inliers"] = float(np.mean(inliers)) if len(inliers) else 0.0
    return out


def evaluate_utility(
    images: Images,
    sift_cfg: SiftConfig,
    protect: ProtectFn,
    cfg: MatchingConfig,
    seed: int,
    distance: DistanceFn = pair_distance,
    protect_reference: bool = False,
    cache: Cache | None = None,
    progress: Progress | None = None,
) -> dict[str, float]:
    """Matching utility of a defense: homography pairs of ``images`` and the motorcycle stereo pair.

    Args:
        images: test images (queries); each is warped by random homographies to make references,
            except :class:`~vispriv.plugins.descriptor_release.hpatches.HPatchesImages`, whose real
            HPatches pairs and ground-truth homographies are evaluated instead (``hpatches.py``).
        sift_cfg: SIFT settings of both sides (``image_size`` resizes the test images first).
        protect: the defense as a function of raw features (identity for ``none``).
        cfg: matching, RANSAC and pair settings.
        seed: seeds RANSAC (the homographies come from ``cfg.warp_seed``).
        distance: distance between rows of the protected query and the reference payloads.
        protect_reference: also protect the reference (lifted-to-lifted matching).
        cache: caches the SIFT extraction.
        progress: the cell's progress wrapper (``CellContext.progress``: off with ``--quiet``);
            only the localisation benchmark's long loops use it.

    Returns:
        ``warp_mma_{t}px``, ``warp_homography_acc``, ``warp_n_matches`` (synthetic warps; the
        real HPatches pairs give ``hpatches_*``, see ``hpatches.py``) and, with ``cfg.stereo``, ``stereo_mma_{t}px``, ``stereo_ransac_inliers``, ``stereo_n_matches``.
        All are higher-is-better (:func:`utility_directions`).
    """
    import torch
    if cfg.criterion == "vocabulary" and distance is pair_distance:
        raise ConfigError(
            "matching.criterion 'vocabulary' needs a defense whose release defines visual words "
            "(ldp-feat); this defense matches by descriptor distance: use criterion 'mutual-nn'"
        )
    from vispriv.plugins.descriptor_release.hpatches import HPatchesImages, hpatches_utility
    from vispriv.plugins.descriptor_release.localisation import LocalisationImages, localisation_utility

    if isinstance(images, LocalisationImages):  # the benchmark's queries are localised against its map
        return localisation_utility(images, sift_cfg, protect, cfg, seed, distance, protect_reference, cache, progress)
    if isinstance(images, HPatchesImages):  # the real benchmark's pairs replace the synthetic warps
        out = hpatches_utility(images, sift_cfg, protect, cfg, seed, distance, protect_reference, cache)
        if cfg.stereo:
            out.update(_stereo_utility(sift_cfg.model_copy(update={"image_size": None}), protect, cfg, seed, distance, protect_reference, cache))
        return out
    if sift_cfg.image_size is not None:
        size = sift_cfg.image_size
        resized = torch.nn.functional.interpolate(
            torch.from_numpy(images.images).permute(0, 3, 1, 2), size=(size, size), mode="bilinear", antialias=True
        )
        images = Images(resized.permute(0, 2, 3, 1).clamp(0, 1).numpy(), images.ids)
    frame_cfg = sift_cfg.model_copy(update={"image_size": None})
    out: dict[str, float] = {}
    if cfg.homographies_per_image > 0 and len(images.ids):
        out.update(_homography_utility(images, frame_cfg, protect, cfg, seed, distance, protect_reference, cache))
    if cfg.stereo:
        out.update(_stereo_utility(frame_cfg, protect, cfg, seed, distance, protect_reference, cache))
    return out


def utility_directions(utility: dict[str, float]) -> dict[str, bool]:
    """Directions of :func:`evaluate_utility`'s metrics: higher is better except the localisation
    errors and standard errors (:data:`~.localisation.LOWER_IS_BETTER_SUFFIXES`)."""
    from vispriv.plugins.descriptor_release.localisation import LOWER_IS_BETTER_SUFFIXES

    return {name: not name.endswith(LOWER_IS_BETTER_SUFFIXES) for name in utility}
