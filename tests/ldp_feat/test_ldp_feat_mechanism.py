"""The omega-subset mechanism of ldp-feat.md Eq. (4)/(5) against hand cases and brute force."""

from __future__ import annotations

import itertools
import math
from decimal import Decimal, getcontext

import numpy as np
import pytest
from scipy.stats import binomtest, chisquare

from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release import ldp


def eq5(eps: float, m: int, k: int) -> float:
    """Eq. (5) written out directly (fine for small |K|)."""
    return m * math.exp(eps) / (m * math.exp(eps) + k - m)


@pytest.mark.parametrize("eps,m,k", [(0.0, 1, 10), (1.0, 2, 50), (3.0, 4, 100), (10.0, 2, 262144), (5.0, 16, 1000)])
def test_log_inclusion_probability_matches_eq5(eps, m, k):
    assert math.exp(ldp.log_inclusion_probability(eps, m, math.log(k))) == pytest.approx(eq5(eps, m, k), rel=1e-12)
    assert ldp.inclusion_probability(eps, m, k) == pytest.approx(eq5(eps, m, k), rel=1e-12)


def test_naive_domain_log_probability_against_exact_decimal():
    # The naive K is every 128-byte string: |K| = 256^128 = 2^1024, beyond float64 (max ~1.8e308).
    assert abs(ldp.NAIVE_LOG_DOMAIN_SIZE - math.log(256**128)) <= 1e-12
    getcontext().prec = 80
    for eps, m in [(10.0, 2), (16.0, 4), (0.0, 1)]:
        signal = Decimal(m) * Decimal(eps).exp()
        exact = signal / (signal + Decimal(256) ** 128 - m)
        got = ldp.log_inclusion_probability(eps, m, ldp.NAIVE_LOG_DOMAIN_SIZE)
        assert got == pytest.approx(float(exact.ln()), rel=1e-12)
        # Eq. (5) with the integer |K| itself: a float evaluation of m e^eps + |K| - m would overflow.
        assert ldp.inclusion_probability(eps, m, 256**128) == pytest.approx(float(exact), rel=1e-9)
    assert ldp.log_inclusion_probability(10.0, 2, ldp.NAIVE_LOG_DOMAIN_SIZE) < -690  # ~1e-304: never sent


def test_frequency_of_u_matches_eq5():
    rng = np.random.default_rng(0)
    for eps, m, k in [(1.0, 2, 50), (3.0, 4, 100), (0.5, 1, 7)]:
        n = 40_000
        _, u = ldp.omega_subset(rng.integers(0, k, n), k, m, eps, rng)
        test = binomtest(int(u.sum()), n, eq5(eps, m, k))
        assert test.pvalue > 1e-3, (eps, m, k, u.mean(), eq5(eps, m, k))


def test_other_elements_uniform_over_k_minus_true():
    rng = np.random.default_rng(1)
    k, m, eps, true = 20, 4, 1.0, 7
    z, u = ldp.omega_subset(np.full(60_000, true), k, m, eps, rng)
    others = z[z != true]
    counts = np.bincount(others, minlength=k)
    assert counts[true] == 0
    observed = np.delete(counts, true)
    assert chisquare(observed).pvalue > 1e-3
    # m - u others per row: rows with d' hold m - 1 others, rows without hold m.
    assert np.array_equal(np.sum(z != true, axis=1), m - u.astype(int))


def test_full_subset_distribution_is_eq4():
    """Brute force: every m-subset's frequency against Eq. (4) (chi-square over all C(|K|, m)).

    Eq. (4) as printed divides by C(|K|, m), which does not sum to 1; the normalisation that
    matches Eq. (5) and the sampler (and keeps the e^eps ratio) is C(|K|-1, m-1).
    """
    rng = np.random.default_rng(2)
    k, m, eps, true, n = 6, 2, 1.5, 3, 60_000
    z, _ = ldp.omega_subset(np.full(n, true), k, m, eps, rng)
    subsets = list(itertools.combinations(range(k), m))
    index = {s: i for i, s in enumerate(subsets)}
    observed = np.bincount([index[tuple(sorted(r))] for r in z.tolist()], minlength=len(subsets))
    weights = np.array([m * math.exp(eps) if true in s else m for s in subsets]) / (m * math.exp(eps) + k - m)
    assert (weights / math.comb(k, m)).sum() == pytest.approx(1 / 3)  # as printed (|K|=6, m=2): not a distribution
    probs = weights / math.comb(k - 1, m - 1)
    assert probs.sum() == pytest.approx(1.0)
    assert chisquare(observed, probs * n).pvalue > 1e-3


def test_rows_are_sets_in_random_order():
    rng = np.random.default_rng(3)
    z, u = ldp.omega_subset(np.full(20_000, 0), 30, 4, 5.0, rng)
    assert all(len(set(r)) == 4 for r in z[:2000].tolist())
    position = np.argmax(z[u] == 0, axis=1)
    assert chisquare(np.bincount(position, minlength=4)).pvalue > 1e-3


def test_epsilon_inf_returns_nearest_and_m_equal_k_returns_all():
    rng = np.random.default_rng(4)
    ids = np.array([5, 0, 9])
    z, u = ldp.omega_subset(ids, 10, 1, math.inf, rng)
    assert np.array_equal(z[:, 0], ids) and u.all()
    z, _ = ldp.omega_subset(ids, 5 + 5, 10, 0.0, rng)
    assert np.array_equal(np.sort(z, axis=1), np.tile(np.arange(10), (3, 1)))


