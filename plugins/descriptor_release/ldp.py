"""LDP-Feat: the omega-subset mechanism on a descriptor dictionary (LDP-Feat (ICCV 2023) section 5, S1).

A client privatises every descriptor ``d`` in three steps (section 5.2):

1. **Quantise**: ``d' = NN_K(d)``, its nearest neighbour in the public dictionary K
   (:class:`Quantiser`; a faiss exact index or a fixed approximate one -- both are
   deterministic functions of ``d``, which is all Theorem 2 / Eq. (S5)-(S7) needs).
2. **Bernoulli**: ``u ~ Bernoulli(p)`` with ``p = m e^eps / (m e^eps + |K| - m)`` (Eq. (5);
   :func:`log_inclusion_probability` computes it in log space).
3. **Subset**: draw ``m - u`` elements uniformly without replacement from ``K \\ {d'}``;
   ``Z = Y u {d'}`` if ``u = 1`` else ``Z = Y`` (:func:`omega_subset`). Z is released in a
   random order, so the position of ``d'`` carries no information.

Together these give exactly the distribution of Eq. (4): every m-subset containing ``d'``
has probability ``p / C(|K|-1, m-1)`` and every other one ``(1-p) / C(|K|-1, m)``.

``eps = inf`` is allowed only with ``m = 1`` and returns ``d'`` itself (the accuracy upper
bound rows of Table 2). The *naive* variant (section 5.2, last row group of Table 2) takes K
to be the whole uint8 SIFT domain, ``|K| = 2^(8*128)``: its ``p`` underflows any float unless
computed in log space, and it is sampled without materialising K
(:func:`naive_omega_subset`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from vispriv.harness import Cache
from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release.payloads import DESCRIPTOR_DIM

#: log |K| of the naive domain: all 128-byte uint8 SIFT descriptors, |K| = 2^(8*128).
NAIVE_LOG_DOMAIN_SIZE = 8 * DESCRIPTOR_DIM * math.log(2.0)


# --------------------------------------------------------------------------- parameters


def check_privacy_parameters(epsilon: float, m: int, log_domain_size: float) -> None:
    """Raise a one-line :class:`InputError` unless (eps, m, |K|) is a valid omega-SM setting.

    Allowed: ``eps >= 0`` (``inf`` only with ``m = 1``), ``1 <= m <= |K|``.
    """
    if math.isnan(epsilon) or epsilon < 0:
        raise InputError(f"epsilon must be >= 0 (or inf); got {epsilon}")
    if int(m) != m or m < 1:
        raise InputError(f"m (the subset size) must be an integer >= 1; got {m}")
    if math.log(m) > log_domain_size + 1e-12:
        size = f"{math.exp(log_domain_size):.0f}" if log_domain_size < 700 else f"e^{log_domain_size:.1f}"
        raise InputError(f"m={m} exceeds the dictionary size |K|={size}; m must be <= |K|")
    if math.isinf(epsilon) and m != 1:
        raise InputError(f"epsilon=inf releases d' alone, so m must be 1; got m={m}")


def log_inclusion_probability(epsilon: float, m: int, log_domain_size: float) -> float:
    """``log Pr(u = 1)`` of Eq. (5), ``log(m e^eps / (m e^eps + |K| - m))``, in log space.

    ``log_domain_size`` is ``log |K|`` so that ``|K| = 2^1024`` (naive variant), which
    overflows a float64, is handled: ``log(|K| - m) = log|K| + log1p(-m / |K|)``.
    Returns 0.0 for ``eps = inf`` (and for ``m = |K|``).
    """
    check_privacy_parameters(epsilon, m, log_domain_size)
    if math.isinf(epsilon):
        return 0.0
    log_signal = math.log(m) + epsilon
    ratio = math.exp(math.log(m) - log_domain_size)  # m / |K| <= 1
    if ratio >= 1.0 - 1e-15:
        return 0.0
    log_rest = log_domain_size + math.log1p(-ratio)  # log(|K| - m)
    return log_signal - float(np.logaddexp(log_signal, log_rest))


def inclusion_probability(epsilon: float, m: int, domain_size: int) -> float:
    """``Pr(u = 1)`` of Eq. (5) for a finite dictionary of ``domain_size`` entries."""
    return math.exp(log_inclusion_probability(epsilon, m, math.log(domain_size)))


# --------------------------------------------------------------------------- dictionary


def check_dictionary(dictionary: np.ndarray) -> np.ndarray:
    """The dictionary K as C-contiguous float32 (|K|, 128), or a one-line InputError.

    Rejects a wrong shape, NaN/inf entries and duplicate rows (a duplicate would make the
    domain smaller than |K| and two ids the same descriptor, breaking Eq. (5)).
    """
    k = np.asarray(dictionary)
    if k.ndim != 2 or k.shape[1] != DESCRIPTOR_DIM:
        raise InputError(f"dictionary must have shape (|K|, {DESCRIPTOR_DIM}); got {k.shape}")
    if len(k) == 0:
        raise InputError("dictionary is empty; it needs at least m entries")
    k = np.ascontiguousarray(k, dtype=np.float32)
    if not np.all(np.isfinite(k)):
        bad = int(np.flatnonzero(~np.all(np.isfinite(k), axis=1))[0])
        raise InputError(f"dictionary row {bad} contains NaN or infinite values")
    rows = np.unique(k.view(np.dtype((np.void, k.dtype.itemsize * DESCRIPTOR_DIM))).ravel(), return_counts=True)[1]
    if np.any(rows > 1):
        raise InputError(f"dictionary has {int(np.sum(rows[rows > 1] - 1))} duplicate rows; entries must be distinct")
    return k


def check_queries(descriptors: np.ndarray) -> np.ndarray:
    """Descriptors to privatise as float32 (N, 128), or a one-line InputError."""
    d = np.asarray(descriptors)
    if d.ndim != 2 or d.shape[1] != DESCRIPTOR_DIM:
        raise InputError(f"descriptors must have shape (N, {DESCRIPTOR_DIM}); got {d.shape}")
    d = np.ascontiguousarray(d, dtype=np.float32)
    if not np.all(np.isfinite(d)):
        raise InputError("descriptors contain NaN or infinite values")
    return d


# --------------------------------------------------------------------------- quantisation


@dataclass(frozen=True)
class QuantiserConfig:
    """How d -> d' is computed. ``exact``: faiss IndexFlatL2. ``ivf``: IndexIVFFlat with a
    k-means coarse quantiser trained once with a fixed seed (``nlist`` lists, ``nprobe``
    probed). ``hnsw``: IndexHNSWFlat (``hnsw_m`` links, ``ef_construction``, ``ef_search``;
    defaults from benchmarks/ldp_quantisation.py: >= 99 % agreement with brute force on real
    SIFT against a 256k dictionary at ~22x its speed), its graph built on
    one thread so that the same dictionary always gives the same graph. Each is a fixed
    approximate index: the map stays a deterministic function of d, which is all the
    ε-LDP proof needs (S1.2)."""

    kind: Literal["exact", "ivf", "hnsw"] = "exact"
    nlist: int = 1024
    nprobe: int = 16
    seed: int = 0
    hnsw_m: int = 32
    ef_search: int = 64
    ef_construction: int = 200


class Quantiser:
    """Deterministic nearest-neighbour map of descriptors to dictionary ids (step 1 of section 5.2).

    Approximate indexes are built once per (dictionary, build settings) and, given a
    :class:`vispriv.harness.Cache`, stored serialised (``faiss.serialize_index``) so a sweep over
    ε and m reuses one graph; search settings (``ef_search``, ``nprobe``) are applied after
    loading and are not part of the key.
    """

    def __init__(self, dictionary: np.ndarray, config: QuantiserConfig | None = None, cache: Cache | None = None) -> None:
        import faiss

        self.dictionary = check_dictionary(dictionary)
        self.config = config or QuantiserConfig()
        if self.config.kind == "exact":
            self.index = faiss.IndexFlatL2(DESCRIPTOR_DIM)
            self.index.add(self.dictionary)
            return
        cfg = self.config
        build = (cfg.kind, cfg.hnsw_m, cfg.ef_construction) if cfg.kind == "hnsw" else (cfg.kind, self._nlist, cfg.seed)
        parts = ("quantiser-v1", build, self.dictionary)
        loaded: list = []

        def check(stored: dict[str, np.ndarray]) -> None:
            """A cached index must deserialise to one over this dictionary (else it is rebuilt)."""
            index = faiss.deserialize_index(stored["index"])
            if index.d != DESCRIPTOR_DIM or index.ntotal != len(self.dictionary):
                raise ValueError(f"index of {index.ntotal} x {index.d}, dictionary is {len(self.dictionary)} x {DESCRIPTOR_DIM}")
            loaded.append(index)

        stored = (cache or Cache(None)).arrays(
            "ldp-quantiser", parts, lambda: {"index": faiss.serialize_index(self._build())}, check=check
        )
        self.index = loaded[0] if loaded else faiss.deserialize_index(stored["index"])
        if cfg.kind == "hnsw":
            self.index.hnsw.efSearch = cfg.ef_search
        else:
            self.index.nprobe = min(cfg.nprobe, self._nlist)

    @property
    def _nlist(self) -> int:
        return min(self.config.nlist, max(1, len(self.dictionary) // 39))

    def _build(self):
        """The approximate index over the dictionary (graph built on one thread: deterministic)."""
        import faiss

        cfg = self.config
        if cfg.kind == "hnsw":
            index = faiss.IndexHNSWFlat(DESCRIPTOR_DIM, cfg.hnsw_m)
            index.hnsw.efConstruction = cfg.ef_construction
        else:
            index = faiss.IndexIVFFlat(faiss.IndexFlatL2(DESCRIPTOR_DIM), DESCRIPTOR_DIM, self._nlist, faiss.METRIC_L2)
            index.cp.seed = int(cfg.seed) & 0x7FFFFFFF
            index.train(self.dictionary)
        threads = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)
        try:
            index.add(self.dictionary)
        finally:
            faiss.omp_set_num_threads(threads)
        return index

    @property
    def size(self) -> int:
        return len(self.dictionary)

    def assign(self, descriptors: np.ndarray) -> np.ndarray:
        """Dictionary id of each descriptor's nearest neighbour, (N,) int64."""
        q = check_queries(descriptors)
        if len(q) == 0:
            return np.zeros(0, np.int64)
        _, idx = self.index.search(q, 1)
        ids = idx[:, 0].astype(np.int64)
        if np.any(ids < 0):
            # An approximate index found no candidate in the probed lists: fall back to the
            # exact neighbour so the map stays total (still a deterministic function of d).
            miss = ids < 0
            ids[miss] = exact_nearest(q[miss], self.dictionary)
        return ids


