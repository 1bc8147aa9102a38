"""``affine-lifting``: adversarial affine subspace embedding of descriptors (ref [11]; LDP-Feat (ICCV 2023) section 3).

Every SIFT descriptor d becomes an m-dimensional affine subspace D containing it, built from
``n_adv`` rows of a lifting database W (random: 0, hybrid / sub-hybrid: floor(m/2),
adversarial: m) and uniform random directions, then re-parameterised so neither the offset
nor the basis exposes d. The release carries only keypoints and subspaces (and W itself
when ``publish_database``: the threat model of the database attack, section 4.1).

W is spherical k-means of SIFT descriptors of the scene's ``lifting`` images (+ augmented
views), ``database_size`` centroids split into 16 contiguous sub-databases; it is built with
``dictionary_seed`` (not the cell seed), so every cell of a sweep shares one W, as in the paper.
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field, model_validator

from vispriv.harness import CellContext, Defense, Images, PluginConfig, Protected, UtilityOnly
from vispriv.harness.errors import ConfigError
from vispriv.plugins.descriptor_release.datasets import SCENARIO, scene_public
from vispriv.plugins.descriptor_release.dictionary import KmeansMethod, build_dictionary, kmeans_method_field
from vispriv.plugins.descriptor_release.matching import MatchingConfig, evaluate_utility, utility_directions
from vispriv.plugins.descriptor_release.payloads import LiftedFeatures, LiftingTruth, RawFeatures
from vispriv.plugins.descriptor_release.sift import extract_features
from vispriv.plugins.descriptor_release.subspace import N_SUB_DATABASES, lift_features, n_adversarial


class AffineLifting(Defense):
    """Adversarial affine subspace lifting (random / adversarial / hybrid / sub-hybrid), re-parameterised."""

    class Config(PluginConfig):
        mode: Literal["random", "adversarial", "hybrid", "sub-hybrid"] = "sub-hybrid"
        m: int = Field(4, ge=1, le=64)
        database_size: int = Field(1024, ge=N_SUB_DATABASES)
        database_augment: int = Field(3, ge=0, le=20)
        dictionary_seed: int = 0
        kmeans_niter: int = Field(20, ge=1)
        kmeans_method: KmeansMethod = kmeans_method_field()
        publish_database: bool = True
        utility: Annotated[bool, UtilityOnly] = True
        matching: Annotated[MatchingConfig, UtilityOnly] = MatchingConfig(stereo=True)

        @model_validator(mode="after")
        def _fits(self) -> AffineLifting.Config:
            pool = self.database_size // N_SUB_DATABASES if self.mode == "sub-hybrid" else self.database_size
            need = n_adversarial(self.m, self.mode)
            if need > pool:
                raise ConfigError(f"m={self.m} ({self.mode}) needs {need} distinct database rows per descriptor; the pool has {pool}")
            return self

    name = "affine-lifting"
    version = "1.0"
    scenario = SCENARIO
    headline = ("warp_homography_acc", "hpatches_homography_acc")
    consumes = (Images,)
    produces = (LiftedFeatures,)

    def protect(self, private: Images, public: object, ctx: CellContext) -> Protected:
        cfg = self.config
        pub = scene_public(public)
        raw = extract_features(private, pub.sift, ctx.cache, progress=ctx.progress)
        database = None
        if n_adversarial(cfg.m, cfg.mode) > 0:
            database = build_dictionary(
                pub.lifting, cfg.database_size, pub.sift, cfg.dictionary_seed, cfg.database_augment, cfg.kmeans_niter, ctx.cache,
                method=cfg.kmeans_method, progress=ctx.progress,
            )
        release, lifting = lift_features(raw, cfg.m, cfg.mode, ctx.child_seed("lift"), database, cfg.publish_database)
        if database is not None:
            adversarial = database[lifting.adversarial_rows]
        else:
            adversarial = np.zeros((raw.n_keypoints, 0, raw.descriptors.shape[1]), np.float32)
        truth = {
            "descriptors": raw,
            "images": private,
            "lifting": LiftingTruth(descriptors=raw.descriptors, adversarial=adversarial),
        }
        utility: dict[str, float] = {}
        if cfg.utility:
            seed = ctx.child_seed("utility")

            def protect_raw(features: RawFeatures) -> LiftedFeatures:
                return lift_features(features, cfg.m, cfg.mode, seed, database, False)[0]

            utility = evaluate_utility(private, pub.sift, protect_raw, cfg.matching, seed, cache=ctx.cache, progress=ctx.progress)
        return Protected(release=release, truth=truth, utility=utility, utility_directions=utility_directions(utility))
