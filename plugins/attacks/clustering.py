"""``clustering``: the clustering attack of LDP-Feat (ICCV 2023) section 4.2 (no access to W).

Threat model: the attacker holds the release and its own public database Z (SIFT of the
scene's ``public`` images), never W. Q, the auxiliary subspaces, are the other subspaces of
the same release -- of the same image (``aux: image``, the default) or of every image
(``aux: release``). Subspaces that intersect D (subspace-to-subspace distance 0) form Q'.
The number of clusters is k = n_adv + 1 (section 4.2 step 3: the adversarial rows and d),
n_adv from the config's ``n_adversarial`` or the release's public lifting mode (random 0,
hybrid / sub-hybrid floor(m/2), adversarial m).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from vispriv.harness import Attack, AttackResult, CellContext
from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release.attack_common import (
    PublicDatabaseConfig,
    adversarial_count,
    public_database,
    recovered,
)
from vispriv.plugins.descriptor_release.datasets import SCENARIO, scene_public
from vispriv.plugins.descriptor_release.payloads import LiftedFeatures, RawFeatures, RecoveryTrace
from vispriv.plugins.descriptor_release.recovery import cluster_candidates, intersecting, select_candidates


class ClusteringAttack(Attack):
    """k = n_adv + 1 clusters of the |V| nearest Z rows, Eq. (2), and the auxiliary subspaces Q' to pick d."""

    class Config(PublicDatabaseConfig):
        n_adversarial: int | None = Field(None, ge=0)
        v_size: int | None = Field(None, ge=2)
        kmeans_iters: int = Field(10, ge=1)
        aux: Literal["image", "release", "none"] = "image"
        intersect_tol: float = Field(1e-6, gt=0.0)

    name = "clustering"
    version = "1.0"
    scenario = SCENARIO
    consumes = (LiftedFeatures,)
    produces = (RawFeatures, RecoveryTrace)

    def attack(self, release: LiftedFeatures, public: object, ctx: CellContext) -> AttackResult:
        cfg = self.config
        z = public_database(scene_public(public), cfg, ctx.cache)
        n_adv = adversarial_count(release, cfg.n_adversarial, self.name)
        if n_adv is None:
            raise InputError(
                "clustering needs the number of adversarial directions: the release carries no lifting mode; "
                f"set n_adversarial (0..m = {release.m})"
            )
        k = n_adv + 1
        v_size = min(len(z), cfg.v_size) if cfg.v_size else default_cluster_v_size(k, len(z))
        cands, sizes, rows, _ = cluster_candidates(z, release.offsets, release.bases, k, v_size, cfg.kmeans_iters, ctx.device)
        if cfg.aux == "none":
            aux = [np.zeros(0, np.int64)] * release.n_keypoints
        else:
            groups = release.image_index if cfg.aux == "image" else np.zeros(release.n_keypoints, np.int64)
            aux = intersecting(release.offsets, release.bases, groups, cfg.intersect_tol)
        est, _ = select_candidates(cands, sizes, aux, release.offsets, release.bases)
        width = max([len(a) for a in aux] + [0])
        aux_rows = np.full((release.n_keypoints, width), -1, np.int64)
        for i, a in enumerate(aux):
            aux_rows[i, : len(a)] = a
        trace = RecoveryTrace(
            neighbours=z[rows[:, :k]], source="public", offsets=release.offsets, bases=release.bases, aux_rows=aux_rows
        )
        sizes_q = np.array([len(a) for a in aux], np.float64)
        return AttackResult(
            estimate={"descriptors": recovered(release, est, cands), "lifting": trace},
            metrics={
                "aux_found": float(np.mean(sizes_q > 0)) if len(sizes_q) else 0.0,
                "aux_mean_size": float(sizes_q.mean()) if len(sizes_q) else 0.0,
            },
            metric_directions={"aux_found": True, "aux_mean_size": True},
        )


def default_cluster_v_size(k: int, database_size: int) -> int:
    """|V| when the config leaves it out: four rows per cluster, at least 16, at most |Z|."""
    return min(database_size, max(16, 4 * k))
