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
    dictionary_descriptors(images, sift_cfg, seed, augment) -> DescriptorStore  # the SIFT, on disk
    dictionary_from_store(store, k, seed, ...) -> np.ndarray          # cluster a store in bounded memory

Memory: :func:`build_dictionary` streams the views' descriptors to disk and trains on at most
:data:`KMEANS_SAMPLE` of them (a uniform sample beyond that), so its memory is the sample plus
one chunk, not every view and descriptor; with fewer descriptors than the bound the result is
the in-memory functions' to the bit.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator
from typing import Literal

import numpy as np
from pydantic import Field

from vispriv.harness import Cache, Images, Progress, no_progress
from vispriv.harness.errors import InputError
from vispriv.harness.hashing import derive_seed, fingerprint
from vispriv.harness.mapped import release_pages
from vispriv.plugins.descriptor_release.descriptor_store import (
    CHUNK_ROWS,
    DescriptorStore,
    chunk_bounds,
    descriptor_store,
    write_rows,
)
from vispriv.plugins.descriptor_release.payloads import DESCRIPTOR_DIM
from vispriv.plugins.descriptor_release.sift import (
    SIFT_VERSION,
    SiftConfig,
    check_sift_input,
    describe_each,
    l2_normalise,
)

DICTIONARY_VERSION = "1.0"

#: At most this many descriptors train a dictionary (2.5 GiB as float32); more are sampled uniformly
#: (:func:`sampled_chunks`). Above the localisation room's 4.5M, so every dictionary the bundled
#: configs build trains on all its descriptors.
KMEANS_SAMPLE = 5 * 2**20

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


def unit_rows(chunks: Iterable[np.ndarray], capacity: int, name: str = "descriptors") -> np.ndarray:
    """The non-zero rows of ``chunks``, L2-normalised, in order, in one new (<= capacity, 128) float32 array.

    Row by row what ``l2_normalise(check_descriptors(x))`` followed by dropping zero rows gives
    the concatenated chunks, with one chunk of temporaries instead of several copies of x.
    """
    out = np.empty((capacity, DESCRIPTOR_DIM), np.float32)
    m = 0
    for chunk in chunks:
        c = l2_normalise(check_descriptors(chunk, name))
        c = c[np.linalg.norm(c, axis=1) > 0]
        if m + len(c) > capacity:
            raise ValueError(f"more than the {capacity} rows announced")
        out[m : m + len(c)] = c
        m += len(c)
    return out[:m]


def array_chunks(x: np.ndarray, rows: int = CHUNK_ROWS, name: str = "descriptors") -> Iterator[np.ndarray]:
    """Consecutive row blocks of an in-memory (N, 128) array (views, :func:`chunk_bounds`)."""
    if x.ndim != 2 or x.shape[1] != DESCRIPTOR_DIM:
        check_descriptors(x, name)  # raises the shape error
    for start, stop in chunk_bounds(len(x), rows):
        yield x[start:stop]


def sampled_chunks(store: DescriptorStore, bound: int, seed: int, rows: int = CHUNK_ROWS) -> Iterator[np.ndarray]:
    """The store's rows in chunks, or a uniform sample of exactly ``bound`` of them when it holds more.

    With N <= ``bound`` rows every row comes back, in order. Otherwise chunk by chunk the number
    kept is drawn from the hypergeometric law of the rows still to pick among the rows left
    (sequential sampling without replacement: every ``bound``-subset equally likely), then which
    ones uniformly within the chunk; kept rows stay in store order. Memory: one chunk.
    """
    n = len(store)
    if bound < 1:
        raise InputError(f"the k-means sample must hold >= 1 descriptor; got {bound}")
    if n <= bound:
        for _, chunk in store.chunks(rows):
            yield chunk
        return
    rng = np.random.default_rng(derive_seed(seed, "dictionary-sample"))
    to_pick, left = bound, n
    for start, stop in chunk_bounds(n, rows):
        size = stop - start
        picks = int(rng.hypergeometric(to_pick, left - to_pick, size)) if to_pick else 0
        if picks:
            yield store.read(start, stop)[np.sort(rng.choice(size, picks, replace=False))]
        to_pick, left = to_pick - picks, left - size


