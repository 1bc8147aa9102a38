"""Bounded-memory dictionaries: the streamed, sampled, chunked path gives the in-memory path's words to the bit.

The oracle is the in-memory code as it was before streaming (copied below, unchanged): SIFT of
the stacked augmented views, then ``np.unique`` and faiss on whole arrays.
"""

import numpy as np
import pytest

from vispriv.harness import Cache
from vispriv.harness.data.bundled import load_bundled
from vispriv.plugins.descriptor_release.descriptor_store import DescriptorStore, chunk_bounds, descriptor_store
from vispriv.plugins.descriptor_release.dictionary import (
    allot_words,
    assign_nearest,
    augment_images,
    build_dictionary,
    check_descriptors,
    dictionary_descriptors,
    dictionary_from_store,
    hierarchical_kmeans,
    nearest_neighbours,
    sampled_chunks,
    spherical_kmeans,
    unique_rows_inplace,
)
from vispriv.plugins.descriptor_release.sift import SiftConfig, extract_features, l2_normalise, quantize_colmap


def _old_spherical(descriptors, k, seed, niter=20):  # type: ignore[no-untyped-def]
    import faiss

    x = l2_normalise(check_descriptors(descriptors))
    x = x[np.linalg.norm(x, axis=1) > 0]
    km = faiss.Kmeans(128, int(k), niter=int(niter), nredo=1, spherical=True, seed=int(seed) & 0x7FFFFFFF, verbose=False,
                      max_points_per_centroid=max(256, int(np.ceil(len(x) / k))), min_points_per_centroid=1)
    km.train(x)
    return l2_normalise(np.asarray(km.centroids, dtype=np.float32).reshape(k, 128))


def _old_hierarchical(descriptors, k, seed, niter=20):  # type: ignore[no-untyped-def]
    import faiss

    x = l2_normalise(check_descriptors(descriptors))
    x = np.unique(x[np.linalg.norm(x, axis=1) > 0], axis=0)
    top = min(max(1, int(round(np.sqrt(k)))), k)
    centres = _old_spherical(x, top, seed, niter)
    assign = nearest_neighbours(x, centres, 1)[1][:, 0]
    populations = np.bincount(assign, minlength=top)
    used = np.flatnonzero(populations)
    words = allot_words(populations[used], k)
    out, order = [], np.argsort(assign, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(populations)])
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        for cluster, k_i in zip(used, words):
            members = x[order[bounds[cluster] : bounds[cluster + 1]]]
            if k_i >= len(members):
                out.append(members)
            elif k_i == 1:
                out.append(l2_normalise(members.mean(axis=0, keepdims=True)))
            else:
                out.append(_old_spherical(members, int(k_i), seed + int(cluster) + 1, niter))
    finally:
        faiss.omp_set_num_threads(threads)
    return np.ascontiguousarray(np.concatenate(out), dtype=np.float32)


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, np.float32).view(np.uint32)


@pytest.fixture(scope="module")
def sift_like() -> np.ndarray:
    """COLMAP-lattice rows with exact duplicates, zero rows and a -0.0 entry, shuffled."""
    rng = np.random.default_rng(0)
    x = quantize_colmap((np.abs(rng.normal(size=(20000, 128))) ** 3).astype(np.float32))
    x = np.concatenate([x, x[:400], np.zeros((5, 128), np.float32)])
    x[7, 3] = -0.0
    return x[rng.permutation(len(x))]


def _store(rows: np.ndarray) -> DescriptorStore:
    return descriptor_store(Cache(None), "test", 0, (rows[s:e] for s, e in chunk_bounds(len(rows), 1000)))


def test_chunk_bounds_merge_a_short_tail_into_the_chunk_before():
    assert chunk_bounds(0, 4) == []
    assert chunk_bounds(3, 4) == [(0, 3)]
    assert chunk_bounds(8, 4) == [(0, 4), (4, 8)]
    assert chunk_bounds(11, 4) == [(0, 4), (4, 11)]
    assert chunk_bounds(12, 4) == [(0, 4), (4, 8), (8, 12)]


def test_unique_rows_inplace_is_numpys_unique_to_the_bit(sift_like):
    x = sift_like.copy()
    x[11] = x[12]
    x[12, 0], x[11, 0] = 0.0, -0.0  # equal rows with different bytes: which one survives is np.unique's choice
    expected = np.unique(x, axis=0)
    got = unique_rows_inplace(x.copy())
    assert len(got) == len(expected) < len(x) - 400
    np.testing.assert_array_equal(_bits(got), _bits(expected))


