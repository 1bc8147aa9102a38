"""``database``: the database attack of LDP-Feat (ICCV 2023) section 4.1 (the attacker has the lifting database W).

Threat model: the attacker holds the release and W (``affine-lifting`` ``publish_database``),
nothing else. Step 2 takes as adversarial rows the ``n_adv`` rows of W on the subspace:
n_adv is the config's ``n_adversarial``, else the count the release's lifting mode implies
(random 0, hybrid / sub-hybrid floor(m/2), adversarial m), else -- for a release that does
not say -- the number of W rows at distance ~0 (below ``ZERO_DISTANCE``) among the m
nearest, the median over the release's subspaces. Taking too few leaves adversarial rows
at distance 0 in V, where Eq. (1)'s 1/dist weight makes them the estimate.

|V| and |U| (the paper gives neither) default to |W| / 8 (at least 16) and 1: the pair an
attacker holding W picks by lifting descriptors of its *own* photos with W and measuring
the recovery error (benchmarks/probes/database_attack_calibration.py on the bundled ``public``
split, disjoint from W's photos and from the private ones; docs/inversion.md, 'Database attack: |V| and |U|').
There, at W = 4,096 and m = 2, |V| 512 / |U| 1 recovers d at mean L2 .146 against .487 for
|V| 16 / |U| 4, and the farthest-from-a rows of a larger V win at m = 4 and 8 too.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from vispriv.harness import Attack, AttackResult, CellContext, PluginConfig
from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release.attack_common import adversarial_count, recovered
from vispriv.plugins.descriptor_release.datasets import SCENARIO
from vispriv.plugins.descriptor_release.payloads import LiftedFeatures, RawFeatures, RecoveryTrace
from vispriv.plugins.descriptor_release.recovery import database_attack
from vispriv.plugins.descriptor_release.subspace import nearest_to_subspaces

#: A distance below this counts as "on the subspace" (the exact recovery of step 2).
ZERO_DISTANCE = 1e-2


class DatabaseAttack(Attack):
    """Exact recovery of the adversarial rows (distance 0), then Eq. (1) over the next |V| rows of W."""

    class Config(PluginConfig):
        n_adversarial: int | None = Field(None, ge=0)
        #: |V| of section 4.1 step 3; ``None`` = max(16, |W| // 8), at most |W| - n_adv.
        v_size: int | None = Field(None, ge=1)
        #: |U|: how many rows of V, the farthest from the adversarial ones, enter Eq. (1).
        u_size: int = Field(1, ge=1)

    name = "database"
    version = "1.0"
    scenario = SCENARIO
    consumes = (LiftedFeatures,)
    produces = (RawFeatures, RecoveryTrace)

    def attack(self, release: LiftedFeatures, public: object, ctx: CellContext) -> AttackResult:
        cfg = self.config
        if release.database is None:
            raise InputError("the database attack needs the lifting database W in the release (affine-lifting publish_database: true)")
        w = release.database
        n_adv = adversarial_count(release, cfg.n_adversarial, self.name)
        if n_adv is None:
            n_adv = rows_on_subspaces(w, release, ctx.device)
        v_size = cfg.v_size if cfg.v_size is not None else default_v_size(len(w), n_adv)
        if v_size < 1 or n_adv + v_size > len(w):
            raise InputError(f"n_adversarial + v_size = {n_adv + v_size} must be at most the database size {len(w)} (and v_size >= 1)")
        if cfg.u_size > v_size:
            raise InputError(f"u_size ({cfg.u_size}) must not exceed v_size ({v_size})")
        rec = database_attack(w, release.offsets, release.bases, n_adv, v_size, cfg.u_size, ctx.device)
        dist = rec.nearest_dist
        trace = RecoveryTrace(
            neighbours=w[rec.nearest_rows],
            source="lifting",
            offsets=release.offsets,
            bases=release.bases,
            aux_rows=np.zeros((len(dist), 0), np.int64),
        )
        exact = float(np.mean(dist[:, n_adv - 1] < ZERO_DISTANCE)) if n_adv and len(dist) else 1.0
        gap = float(np.mean(dist[:, n_adv])) if len(dist) else 0.0
        return AttackResult(
            estimate={"descriptors": recovered(release, rec.estimates), "lifting": trace},
            metrics={"adversarial_found": exact, "first_nonzero_distance": gap},
            metric_directions={"adversarial_found": True, "first_nonzero_distance": False},
        )


def default_v_size(database_size: int, n_adv: int) -> int:
    """|V| when the config leaves it out: max(16, |W| // 8), at most |W| - n_adv (module docstring)."""
    return min(max(16, database_size // 8), database_size - n_adv)


def rows_on_subspaces(database: np.ndarray, release: LiftedFeatures, device: str = "cpu") -> int:
    """Median over subspaces of how many of the m nearest W rows lie on them (distance < ZERO_DISTANCE)."""
    if not release.n_keypoints:
        return 0
    sq, _ = nearest_to_subspaces(database, release.offsets, release.bases, min(release.m, len(database)), device=device)
    return int(np.median(np.sum(np.sqrt(np.clip(sq, 0, None)) < ZERO_DISTANCE, axis=1)))
