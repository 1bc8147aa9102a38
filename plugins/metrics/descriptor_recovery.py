"""Metrics of descriptor-recovery attacks (LDP-Feat (ICCV 2023) sections 4, 6.1 and S3).

* ``descriptor-recovery`` scores recovered descriptors (estimate key ``descriptors``)
  against the true ones row by row: mean cosine similarity, mean L2 distance (descriptors
  L2-normalised first) and the fraction *recovered*: the estimate's nearest true descriptor
  of the same image is its own, and passes Lowe's ratio test (``ratio``, 0.8).
* ``lifting-assumptions`` checks the assumptions of the attacks (estimate key ``lifting``):
  S3.1 -- each of the top N = n_adv + 1 database descriptors nearest to D matches, by the
  ratio test (> 0.8 rejected), a distinct one of the n_adv + 1 descriptors that generated
  D (d and the adversarial rows); reported for traces over the lifting database W.
  S3.2 -- a subspace has a *collision* when one of its intersecting auxiliary subspaces Q'
  passes within ``collision_radius`` of the true d, so the clustering attack's selection
  cannot single d out; reported over subspaces with a non-empty Q'.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from vispriv.harness import CellContext, Metric, PluginConfig
from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release.payloads import LiftingTruth, RawFeatures, RecoveryTrace
from vispriv.plugins.descriptor_release.sift import l2_normalise
from vispriv.plugins.descriptor_release.subspace import point_subspace_sqdist


def _ratio_ok(dist: np.ndarray, ratio: float) -> tuple[np.ndarray, np.ndarray]:
    """Nearest column of each row and whether it passes the ratio test (single column: passes)."""
    nn = np.argmin(dist, axis=1)
    if dist.shape[1] < 2:
        return nn, np.ones(len(dist), bool)
    two = np.partition(dist, 1, axis=1)[:, :2]
    return nn, two[:, 0] < ratio * two[:, 1]


class DescriptorRecovery(Metric):
    """Cosine, L2 and ratio-test recovery of estimated descriptors against the true ones."""

    class Config(PluginConfig):
        ratio: float = Field(0.8, gt=0.0, le=1.0)

    name = "descriptor-recovery"
    version = "1.0"
    scenario = "descriptor-release"
    consumes = (RawFeatures,)
    higher_is_better = {"desc_cosine": True, "desc_l2": False, "desc_recovered": True}
    headline = ("desc_cosine",)

    def score(self, truth: RawFeatures, estimate: RawFeatures, ctx: CellContext) -> dict[str, float]:
        if truth.n_keypoints != estimate.n_keypoints or not np.array_equal(truth.image_index, estimate.image_index):
            raise InputError(
                f"estimate has {estimate.n_keypoints} descriptors, truth {truth.n_keypoints}: rows must correspond"
            )
        if truth.n_keypoints == 0:
            raise InputError("descriptor recovery of an empty release is undefined")
        t = l2_normalise(truth.descriptors).astype(np.float64)
        e = l2_normalise(estimate.descriptors).astype(np.float64)
        recovered = np.zeros(len(t), bool)
        for img in np.unique(truth.image_index):
            rows = np.flatnonzero(truth.image_index == img)
            d = np.sqrt(np.maximum((e[rows] ** 2).sum(1)[:, None] + (t[rows] ** 2).sum(1)[None] - 2 * e[rows] @ t[rows].T, 0))
            nn, ok = _ratio_ok(d, self.config.ratio)
            recovered[rows] = ok & (nn == np.arange(len(rows)))
        return {
            "desc_cosine": float(np.mean((t * e).sum(1))),
            "desc_l2": float(np.mean(np.linalg.norm(t - e, axis=1))),
            "desc_recovered": float(np.mean(recovered)),
        }


class LiftingAssumptions(Metric):
    """The assumption checks of LDP-Feat (ICCV 2023) supplement S3.1 (intersections) and S3.2 (clustering collisions)."""

    class Config(PluginConfig):
        ratio: float = Field(0.8, gt=0.0, le=1.0)
        collision_radius: float = Field(0.3, gt=0.0)

    name = "lifting-assumptions"
    version = "1.0"
    scenario = "descriptor-release"
    consumes = (RecoveryTrace,)
    truth_types = (LiftingTruth,)
    higher_is_better = {"s31_assumption_holds": True, "s31_neighbour_match": True, "s32_collision_free": True}

    def score(self, truth: LiftingTruth, estimate: RecoveryTrace, ctx: CellContext) -> dict[str, float]:
        if len(truth.descriptors) != len(estimate.neighbours):
            raise InputError(f"trace has {len(estimate.neighbours)} subspaces, truth {len(truth.descriptors)}")
        out: dict[str, float] = {}
        if estimate.source == "lifting" and len(truth.descriptors):
            out.update(self._s31(truth, estimate))
        if estimate.aux_rows.shape[1] > 0:
            out.update(self._s32(truth, estimate))
        return out

    def _s31(self, truth: LiftingTruth, trace: RecoveryTrace) -> dict[str, float]:
        gen = np.concatenate([truth.descriptors[:, None, :], truth.adversarial], axis=1).astype(np.float64)
        n = min(gen.shape[1], trace.neighbours.shape[1])
        nb = trace.neighbours[:, :n].astype(np.float64)
        dist = np.linalg.norm(nb[:, :, None, :] - gen[:, None, :, :], axis=-1)
        nn, ok = _ratio_ok(dist.reshape(-1, gen.shape[1]), self.config.ratio)
        nn, ok = nn.reshape(-1, n), ok.reshape(-1, n)
        distinct = np.array([len(set(row)) == n for row in nn])
        holds = ok.all(axis=1) & distinct
        return {"s31_assumption_holds": float(holds.mean()), "s31_neighbour_match": float(ok.mean())}

    def _s32(self, truth: LiftingTruth, trace: RecoveryTrace) -> dict[str, float]:
        free = []
        for i, rows in enumerate(trace.aux_rows):
            q = rows[rows >= 0]
            if len(q) == 0:
                continue
            sq = point_subspace_sqdist(truth.descriptors[i : i + 1], trace.offsets[q], trace.bases[q])
            free.append(np.sqrt(sq.min()) > self.config.collision_radius)
        return {"s32_collision_free": float(np.mean(free))} if free else {}