def test_chunked_assignment_equals_one_search_of_every_row():
    rng = np.random.default_rng(1)
    x = l2_normalise(rng.random((3 * 4096 + 10, 128), dtype=np.float32))  # a 10-row tail would take faiss's other path
    centres = l2_normalise(rng.random((64, 128), dtype=np.float32))
    distances, once = nearest_neighbours(x, centres, 1)
    for rows in (4096, 8192):
        parts = [nearest_neighbours(x[s:e], centres, 1)[0] for s, e in chunk_bounds(len(x), rows)]
        np.testing.assert_array_equal(np.concatenate(parts), distances)  # same faiss blocks and path: same bits
        np.testing.assert_array_equal(assign_nearest(x, centres, rows=rows), once[:, 0])


def test_in_memory_kmeans_equal_the_code_before_streaming(sift_like):
    np.testing.assert_array_equal(_bits(spherical_kmeans(sift_like, 40, 3, niter=4)), _bits(_old_spherical(sift_like, 40, 3, 4)))
    np.testing.assert_array_equal(_bits(hierarchical_kmeans(sift_like, 300, 3, niter=4)),
                                  _bits(_old_hierarchical(sift_like, 300, 3, 4)))


def test_a_store_below_the_sample_bound_gives_the_in_memory_words_to_the_bit(sift_like):
    with _store(sift_like) as store:
        assert len(store) == len(sift_like)
        for method, old in (("hierarchical", _old_hierarchical(sift_like, 300, 5, 4)), ("flat", _old_spherical(sift_like, 40, 5, 4))):
            k = len(old)
            got = dictionary_from_store(store, k, 5, niter=4, method=method, sample=len(sift_like))
            np.testing.assert_array_equal(_bits(got), _bits(old))


def test_the_sample_holds_exactly_the_bound_in_store_order_and_all_rows_at_or_below_it():
    rows = np.arange(50 * 128, dtype=np.float32).reshape(50, 128)
    with _store(rows) as store:
        for bound in (50, 80):
            np.testing.assert_array_equal(np.concatenate(list(sampled_chunks(store, bound, seed=0, rows=8))), rows)
        for bound in (1, 7, 49):
            picked = np.concatenate(list(sampled_chunks(store, bound, seed=2, rows=8)))[:, 0] / 128
            assert len(picked) == bound and np.all(np.diff(picked) > 0) and np.all(picked == np.round(picked))


def test_the_sample_is_uniform_over_rows():
    rows = np.arange(20 * 128, dtype=np.float32).reshape(20, 128)
    hits = np.zeros(20)
    with _store(rows) as store:
        for seed in range(2000):
            hits[(np.concatenate(list(sampled_chunks(store, 5, seed, rows=3)))[:, 0] / 128).astype(int)] += 1
    assert hits.sum() == 2000 * 5
    np.testing.assert_allclose(hits / 2000, 0.25, atol=0.05)  # 5 s.e. of a 0.25 rate over 2000 draws


def test_above_the_bound_the_words_are_those_of_the_sample(sift_like):
    with _store(sift_like) as store:
        sample = np.concatenate(list(sampled_chunks(store, 6000, seed=9)))
        assert len(sample) == 6000
        np.testing.assert_array_equal(_bits(dictionary_from_store(store, 30, 9, niter=4, sample=6000)),
                                      _bits(_old_spherical(sample, 30, 9, 4)))


def test_streamed_dictionary_sift_and_words_equal_the_stacked_views(tmp_path):
    photos = load_bundled(["astronaut", "coffee"], 96)
    cfg = SiftConfig(max_keypoints=128, precision="float64")
    stacked = extract_features(augment_images(photos, 2, 4), cfg).descriptors
    with dictionary_descriptors(photos, cfg, 4, augment=2, cache=Cache(tmp_path)) as store:
        np.testing.assert_array_equal(_bits(store.read(0, len(store))), _bits(stacked))
    words = build_dictionary(photos, 30, cfg, 4, augment=2, niter=4, cache=Cache(tmp_path), method="hierarchical")
    np.testing.assert_array_equal(_bits(words), _bits(_old_hierarchical(stacked, 30, 4, 4)))
    assert augment_images(photos, 0, 4) is photos
    assert augment_images(photos, 2, 4).ids[2:4] == ["astronaut#aug0", "coffee#aug0"]


def test_a_store_refuses_a_partial_row(tmp_path):
    path = tmp_path / "rows.f32"
    path.write_bytes(b"\0" * (512 + 4))
    with open(path, "rb") as fh, pytest.raises(ValueError, match="whole number"):
        DescriptorStore(fh)