def exact_nearest(queries: np.ndarray, dictionary: np.ndarray) -> np.ndarray:
    """Exact L2 nearest dictionary id of each query with faiss brute force, (N,) int64."""
    import faiss

    index = faiss.IndexFlatL2(DESCRIPTOR_DIM)
    index.add(np.ascontiguousarray(dictionary, dtype=np.float32))
    return index.search(check_queries(queries), 1)[1][:, 0].astype(np.int64)


# --------------------------------------------------------------------------- sampling


def _uniform_subsets(n_rows: int, population: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` distinct values uniform in [0, population) per row, (n_rows, size) int64.

    Floyd's algorithm, vectorised over rows: for j = population-size .. population-1 draw
    t ~ U{0..j}; keep t unless already chosen, else keep j. Every size-subset is equally
    likely, whatever ``population`` (no rejection loop, no O(population) memory).
    """
    out = np.empty((n_rows, size), np.int64)
    for col, j in enumerate(range(population - size, population)):
        t = rng.integers(0, j + 1, size=n_rows)
        if col:
            taken = np.any(out[:, :col] == t[:, None], axis=1)
            t = np.where(taken, j, t)
        out[:, col] = t
    return out


def _shuffle_rows(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    order = np.argsort(rng.random(a.shape), axis=1)
    return np.take_along_axis(a, order, axis=1)


def omega_subset(
    true_ids: np.ndarray,
    domain_size: int,
    m: int,
    epsilon: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Sample Z for every quantised descriptor id ``d'`` (Eq. (4) via Eq. (5), section 5.2).

    Args:
        true_ids: (N,) dictionary ids ``d'``.
        domain_size: |K|.
        m: subset size.
        epsilon: privacy budget (``inf`` only with ``m = 1``).
        rng: the randomness (never released).

    Returns:
        ``(subsets, u)``: (N, m) int64 dictionary ids in a random order per row, and the (N,)
        Bernoulli draws (secret: ``u`` says whether ``d'`` is in Z; for tests and truth only).
    """
    ids = np.asarray(true_ids, dtype=np.int64).reshape(-1)
    log_p = log_inclusion_probability(epsilon, m, math.log(domain_size))
    if len(ids) and (ids.min() < 0 or ids.max() >= domain_size):
        raise InputError(f"true ids must lie in [0, {domain_size}); got [{ids.min()}, {ids.max()}]")
    n = len(ids)
    u = np.log(rng.random(n)) < log_p if log_p < 0.0 else np.ones(n, bool)
    subsets = np.empty((n, m), np.int64)
    for included in (True, False):
        rows = np.flatnonzero(u == included)
        if len(rows) == 0:
            continue
        others = m - int(included)
        # Others are uniform over K \ {d'}: draw from [0, |K|-1) and skip over d'.
        y = _uniform_subsets(len(rows), domain_size - 1, others, rng)
        y += y >= ids[rows, None]
        subsets[rows, :others] = y
        if included:
            subsets[rows, m - 1] = ids[rows]
    return _shuffle_rows(subsets, rng), u


# --------------------------------------------------------------------------- naive variant


def to_uint8_domain(descriptors: np.ndarray) -> np.ndarray:
    """COLMAP's uint8 store of L2 SIFT, ``min(round(512 d), 255)``: the element of the naive K."""
    d = check_queries(descriptors)
    return np.minimum(np.round(512.0 * np.maximum(d, 0.0)), 255.0).astype(np.uint8)


def from_uint8_domain(codes: np.ndarray) -> np.ndarray:
    """uint8 descriptors back to L2-normalised float32 (all-zero codes stay zero)."""
    q = np.asarray(codes, dtype=np.float32)
    norm = np.linalg.norm(q, axis=-1, keepdims=True)
    return np.divide(q, norm, out=np.zeros_like(q), where=norm > 0)


def naive_omega_subset(
    descriptors: np.ndarray,
    m: int,
    epsilon: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """The omega-subset mechanism on the full uint8 SIFT domain, |K| = 2^(8*128) (section 5.2).

    ``d'`` is the uint8 code of ``d`` (a deterministic map); ``u`` follows Eq. (5) in log
    space (for eps = 10, m = 2: log Pr(u=1) = -699, i.e. u = 1 about once in 1e303 draws);
    the other ``m - u`` elements are uniform 128-byte codes, redrawn in the (probability
    2^-1024) case they equal ``d'`` or each other. Returns ``(codes, u)``: (N, m, 128) uint8
    in random order per row and the secret Bernoulli draws.
    """
    true = to_uint8_domain(descriptors)
    log_p = log_inclusion_probability(epsilon, m, NAIVE_LOG_DOMAIN_SIZE)
    n = len(true)
    u = np.log(rng.random(n)) < log_p if log_p < 0.0 else np.ones(n, bool)
    codes = rng.integers(0, 256, size=(n, m, DESCRIPTOR_DIM), dtype=np.uint8)
    codes[u, m - 1] = true[u]
    while True:
        same_as_true = np.all(codes == true[:, None, :], axis=2)
        same_as_true[u, m - 1] = False
        clash = same_as_true.copy()
        for a in range(m):
            for b in range(a + 1, m):
                clash[:, b] |= np.all(codes[:, a] == codes[:, b], axis=1)
        if not clash.any():
            break
        rows, cols = np.nonzero(clash)
        codes[rows, cols] = rng.integers(0, 256, size=(len(rows), DESCRIPTOR_DIM), dtype=np.uint8)
    order = np.argsort(rng.random((n, m)), axis=1)
    return np.take_along_axis(codes, order[:, :, None], axis=1), u


# --------------------------------------------------------------------------- simulated dictionary


def jittered_dictionary(descriptors: np.ndarray, size: int, sigma: float, seed: int) -> np.ndarray:
    """A SIMULATED dictionary of ``size`` distinct unit rows scattered around real descriptors.

    Row i is ``normalise(descriptors[i mod N] + sigma * noise)`` with non-negative entries
    (SIFT's orthant). Used where the bundled images cannot support the paper's |K| = 128k..1M
    k-means centroids (benchmarks, large-|K| sweeps); it keeps the clustered geometry of real
    SIFT, which is what an approximate index's recall depends on. Not the paper's k-means K.
    """
    base = check_queries(descriptors)
    if len(base) == 0:
        raise InputError("jittered_dictionary needs at least one real descriptor")
    if size < 1 or sigma <= 0:
        raise InputError(f"jittered_dictionary needs size >= 1 and sigma > 0; got size={size}, sigma={sigma}")
    rng = np.random.default_rng(seed)
    rows = base[np.arange(size) % len(base)] + sigma * rng.standard_normal((size, DESCRIPTOR_DIM)).astype(np.float32)
    rows = np.maximum(rows, 0.0)
    norm = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.ascontiguousarray(rows / np.maximum(norm, 1e-12), dtype=np.float32)
