"""Shared pieces of the descriptor-recovery attacks: the public database Z and the estimate payloads."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from vispriv.harness import Cache, PluginConfig
from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release.dictionary import KmeansMethod, build_dictionary, kmeans_method_field
from vispriv.plugins.descriptor_release.payloads import DescriptorPublic, LiftedFeatures, RecoveredFeatures
from vispriv.plugins.descriptor_release.subspace import n_adversarial


class PublicDatabaseConfig(PluginConfig):
    """The attacker's public database Z: spherical k-means of SIFT of the scene's ``public`` images."""

    database_size: int = Field(1024, ge=1)
    database_augment: int = Field(3, ge=0, le=20)
    dictionary_seed: int = 1
    kmeans_niter: int = Field(20, ge=1)
    kmeans_method: KmeansMethod = kmeans_method_field()


def public_database(pub: DescriptorPublic, cfg: PublicDatabaseConfig, cache: Cache) -> np.ndarray:
    """Z (section 4.2 step 1), built from images disjoint from the lifting images (section 6.1)."""
    return build_dictionary(
        pub.public, cfg.database_size, pub.sift, cfg.dictionary_seed, cfg.database_augment, cfg.kmeans_niter, cache, method=cfg.kmeans_method
    )


def recovered(release: LiftedFeatures, descriptors: np.ndarray, candidates: np.ndarray | None = None) -> RecoveredFeatures:
    """The recovered descriptors at the release's keypoints (estimate key ``descriptors``; chains into
    inversion), with the attacked subspaces and the candidate set they were chosen from."""
    return RecoveredFeatures(**release.keypoint_fields(), descriptors=descriptors, offsets=release.offsets,
                             bases=release.bases, candidates=candidates)


def adversarial_count(release: LiftedFeatures, override: int | None, attack: str) -> int | None:
    """How many of the m directions are lifting-database rows: the config's ``n_adversarial``,
    else what the release's public lifting mode implies (random 0, hybrid / sub-hybrid
    floor(m/2), adversarial m; LDP-Feat (ICCV 2023) section 3.1, ref [11]); ``None`` when neither says."""
    if override is not None:
        if override > release.m:
            raise InputError(f"{attack}: n_adversarial = {override} exceeds the subspace dimension m = {release.m}")
        return override
    if release.mode is None:
        return None
    return n_adversarial(release.m, release.mode)
