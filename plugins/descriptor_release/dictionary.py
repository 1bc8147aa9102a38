"""Descriptor dictionaries ("databases"): spherical k-means with faiss (LDP-Feat (ICCV 2023) section 6.1).

The paper builds its lifting database W (256k) and the attacker's public database Z (128k)
by spherical k-means [4] of SIFT descriptors of two disjoint Places365 image sets. We do
the same on whatever images a dataset provides (the bundled photos support hundreds to a
few thousand centroids; :func:`augment_images` multiplies their descriptors by crops,
rotations and rescalings).

Public API (stable; the recovery attacks build on it)::

    spherical_kmeans(descriptors, k, seed, niter=20) -> np.ndarray   # (k, 128) float32, unit rows
    hierarchical_kmeans(descriptors, k, seed, branching=0) -> np.ndarray  # two-level: a depth-2 vocabulary tree
    nearest_neighbours(queries, database, n) -> (distances, indices)  # exact L2, faiss
    build_dictionary(images, k, sift_cfg, seed, ...) -> np.ndarray    # extract + augment + cluster
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from vispriv.harness import Cache, Images, Progress, no_progress
from vispriv.harness.errors import InputError
from vispriv.harness.hashing import fingerprint
from vispriv.plugins.descriptor_release.payloads import DESCRIPTOR_DIM
from vispriv.plugins.descriptor_release.sift import SiftConfig, extract_features, l2_normalise

DICTIONARY_VERSION = "1.0"

#: How a dictionary is clustered: the paper's flat spherical k-means, or two levels (:func:`hierarchical_kmeans`).
KmeansMethod = Literal["flat", "hierarchical"]


def kmeans_method_field() -> KmeansMethod:
    """The ``kmeans_method`` config field shared by every plugin that builds a dictionary."""
    return Field(  # type: ignore[return-value]
        "flat",
        description="flat: spherical k-means (the paper); hierarchical: two levels, sqrt(k) top clusters "
        "(a depth-2 vocabulary tree, ~sqrt(k)/2 times fewer distance evaluations)",
    )


def check_descriptors(descriptors: np.ndarray, name: str = "descriptors") -> np.ndarray:
    """``descriptors`` as a C-contiguous float32 (N, 128) array, or a one-line InputError."""
    d = np.asarray(descriptors)
    if d.ndim != 2 or d.shape[1] != DESCRIPTOR_DIM:
        raise InputError(f"{name} must have shape (N, {DESCRIPTOR_DIM}); got {d.shape}")
    d = np.ascontiguousarray(d, dtype=np.float32)
    if not np.all(np.isfinite(d)):
        raise InputError(f"{name} contain NaN or infinite values")
    return d


def spherical_kmeans(descriptors: np.ndarray, k: int, seed: int, niter: int = 20, nredo: int = 1) -> np.ndarray:
    """Spherical k-means (faiss) of descriptors: ``k`` unit-norm centroids, (k, 128) float32.

    Rows are L2-normalised first; centroids are re-normalised after every iteration
    (faiss ``spherical=True``), i.e. k-means on the unit sphere with cosine assignment.
    ``nredo`` restarts keep the best objective.
    Raises :class:`InputError` when there are fewer descriptors than ``k``.
    """
    import faiss

    x = l2_normalise(check_descriptors(descriptors))
    x = x[np.linalg.norm(x, axis=1) > 0]
    if k < 1:
        raise InputError(f"k must be >= 1; got {k}")
    if len(x) < k:
        raise InputError(f"spherical k-means with k={k} needs at least {k} non-zero descriptors; got {len(x)}")
    km = faiss.Kmeans(
        DESCRIPTOR_DIM,
        int(k),
        niter=int(niter),
        nredo=int(nredo),
        spherical=True,
        seed=int(seed) & 0x7FFFFFFF,
        verbose=False,
        max_points_per_centroid=max(256, int(np.ceil(len(x) / k))),
        min_points_per_centroid=1,
    )
    km.train(x)
    return l2_normalise(np.asarray(km.centroids, dtype=np.float32).reshape(k, DESCRIPTOR_DIM))


def allot_words(populations: np.ndarray, k: int) -> np.ndarray:
    """Words per top-level cluster: proportional to its population, >= 1 each, <= its population, summing to ``k``.

    Largest-remainder rounding of ``k * n_i / N``; raises :class:`InputError` when the
    clusters hold fewer than ``k`` points in all or there are more clusters than ``k``.
    """
    n = np.asarray(populations, dtype=np.int64)
    if n.sum() < k or len(n) > k or np.any(n < 1):
        raise InputError(f"cannot allot {k} words to {len(n)} clusters of {int(n.sum())} points (each cluster needs >= 1)")
    share = k * n / n.sum()
    words = np.clip(np.floor(share).astype(np.int64), 1, n)
    while words.sum() != k:
        if words.sum() < k:
            room = np.where(words < n, share - words, -np.inf)
            words[int(np.argmax(room))] += 1
        else:
            excess = np.where(words > 1, words - share, -np.inf)
            words[int(np.argmax(excess))] -= 1
    return words


def hierarchical_kmeans(
    descriptors: np.ndarray,
    k: int,
    seed: int,
    branching: int = 0,
    niter: int = 20,
    progress: Progress = no_progress,
) -> np.ndarray:
    """Two-level spherical k-means: ``k`` unit-norm words, (k, 128) float32 -- a depth-2 vocabulary tree.

    The paper clusters 10M SIFT descriptors into 256k words by flat spherical k-means
    (section 6.1), N x k distance evaluations per iteration: days on a CPU. Here the
    descriptors are first clustered into ``branching`` top-level clusters (0 = round(sqrt(k))),
    then each top cluster's descriptors into ``k_i`` words, ``k_i`` proportional to its
    population (:func:`allot_words`): about N x (branching + k / branching) evaluations, the
    hierarchical k-means of Nister & Stewenius (Scalable recognition with a vocabulary tree,
    CVPR 2006), whose vocabulary matching the paper uses (Table 3). A choice, not the paper's
    flat k-means: words never straddle a top-level boundary, so the quantisation error is
    slightly above flat k-means at the same k (measured in benchmarks/pipeline_stages.py).
    Duplicate descriptors are dropped first; a top cluster given as many words as points keeps
    its points as words.
    """
    x = l2_normalise(check_descriptors(descriptors))
    x = np.unique(x[np.linalg.norm(x, axis=1) > 0], axis=0)
    if len(x) < k:
        raise InputError(f"hierarchical k-means with k={k} needs at least {k} distinct non-zero descriptors; got {len(x)}")
    top = int(branching) if branching > 0 else max(1, int(round(np.sqrt(k))))
    top = min(top, k)
    centres = spherical_kmeans(x, top, seed, niter)
    _, assign = nearest_neighbours(x, centres, 1)
    assign = assign[:, 0]
    populations = np.bincount(assign, minlength=top)
    used = np.flatnonzero(populations)
    words = allot_words(populations[used], k)
    out = []
    order = np.argsort(assign, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(populations)])
    import faiss

    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)  # the per-cluster problems are small: one thread is ~10x faster than two here
    try:
        for cluster, k_i in progress(list(zip(used, words)), desc="k-means per top cluster", total=len(used)):
            members = x[order[bounds[cluster] : bounds[cluster + 1]]]
            if k_i >= len(members):
                out.append(members)
            elif k_i == 1:
                out.append(l2_normalise(members.mean(axis=0, keepdims=True)))
            else:
                out.append(spherical_kmeans(members, int(k_i), seed + int(cluster) + 1, niter))
    finally:
        faiss.omp_set_num_threads(threads)
    return np.ascontiguousarray(np.concatenate(out), dtype=np.float32)


def nearest_neighbours(queries: np.ndarray, database: np.ndarray, n: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Exact Euclidean n-nearest database rows of each query (faiss IndexFlatL2).

    Returns ``(distances, indices)``, both (Q, n); distances are L2 (not squared).
    """
    import faiss

    q = check_descriptors(queries, "queries")
    db = check_descriptors(database, "database")
    if not 1 <= n <= len(db):
        raise InputError(f"n must be in [1, {len(db)}] (the database size); got {n}")
    index = faiss.IndexFlatL2(DESCRIPTOR_DIM)
    index.add(db)
    d2, idx = index.search(q, int(n))
    return np.sqrt(np.maximum(d2, 0.0)), idx.astype(np.int64)