def _hand_descriptors() -> tuple[np.ndarray, np.ndarray]:
    """Descriptors and their uint8 codes min(round(512 d), 255) worked out by hand (d' of section 5.2)."""
    d = np.zeros((3, 128), np.float32)
    d[0, :4] = [0.5, 0.25, 0.1, -0.2]  # 256 -> 255 (clipped), 128, 51.2 -> 51, negative -> 0
    d[1, 127] = 1.0  # 512 -> 255
    d[2, :] = 1 / 512 * 3.4  # 3.4 -> 3 everywhere
    codes = np.zeros((3, 128), np.uint8)
    codes[0, :4] = [255, 128, 51, 0]
    codes[1, 127] = 255
    codes[2, :] = 3
    return d, codes


def test_naive_variant_sends_almost_never_the_true_code():
    rng = np.random.default_rng(5)
    d, true = _hand_descriptors()
    assert np.array_equal(ldp.to_uint8_domain(d), true)
    d, true = np.repeat(d, 200, axis=0), np.repeat(true, 200, axis=0)
    codes, u = ldp.naive_omega_subset(d, 2, 10.0, rng)
    assert codes.shape == (600, 2, 128) and codes.dtype == np.uint8
    assert not u.any()
    assert not np.any(np.all(codes == true[:, None], axis=2))
    codes, u = ldp.naive_omega_subset(d, 1, math.inf, rng)
    assert u.all() and np.array_equal(codes[:, 0], true)


@pytest.mark.parametrize(
    "eps,m,k,match",
    [(-0.1, 1, 10, "epsilon must be >= 0"), (1.0, 11, 10, "exceeds the dictionary size"),
     (math.inf, 2, 10, "m must be 1"), (1.0, 0, 10, "integer >= 1")],
)
def test_bad_privacy_parameters(eps, m, k, match):
    with pytest.raises(InputError, match=match):
        ldp.omega_subset(np.zeros(3, np.int64), k, m, eps, np.random.default_rng(0))


def test_bad_dictionary_and_descriptors():
    rng = np.random.default_rng(6)
    k = rng.random((8, 128)).astype(np.float32)
    with pytest.raises(InputError, match="duplicate rows"):
        ldp.check_dictionary(np.concatenate([k, k[:1]]))
    nan = k.copy()
    nan[3, 5] = np.nan
    with pytest.raises(InputError, match="row 3 contains NaN"):
        ldp.check_dictionary(nan)
    with pytest.raises(InputError, match=r"shape \(\|K\|, 128\)"):
        ldp.check_dictionary(k[:, :64])
    with pytest.raises(InputError, match=r"shape \(N, 128\)"):
        ldp.Quantiser(k).assign(rng.random((4, 96)))


def test_quantisers_are_deterministic_nearest_neighbours():
    rng = np.random.default_rng(7)
    centres = rng.random((40, 128)).astype(np.float32)
    k = ldp.jittered_dictionary(centres, 4000, 0.05, seed=0)
    q = ldp.jittered_dictionary(centres, 500, 0.05, seed=1)
    brute = np.argmin(((q[:, None, :] - k[None]) ** 2).sum(-1), axis=1)
    assert np.array_equal(ldp.Quantiser(k).assign(q), brute)
    cfg = ldp.QuantiserConfig(kind="ivf", nlist=32, nprobe=4, seed=3)
    a = ldp.Quantiser(k, cfg).assign(q)
    b = ldp.Quantiser(k, cfg).assign(q[::-1])[::-1]  # rebuilt index, other batch order: same map
    assert np.array_equal(a, b)
    assert np.mean(a == brute) > 0.9


def test_hnsw_quantiser_is_deterministic_and_near_exact():
    from vispriv.plugins.descriptor_release import ldp as _ldp

    rng = np.random.default_rng(3)
    dictionary = rng.normal(size=(2000, 128)).astype(np.float32)
    dictionary /= np.linalg.norm(dictionary, axis=1, keepdims=True)
    queries = dictionary[rng.integers(0, 2000, 300)] + rng.normal(0, 0.05, (300, 128)).astype(np.float32)
    config = _ldp.QuantiserConfig("hnsw", hnsw_m=16, ef_search=64)
    a = _ldp.Quantiser(dictionary, config).assign(queries)
    b = _ldp.Quantiser(dictionary, config).assign(queries[::-1])[::-1]
    assert np.array_equal(a, b)
    assert np.mean(a == _ldp.exact_nearest(queries, dictionary)) > 0.95


def test_approximate_index_is_cached_and_search_settings_are_not_part_of_the_key(tmp_path):
    from vispriv.harness import Cache

    rng = np.random.default_rng(5)
    dictionary = rng.random((1500, 128)).astype(np.float32)
    queries = dictionary[rng.integers(0, 1500, 200)] + rng.normal(0, 0.02, (200, 128)).astype(np.float32)
    cache = Cache(tmp_path)
    first = ldp.Quantiser(dictionary, ldp.QuantiserConfig("hnsw", hnsw_m=16, ef_search=32), cache=cache)
    assert (cache.hits, cache.misses) == (0, 1)
    second = ldp.Quantiser(dictionary, ldp.QuantiserConfig("hnsw", hnsw_m=16, ef_search=128), cache=cache)
    assert (cache.hits, cache.misses) == (1, 1)
    assert second.index.hnsw.efSearch == 128
    fresh = ldp.Quantiser(dictionary, ldp.QuantiserConfig("hnsw", hnsw_m=16, ef_search=32))
    assert np.array_equal(first.assign(queries), fresh.assign(queries))
    other = dictionary.copy()
    other[0] += 0.5
    ldp.Quantiser(other, ldp.QuantiserConfig("hnsw", hnsw_m=16), cache=cache)
    assert cache.misses == 2
