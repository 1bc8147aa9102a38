"""Defense ``ldp-feat``: descriptors with local differential privacy (LDP-Feat (ICCV 2023) section 5, S1).

Every SIFT descriptor d of the private images is quantised to its nearest neighbour d' in a
public dictionary K and replaced by an m-subset Z of K drawn by the omega-subset mechanism
(Eq. (4) via Eq. (5)); the release carries Z (descriptors and dictionary ids, in random
order) with the keypoints. ``dictionary_size: full`` is the naive variant on the whole
uint8 SIFT domain, |K| = 2^1024 (section 5.2), whose Pr(u=1) is computed in log space.

Each cell logs utility metrics (``utility/...`` in MLflow; names in docs/ldp_feat.md):
the analytic and empirical inclusion rate of d', the quantisation error, the matching
utility with all m candidates per keypoint + RANSAC, and ``epsilon_empirical_lb`` of the
attack-agnostic privacy audit (:mod:`vispriv.plugins.descriptor_release.privacy_audit`), run on
two public dictionary entries (never on private descriptors, so nothing private is logged).
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, model_validator

from vispriv.harness import CellContext, Defense, Images, Payload, PluginConfig, Protected, UtilityOnly
from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release import ldp
from vispriv.plugins.descriptor_release.config import scene_sift
from vispriv.plugins.descriptor_release.dictionary import KmeansMethod, kmeans_method_field
from vispriv.plugins.descriptor_release.matching import MatchingConfig, utility_directions
from vispriv.plugins.descriptor_release.payloads import DescriptorPublic, LdpFeatures, RawFeatures
from vispriv.plugins.descriptor_release.privacy_audit import AuditResult, VectorIds, audit_finite_set
from vispriv.plugins.descriptor_release.sift import SiftConfig, extract_features

#: Trials of the audit for the naive variant (each trial is m * 128 bytes).
NAIVE_AUDIT_TRIALS = 20_000


class LdpFeatConfig(PluginConfig):
    """Settings of LDP-Feat. ``epsilon`` may be ``.inf`` in YAML (then ``m`` must be 1)."""

    epsilon: float = Field(10.0, ge=0.0, description="privacy budget; inf releases d' alone")
    m: int = Field(2, ge=1, description="descriptors released per keypoint (subset size)")
    dictionary_size: int | Literal["full"] = Field(
        1024, description="|K|; 'full' = the naive variant on all 2^(8*128) uint8 descriptors"
    )
    dictionary_source: Literal["kmeans", "jittered"] = Field(
        "kmeans", description="kmeans: spherical k-means of public SIFT (the paper); jittered: SIMULATED"
    )
    kmeans_method: KmeansMethod = kmeans_method_field()
    dictionary_augment: int = Field(3, ge=0, le=32, description="random views per public image for k-means")
    jitter_sigma: float = Field(0.05, gt=0.0, description="noise of the simulated jittered dictionary")
    dictionary_seed: int = Field(
        0, ge=0, description="seed of k-means / jitter / IVF training: K is public, so anyone rebuilds the same K"
    )
    quantiser: Literal["exact", "ivf", "hnsw"] = "exact"
    nlist: int = Field(1024, ge=1, description="IVF lists (quantiser: ivf)")
    nprobe: int = Field(16, ge=1, description="IVF lists probed per query (quantiser: ivf)")
    hnsw_m: int = Field(32, ge=4, le=128, description="HNSW links per node (quantiser: hnsw)")
    ef_construction: int = Field(200, ge=8, description="HNSW build beam (quantiser: hnsw)")
    ef_search: int = Field(64, ge=1, description="HNSW search beam (quantiser: hnsw)")
    sift: SiftConfig | None = Field(
        None, description="SIFT of the private and dictionary photos; None = the scene's (DescriptorPublic.sift), "
        "as affine lifting and every attacker use",
    )
    audit_trials: Annotated[int, UtilityOnly] = Field(
        200_000, ge=0, description="releases per input of the privacy audit; 0 = off"
    )
    audit_confidence: Annotated[float, UtilityOnly] = Field(0.95, ge=0.5, lt=1.0)
    utility: Annotated[bool, UtilityOnly] = Field(True, description="run the matching + RANSAC utility evaluator")
    matching: Annotated[MatchingConfig, UtilityOnly] = MatchingConfig()

    @model_validator(mode="after")
    def _check(self) -> LdpFeatConfig:
        if math.isnan(self.epsilon):
            raise ValueError("epsilon must be >= 0 or inf; got nan")
        if math.isinf(self.epsilon) and self.m != 1:
            raise ValueError(f"epsilon=inf releases d' alone, so m must be 1; got m={self.m}")
        if isinstance(self.dictionary_size, int):
            if self.dictionary_size < 2:
                raise ValueError(f"dictionary_size must be >= 2 or 'full'; got {self.dictionary_size}")
            if self.m > self.dictionary_size:
                raise ValueError(f"m={self.m} exceeds dictionary_size |K|={self.dictionary_size}; m must be <= |K|")
        return self

    @property
    def naive(self) -> bool:
        return self.dictionary_size == "full"

    @property
    def log_domain_size(self) -> float:
        return ldp.NAIVE_LOG_DOMAIN_SIZE if self.naive else math.log(int(self.dictionary_size))


class LdpFeat(Defense):
    """LDP-Feat (Pittaluga & Zhuang, ICCV 2023, section 5.2): omega-subset mechanism on a public dictionary."""

    name = "ldp-feat"
    version = "1.0.0"
    scenario = "descriptor-release"
    headline = ("warp_homography_acc", "hpatches_homography_acc")
    Config = LdpFeatConfig
    consumes = (Images, RawFeatures)
    produces = (LdpFeatures,)
    #: What the privacy audit compares ``epsilon_empirical_lb`` against.
    claims_epsilon_bound = True

    config: LdpFeatConfig

    # ------------------------------------------------------------------ pieces

    def sift(self, public: Payload | None) -> SiftConfig:
        """The SIFT settings: the config's, else the scene's (``public.sift``), else the defaults.

        Following the scene keeps the dictionary K the one an attacker rebuilds from the same
        public knowledge (the ``invert-ldp`` attack builds its copy with the scene's SIFT).
        """
        return scene_sift(self.config.sift, public)

    def dictionary(self, public: Payload | None, ctx: CellContext) -> np.ndarray:
        """The public dictionary K, (|K|, 128), built from ``public.lifting`` (cached).

        A deterministic function of the public images and the config (``dictionary_seed``),
        not of the cell's seed, so an attacker who knows the config rebuilds exactly K.
        """
        from vispriv.plugins.descriptor_release.dictionary import build_dictionary

        cfg = self.config
        if not isinstance(public, DescriptorPublic):
            raise InputError("ldp-feat needs DescriptorPublic images to build its public dictionary K")
        size = int(cfg.dictionary_size)
        seed = cfg.dictionary_seed
        if cfg.dictionary_source == "kmeans":
            k = build_dictionary(
                public.lifting, size, self.sift(public), seed, augment=cfg.dictionary_augment, cache=ctx.cache,
                method=cfg.kmeans_method, progress=ctx.progress,
            )
        else:
            real = extract_features(public.lifting, self.sift(public), cache=ctx.cache, progress=ctx.progress).descriptors
            k = ldp.jittered_dictionary(real, size, cfg.jitter_sigma, seed)
        return ldp.check_dictionary(k)

    def quantiser(self, dictionary: np.ndarray, ctx: CellContext | None = None) -> ldp.Quantiser:
        """The fixed quantiser d -> d' (exact, IVF trained with ``dictionary_seed``, or HNSW)."""
        cfg = self.config
        qcfg = ldp.QuantiserConfig(cfg.quantiser, cfg.nlist, cfg.nprobe, cfg.dictionary_seed, cfg.hnsw_m, cfg.ef_search, cfg.ef_construction)
        return ldp.Quantiser(dictionary, qcfg, cache=ctx.cache if ctx is not None else None)

    # ------------------------------------------------------------------ protect

    def protect(self, private: Payload, public: Payload | None, ctx: CellContext) -> Protected:
        cfg = self.config
        if isinstance(private, RawFeatures):
            features, images = private, None
        elif isinstance(private, Images):
            features, images = extract_features(private, self.sift(public), cache=ctx.cache), private
        else:
            raise InputError(f"ldp-feat needs Images or RawFeatures; got {type(private).__name__}")
        descriptors = ldp.check_queries(features.descriptors)
        utility: dict[str, float] = {}
        k = quant = None
        if not cfg.naive:
            k = self.dictionary(public, ctx)
            if cfg.m > len(k):
                raise InputError(f"m={cfg.m} exceeds the dictionary size |K|={len(k)}; m must be <= |K|")
            quant = self.quantiser(k, ctx)
        candidates, ids, u, nearest = self._privatise(descriptors, quant, ctx.rng("ldp-feat", "mechanism"))
        audit = self._audit_naive(ctx) if quant is None else self._audit_dictionary(quant, ctx)

        release = LdpFeatures(
            **features.keypoint_fields(),
            candidates=candidates,
            candidate_ids=ids,
            epsilon=cfg.epsilon,
            dictionary_size=cfg.dictionary_size,
        )
        log_p = ldp.log_inclusion_probability(cfg.epsilon, cfg.m, cfg.log_domain_size)
        utility["inclusion_probability"] = math.exp(log_p)
        utility["log10_inclusion_probability"] = log_p / math.log(10.0)
        utility["inclusion_rate"] = float(np.mean(u)) if len(u) else 0.0
        utility["quantisation_cosine"] = _mean_cosine(descriptors, nearest)
        utility["best_candidate_cosine"] = _best_cosine(descriptors, candidates)
        utility["keypoints"] = float(len(descriptors))
        directions = {"log10_inclusion_probability": True}
        if audit is not None:
            utility.update(audit.metrics())
            directions.update({"epsilon_empirical_lb": False, "epsilon_empirical_point": False,
                               "epsilon_empirical_violation": False})
            if ctx.artifact_dir is not None:
                ctx.artifact("privacy_audit.json").write_text(json.dumps(_audit_record(audit), indent=2))
        if images is not None and cfg.utility:
            matching = self._matching_utility(images, public, k, ctx)
            for pairs in ("hpatches", "warp"):  # the real benchmark's pairs, or synthetic warps
                if f"{pairs}_n_matches" in matching and f"{pairs}_mma_3px" in matching:
                    matching[f"{pairs}_correct_matches_3px"] = matching[f"{pairs}_n_matches"] * matching[f"{pairs}_mma_3px"]
            utility.update(matching)
            directions.update(utility_directions(matching))
        truth: dict[str, Payload] = {"descriptors": features}
        if images is not None:
            truth["images"] = images
        return Protected(release=release, truth=truth, utility=utility, utility_directions=directions)

    def _privatise(
        self, descriptors: np.ndarray, quant: ldp.Quantiser | None, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]:
        """Steps 1-3 of section 5.2: (candidates (N, m, 128), ids (N, m) or None, secret u, d')."""
        cfg = self.config
        d = ldp.check_queries(descriptors)
        if quant is None:
            codes, u = ldp.naive_omega_subset(d, cfg.m, cfg.epsilon, rng)
            return ldp.from_uint8_domain(codes), None, u, ldp.from_uint8_domain(ldp.to_uint8_domain(d))
        true_ids = quant.assign(d)
        ids, u = ldp.omega_subset(true_ids, quant.size, cfg.m, cfg.epsilon, rng)
        return quant.dictionary[ids], ids, u, quant.dictionary[true_ids]

    # ------------------------------------------------------------------ audit

    def _audit_dictionary(self, quant: ldp.Quantiser, ctx: CellContext) -> AuditResult | None:
        """Audit d -> Z on two public dictionary entries (neighbouring inputs: two descriptors)."""
        cfg = self.config
        if cfg.audit_trials == 0:
            return None
        x1, x2 = quant.dictionary[0:1], quant.dictionary[1:2]

        def mechanism(d: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
            true = quant.assign(d)
            return ldp.omega_subset(np.repeat(true, n), quant.size, cfg.m, cfg.epsilon, rng)[0]

        return audit_finite_set(
            mechanism, x1, x2, cfg.audit_trials, ctx.rng("ldp-feat", "audit"),
            claimed_epsilon=cfg.epsilon, confidence=cfg.audit_confidence,
        )

    def _audit_naive(self, ctx: CellContext) -> AuditResult | None:
        """Audit the naive variant on two public descriptors of the uint8 domain."""
        cfg = self.config
        if cfg.audit_trials == 0:
            return None
        basis = np.eye(2, ldp.DESCRIPTOR_DIM, dtype=np.float32)
        ids = VectorIds()

        def mechanism(d: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
            return ids(ldp.naive_omega_subset(np.repeat(d, n, axis=0), cfg.m, cfg.epsilon, rng)[0])

        return audit_finite_set(
            mechanism, basis[0:1], basis[1:2], min(cfg.audit_trials, NAIVE_AUDIT_TRIALS),
            ctx.rng("ldp-feat", "audit"), claimed_epsilon=cfg.epsilon, confidence=cfg.audit_confidence,
        )

    # ------------------------------------------------------------------ utility

    def _matching_utility(
        self, images: Images, public: Payload | None, dictionary: np.ndarray | None, ctx: CellContext
    ) -> dict[str, float]:
        """Matching with all m candidates per keypoint + RANSAC (the scenario's shared evaluator).

        The evaluator privatises the query side afresh (an independent draw of the same
        mechanism, same dictionary and quantiser) and matches it to raw reference features.
        """
        from vispriv.plugins.descriptor_release.matching import evaluate_utility

        cfg = self.config
        rng = ctx.rng("ldp-feat", "utility")
        quant = self.quantiser(dictionary, ctx) if dictionary is not None else None

        def protect(raw: RawFeatures) -> LdpFeatures:
            cand, ids = self._privatise(raw.descriptors, quant, rng)[:2]
            return LdpFeatures(**raw.keypoint_fields(), candidates=cand, candidate_ids=ids)

        distance = word_distance(quant) if cfg.matching.criterion == "vocabulary" else candidate_distance
        return evaluate_utility(
            images, self.sift(public), protect, cfg.matching, ctx.child_seed("ldp-feat", "matching"),
            distance=distance, cache=ctx.cache, progress=ctx.progress,
        )


def candidate_distance(a: object, a_rows: np.ndarray, b: object, b_rows: np.ndarray) -> np.ndarray:
    """Distance of LDP-Feat query rows to raw reference rows: min over the m candidates.

    Every one of a keypoint's m candidates takes part in matching; the keypoint's distance
    to a reference descriptor is that of its closest candidate. Raw-to-raw pairs fall back
    to the shared Euclidean distance.
    """
    from vispriv.plugins.descriptor_release.matching import pair_distance, squared_distances

    if not isinstance(a, LdpFeatures) or not isinstance(b, RawFeatures):
        return pair_distance(a, a_rows, b, b_rows)
    ref = b.descriptors[b_rows]
    best = np.full((len(a_rows), len(b_rows)), np.inf)
    for j in range(a.m):
        best = np.minimum(best, squared_distances(a.candidates[a_rows, j], ref))
    return np.sqrt(np.maximum(best, 0.0))


def word_distance(quant: ldp.Quantiser | None):
    """Distance for vocabulary matching (LDP-Feat (ICCV 2023) Table 3; Nister and Stewenius [28]).

    A reference descriptor's visual word is its nearest dictionary id under the same fixed
    quantiser as the release (the server knows K and its own raw reference descriptors);
    a keypoint's words are its m released ids. Distance 0 where the reference word is one
    of the keypoint's words, infinity elsewhere; with ``matching.criterion: vocabulary``
    every pair at 0 is a match and RANSAC removes the decoys' chance hits. For the naive
    domain (no dictionary) a word is the exact descriptor vector.
    """
    # Quantised once per reference payload; the payload is kept with its words so that a
    # recycled id() can never hand back another payload's words.
    reference_words: dict[int, tuple[RawFeatures, np.ndarray]] = {}

    def words_of(ref: RawFeatures) -> np.ndarray:
        held = reference_words.get(id(ref))
        if held is None or held[0] is not ref:
            words = quant.assign(ref.descriptors) if quant is not None else _vector_words(ref.descriptors)
            held = reference_words[id(ref)] = (ref, words)
        return held[1]

    def distance(a: object, a_rows: np.ndarray, b: object, b_rows: np.ndarray) -> np.ndarray:
        if not isinstance(a, LdpFeatures) or not isinstance(b, RawFeatures):
            raise InputError("vocabulary matching compares an LDP-Feat release with raw reference features")
        if a.candidate_ids is not None:
            query = a.candidate_ids[a_rows]
        else:
            query = _vector_words(a.candidates[a_rows].reshape(-1, a.candidates.shape[2])).reshape(len(a_rows), a.m)
        hit = (query[:, :, None] == words_of(b)[b_rows][None, None, :]).any(axis=1)
        return np.where(hit, 0.0, np.inf)

    return distance


def _vector_words(vectors: np.ndarray) -> np.ndarray:
    """An integer word per exact descriptor vector (the naive domain's 'dictionary id')."""
    rows = np.ascontiguousarray(vectors, dtype=np.float32)
    digests = b"".join(hashlib.blake2b(row.tobytes(), digest_size=8).digest() for row in rows)
    return np.frombuffer(digests, dtype=np.int64).copy()


def _mean_cosine(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) == 0:
        return 0.0
    na = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return float(np.mean(np.sum(a * b, axis=1) / np.maximum(na, 1e-12)))


def _best_cosine(d: np.ndarray, candidates: np.ndarray) -> float:
    if len(d) == 0:
        return 0.0
    dots = np.einsum("nd,nmd->nm", d, candidates)
    norms = np.linalg.norm(d, axis=1)[:, None] * np.linalg.norm(candidates, axis=2)
    return float(np.mean(np.max(dots / np.maximum(norms, 1e-12), axis=1)))


def _audit_record(audit: AuditResult) -> dict[str, object]:
    return {
        "epsilon_lb": audit.epsilon_lb,
        "epsilon_point": audit.epsilon_point,
        "epsilon_ub": audit.epsilon_ub if math.isfinite(audit.epsilon_ub) else "inf",
        "claimed_epsilon": audit.claimed_epsilon if audit.claimed_epsilon is None or math.isfinite(audit.claimed_epsilon) else "inf",
        "event": audit.event,
        "counts": list(audit.counts),
        "n_trials": audit.n_trials,
        "confidence": audit.confidence,
        "violated": audit.violated,
        "note": audit.note,
        "inputs": "two public dictionary entries (ids 0 and 1), or two basis vectors for the naive domain",
    }