def augment_images(images: Images, copies: int, seed: int) -> Images:
    """The images plus ``copies`` random views of each: crop, rotation (+-30 deg) and rescale.

    Views keep the images' size (the crop is resampled back), so they stack with the
    originals. Used only to multiply training descriptors for the dictionaries.
    """
    from skimage.transform import AffineTransform, warp

    if copies <= 0:
        return images
    rng = np.random.default_rng(seed)
    arr = images.images
    h, w = arr.shape[1:3]
    out, ids = [arr], list(images.ids)
    for c in range(copies):
        views = []
        for img in arr:
            zoom = rng.uniform(1.0, 1.8)
            angle = np.deg2rad(rng.uniform(-30, 30))
            centre = np.array([w / 2, h / 2])
            shift = rng.uniform(-0.2, 0.2, size=2) * np.array([w, h])
            tf = (
                AffineTransform(translation=-centre)
                + AffineTransform(scale=zoom, rotation=angle)
                + AffineTransform(translation=centre + shift)
            )
            views.append(warp(np.array(img, dtype=np.float64), tf.inverse, mode="reflect", preserve_range=True).astype(np.float32))
        out.append(np.stack(views))
        ids += [f"{i}#aug{c}" for i in images.ids]
    return Images(np.clip(np.concatenate(out), 0.0, 1.0), ids)


