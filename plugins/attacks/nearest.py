"""``nearest``: each lifted subspace is replaced by its nearest public-database descriptor (ref [11]; Table 1)."""

from __future__ import annotations

from vispriv.harness import Attack, AttackResult, CellContext
from vispriv.plugins.descriptor_release.attack_common import PublicDatabaseConfig, public_database, recovered
from vispriv.plugins.descriptor_release.datasets import SCENARIO, scene_public
from vispriv.plugins.descriptor_release.payloads import LiftedFeatures, RawFeatures
from vispriv.plugins.descriptor_release.subspace import nearest_to_subspaces


class NearestAttack(Attack):
    """The public database Z row nearest (point-to-subspace) to each subspace is the estimate."""

    class Config(PublicDatabaseConfig):
        pass

    name = "nearest"
    version = "1.0"
    scenario = SCENARIO
    consumes = (LiftedFeatures,)
    produces = (RawFeatures,)

    def attack(self, release: LiftedFeatures, public: object, ctx: CellContext) -> AttackResult:
        z = public_database(scene_public(public), self.config, ctx.cache)
        sq, rows = nearest_to_subspaces(z, release.offsets, release.bases, 1, device=ctx.device)
        return AttackResult(
            estimate={"descriptors": recovered(release, z[rows[:, 0]])},
            metrics={"mean_subspace_distance": float(sq[:, 0].clip(min=0).mean() ** 0.5 if len(sq) else 0.0)},
            metric_directions={"mean_subspace_distance": False},
        )
