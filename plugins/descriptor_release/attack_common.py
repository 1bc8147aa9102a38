"""Shared pieces of the descriptor-recovery attacks: the public database Z and the estimate payloads."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from vispriv.harness import Cache, PluginConfig
from vispriv.plugins.descriptor_release.dictionary import build_dictionary
from vispriv.plugins.descriptor_release.payloads import DescriptorPublic, LiftedFeatures, RawFeatures


class PublicDatabaseConfig(PluginConfig):
    """The attacker's public database Z: spherical k-means of SIFT of the scene's ``public`` images."""

    database_size: int = Field(1024, ge=1)
    database_augment: int = Field(3, ge=0, le=20)
    dictionary_seed: int = 1
    kmeans_niter: int = Field(20, ge=1)


def public_database(pub: DescriptorPublic, cfg: PublicDatabaseConfig, cache: Cache) -> np.ndarray:
    """Z (section 4.2 step 1), built from images disjoint from the lifting images (section 6.1)."""
    return build_dictionary(pub.public, cfg.database_size, pub.sift, cfg.dictionary_seed, cfg.database_augment, cfg.kmeans_niter, cache)


def recovered(release: LiftedFeatures, descriptors: np.ndarray) -> RawFeatures:
    """The recovered descriptors at the release's keypoints (estimate key ``descriptors``; chains into inversion)."""
    return RawFeatures(
        keypoints=release.keypoints,
        image_index=release.image_index,
        image_ids=list(release.image_ids),
        image_size=release.image_size,
        descriptors=descriptors,
    )