def build_dictionary(
    images: Images,
    k: int,
    sift_cfg: SiftConfig,
    seed: int,
    augment: int = 0,
    niter: int = 20,
    cache: Cache | None = None,
    method: KmeansMethod = "flat",
    progress: Progress = no_progress,
) -> np.ndarray:
    """SIFT descriptors of ``images`` (+ ``augment`` random views each), clustered into ``k`` centroids.

    ``method``: ``flat`` spherical k-means (the paper's) or ``hierarchical``
    (:func:`hierarchical_kmeans`). Cached by content (images, SIFT config, k, seed,
    augmentation, method). Raises InputError with the number of descriptors found when they
    cannot support ``k`` centroids.
    """
    if method not in ("flat", "hierarchical"):
        raise InputError(f"dictionary k-means method must be 'flat' or 'hierarchical'; got {method!r}")
    cache = cache or Cache(None)
    parts = {
        "version": DICTIONARY_VERSION,
        "images": fingerprint(images.images),
        "sift": sift_cfg,
        "k": k,
        "seed": seed,
        "augment": augment,
        "niter": niter,
    }
    if method != "flat":  # flat keeps the keys of dictionaries cached before the method existed
        parts["method"] = method

    def compute() -> dict[str, np.ndarray]:
        views = augment_images(images, augment, seed)
        feats = extract_features(views, sift_cfg, cache=cache, progress=progress)
        if len(feats.descriptors) < k:
            raise InputError(
                f"{len(images.ids)} images (x{augment + 1} views) gave {len(feats.descriptors)} SIFT descriptors, "
                f"fewer than the {k} dictionary entries asked for; lower the size or add augmentation"
            )
        if method == "hierarchical":
            return {"centroids": hierarchical_kmeans(feats.descriptors, k, seed, niter=niter, progress=progress)}
        return {"centroids": spherical_kmeans(feats.descriptors, k, seed, niter)}

    return cache.arrays("dictionary", parts, compute)["centroids"]