def unique_rows_inplace(x: np.ndarray) -> np.ndarray:
    """``np.unique(x, axis=0)`` (sorted distinct rows) computed in ``x``'s own buffer; returns a view of it.

    The same record sort numpy runs on a copy (rows viewed as one structured record each,
    ``ndarray.sort``), the first row of every run of equal rows kept, so the result is
    ``np.unique``'s to the bit; ``x`` is overwritten.
    """
    if len(x) == 0:
        return x
    if not x.flags.c_contiguous or x.ndim != 2:
        raise ValueError("unique_rows_inplace needs a C-contiguous 2-D array")
    records = x.view([(f"f{i}", x.dtype) for i in range(x.shape[1])]).reshape(-1)
    records.sort()
    keep = np.empty(len(records), dtype=bool)
    keep[0] = True
    for start, stop in chunk_bounds(len(records) - 1, CHUNK_ROWS):
        keep[start + 1 : stop + 1] = records[start + 1 : stop + 1] != records[start:stop]
    idx = np.flatnonzero(keep)
    del keep
    for start, stop in chunk_bounds(len(idx), CHUNK_ROWS):  # idx[j] >= j: a chunk never reads rows written before it
        x[start:stop] = x[idx[start:stop]]
    return x[: len(idx)]


def spherical_kmeans(descriptors: np.ndarray, k: int, seed: int, niter: int = 20, nredo: int = 1) -> np.ndarray:
    """Spherical k-means (faiss) of descriptors: ``k`` unit-norm centroids, (k, 128) float32.

    Rows are L2-normalised first; centroids are re-normalised after every iteration
    (faiss ``spherical=True``), i.e. k-means on the unit sphere with cosine assignment.
    ``nredo`` restarts keep the best objective.
    Raises :class:`InputError` when there are fewer descriptors than ``k``.
    """
    d = np.asarray(descriptors)
    return kmeans_unit_rows(unit_rows(array_chunks(d), len(d)), k, seed, niter, nredo)


def kmeans_unit_rows(x: np.ndarray, k: int, seed: int, niter: int = 20, nredo: int = 1) -> np.ndarray:
    """:func:`spherical_kmeans` of rows already L2-normalised and non-zero (:func:`unit_rows`), trained on all of them.

    faiss samples ``k * max_points_per_centroid`` rows when given more; the cap here is
    ``ceil(len(x) / k)`` per centroid (at least faiss's 256), so faiss never samples: the
    bound on the training set is the caller's (:func:`sampled_chunks`).
    """
    import faiss

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


def assign_nearest(x: np.ndarray, centres: np.ndarray, rows: int = CHUNK_ROWS) -> np.ndarray:
    """Index of each row's nearest centre (exact L2, faiss), searched ``rows`` rows at a time; (N,) int64.

    Equal to one :func:`nearest_neighbours` call on all of ``x`` when ``rows`` is a multiple of
    4096 (:func:`chunk_bounds`); memory is one chunk's copy and the (N,) result.
    """
    out = np.empty(len(x), np.int64)
    for start, stop in chunk_bounds(len(x), rows):
        out[start:stop] = nearest_neighbours(x[start:stop], centres, 1)[1][:, 0]
    return out


def _top_centres(x: np.ndarray, top: int, seed: int, niter: int) -> np.ndarray:
    """``spherical_kmeans(x, top, seed, niter)`` of unit rows without its copies of x; x is unchanged on return.

    :func:`spherical_kmeans` normalises its input again (a unit row can move in the last bit):
    x goes to a temporary file, is normalised in place for faiss, then read back.
    """
    with tempfile.TemporaryFile() as spill:
        write_rows(spill, array_chunks(x))
        spill.flush()
        nonzero = 0
        for start, stop in chunk_bounds(len(x)):
            x[start:stop] = l2_normalise(x[start:stop])
            nonzero += int(np.count_nonzero(np.linalg.norm(x[start:stop], axis=1) > 0))
        train = x if nonzero == len(x) else x[np.linalg.norm(x, axis=1) > 0]
        centres = kmeans_unit_rows(train, top, seed, niter)
        del train
        DescriptorStore(spill).read_into(x, 0)
    return centres


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
    d = np.asarray(descriptors)
    return two_level_unit_rows(unit_rows(array_chunks(d), len(d)), k, seed, branching, niter, progress)


def two_level_unit_rows(
    x: np.ndarray,
    k: int,
    seed: int,
    branching: int = 0,
    niter: int = 20,
    progress: Progress = no_progress,
) -> np.ndarray:
    """:func:`hierarchical_kmeans` of unit, non-zero rows (:func:`unit_rows`); ``x`` is used as working memory.

    Memory is x (its distinct rows sorted in place), an (N,) assignment and one top cluster at
    a time: the top level trains on x normalised in place (:func:`_top_centres`), the
    assignment runs in chunks (:func:`assign_nearest`).
    """
    x = unique_rows_inplace(x)
    if len(x) < k:
        raise InputError(f"hierarchical k-means with k={k} needs at least {k} distinct non-zero descriptors; got {len(x)}")
    top = int(branching) if branching > 0 else max(1, int(round(np.sqrt(k))))
    top = min(top, k)
    centres = _top_centres(x, top, seed, niter)
    assign = assign_nearest(x, centres)
    populations = np.bincount(assign, minlength=top)
    used = np.flatnonzero(populations)
    words = allot_words(populations[used], k)
    out = []
    order = np.argsort(assign, kind="stable")
    del assign
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


def augmented_views(images: Images, copies: int, seed: int) -> Iterator[np.ndarray]:
    """The views of :func:`augment_images` one at a time, (H, W, C) float32 each, in the same order.

    The images, then ``copies`` rounds of one random view of each; the random draws are made
    in the same order, so the views are :func:`augment_images`'s to the bit.
    """
    from skimage.transform import AffineTransform, warp

    arr = images.images
    for img in arr:
        yield np.clip(img, 0.0, 1.0)
    rng = np.random.default_rng(seed)
    h, w = arr.shape[1:3]
    for _ in range(max(0, copies)):
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
            view = warp(np.array(img, dtype=np.float64), tf.inverse, mode="reflect", preserve_range=True)
            yield np.clip(view.astype(np.float32), 0.0, 1.0)


def augment_images(images: Images, copies: int, seed: int) -> Images:
    """The images plus ``copies`` random views of each: crop, rotation (+-30 deg) and rescale.

    Views keep the images' size (the crop is resampled back), so they stack with the
    originals. Used only to multiply training descriptors for the dictionaries; the
    dictionaries themselves stream the views (:func:`augmented_views`).
    """
    if copies <= 0:
        return images
    ids = list(images.ids) + [f"{i}#aug{c}" for c in range(copies) for i in images.ids]
    return Images(np.stack(list(augmented_views(images, copies, seed))), ids)


def dictionary_descriptors(
    images: Images,
    sift_cfg: SiftConfig,
    seed: int,
    augment: int = 0,
    cache: Cache | None = None,
    progress: Progress = no_progress,
) -> DescriptorStore:
    """The SIFT descriptors of ``images`` and their ``augment`` views each, as an on-disk store (cached).

    Views are made, described and written one at a time (:func:`augmented_views`,
    :func:`~.sift.describe_each`); rows are :func:`~.sift.extract_features`'s of
    :func:`augment_images`, in the same order. The caller closes the store.
    """
    check_sift_input(images, sift_cfg)
    parts = {"sift_version": SIFT_VERSION, "sift": sift_cfg, "images": fingerprint(images.images), "ids": images.ids,
             "augment": augment, "seed": seed}
    views = progress(augmented_views(images, augment, seed), desc="SIFT", total=len(images.ids) * (max(0, augment) + 1))
    return descriptor_store(cache or Cache(None), "dictionary-sift", parts, describe_each(views, sift_cfg))


def dictionary_from_store(
    store: DescriptorStore,
    k: int,
    seed: int,
    niter: int = 20,
    method: KmeansMethod = "flat",
    sample: int = KMEANS_SAMPLE,
    progress: Progress = no_progress,
) -> np.ndarray:
    """``k`` centroids of the store's descriptors, trained on at most ``sample`` of them (:func:`sampled_chunks`).

    With N <= ``sample`` rows this is :func:`spherical_kmeans` / :func:`hierarchical_kmeans`
    of all rows, to the bit. Memory: the sample (512 bytes a row) plus one chunk, whatever N.
    """
    x = unit_rows(sampled_chunks(store, sample, seed), min(len(store), sample))
    if method == "hierarchical":
        return two_level_unit_rows(x, k, seed, niter=niter, progress=progress)
    return kmeans_unit_rows(x, k, seed, niter)


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
    sample: int = KMEANS_SAMPLE,
) -> np.ndarray:
    """SIFT descriptors of ``images`` (+ ``augment`` random views each), clustered into ``k`` centroids.

    ``method``: ``flat`` spherical k-means (the paper's) or ``hierarchical``
    (:func:`hierarchical_kmeans`). The descriptors stream to disk (:func:`dictionary_descriptors`)
    and the k-means trains on at most ``sample`` of them (:func:`dictionary_from_store`).
    Cached by content (images, SIFT config, k, seed, augmentation, method; ``sample`` when
    not the default). Raises InputError with the number of descriptors found when they
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
    if sample != KMEANS_SAMPLE:  # the default keeps the keys of dictionaries cached before the sample bound
        parts["sample"] = sample

    def compute() -> dict[str, np.ndarray]:
        with dictionary_descriptors(images, sift_cfg, seed, augment, cache, progress) as store:
            # The photos are idle while the k-means runs: a file-mapped stack (the localisation
            # room's lifting photos) gives its pages back here and maps them again when read.
            release_pages(images.images)
            if len(store) < k:
                raise InputError(
                    f"{len(images.ids)} images (x{augment + 1} views) gave {len(store)} SIFT descriptors, "
                    f"fewer than the {k} dictionary entries asked for; lower the size or add augmentation"
                )
            return {"centroids": dictionary_from_store(store, k, seed, niter, method, sample, progress)}

    return cache.arrays("dictionary", parts, compute)["centroids"]
