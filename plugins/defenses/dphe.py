"""DPHE: doubly permuted homomorphic encryption of sparse updates (DPHE (ICCV 2017) Algorithm 1).

The release is what the aggregator holds: every message's ciphertexts zeta(v) and
doubly permuted indices Phi(K), the public key n, and the published averages. Never the
private key, phi or any phi^(n) (those stay inside the role objects of
:mod:`vispriv.plugins.federated.protocol.roles`).

On a deep task the same Algorithm 1 encrypts the users' flat model updates (DPHE's
protection does not depend on the model: it encrypts any update vector, sharded into
messages of M values). The aggregator then learns only the published average of the N users'
updates (:class:`DeepPublishedAverage`), a mixture of N x B images; an insider user also knows
its own update and subtracts it (exact for N = 2, why section 2.5 demands N >= 3). Paillier
runs on the attacked round, the one the release holds; the rounds after it that only measure
test accuracy average in plaintext, because the secure sum equals the plaintext mean up to
the 2^-32 fixed-point encoding (``secure_sum_max_abs_error`` measures it on the attacked round).

On clustering data (``ClusteringData``) every user's sparse centroids (K x D values) go through
Algorithm 1 every round, as the classifiers do (DPHE supplement A.3, Table 6); the release
and the costs, slot-origin candidates included, are the classifiers'.

Each input takes only the settings it uses (``configs``): the classifiers' local training and
the clustering's k-means (:mod:`vispriv.plugins.federated.config`), ``permutations`` where
Algorithm 1 runs every round (not on a deep task's single averaging), ``observer`` where the
release carries an insider's own update (not on clustering).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from vispriv.harness import CellContext, Defense, PluginConfig, Protected
from vispriv.harness.errors import InputError
from vispriv.plugins.federated.clustering.payloads import ClusteringData, EncryptedCentroidUpdates
from vispriv.plugins.federated.clustering.rounds import run_federated_kmeans
from vispriv.plugins.federated.config import ClusteringConfig, FederatedConfig, LinearTrainingConfig, RoundsConfig
from vispriv.plugins.federated.deep.outcome import deep_protected, deep_protocol
from vispriv.plugins.federated.deep.payloads import (
    DeepFederatedData,
    DeepPublishedAverage,
    batch_truth_ids,
    require_deep_public,
)
from vispriv.plugins.federated.linear.slot_leak import expected_origin_candidates
from vispriv.plugins.federated.outcome import (
    accuracy_curve,
    base_utility,
    clustering_utility,
    target_ids,
    target_truth,
)
from vispriv.plugins.federated.payloads import EncryptedUpdates, FederatedData, require_public
from vispriv.plugins.federated.protocol import paillier as pl
from vispriv.plugins.federated.protocol.rounds import DpheSettings, FederatedRun, run_federated, secure_mean


class DpheKeys(PluginConfig):
    """Key size (1024 bits as in the paper's timing, >= 2048 for real deployments),
    capacity M = ceil(capacity_fraction * D * NC) (section 3.1: 0.1): what every input uses."""

    key_bits: int = Field(1024, ge=pl.MIN_KEY_BITS, le=8192)
    capacity_fraction: float = Field(0.1, gt=0, le=1)
    workers: int | None = Field(None, ge=1, description="processes for the offline obfuscator pool (default: all cores)")
    force: bool = Field(False, description="run with N < 3 users although section 2.5 says it is insecure")

    def settings(self) -> DpheSettings:
        """Algorithm 1's knobs; one averaging (a deep task's attacked round) always has fresh permutations."""
        return DpheSettings(self.key_bits, self.capacity_fraction, self.workers, True)


class DphePermutations(DpheKeys):
    """Algorithm 1 run every round (classifiers, clustering): fresh permutations per round or one set."""

    permutations: Literal["per-round", "fixed"] = Field(
        "per-round",
        description="per-round: G issues fresh phi, phi^(n) every round (Algorithm 1 is one averaging); "
        "fixed: one set for the whole run (lets the aggregator narrow slot origins, docs/federated.md)",
    )

    def settings(self) -> DpheSettings:
        return DpheSettings(self.key_bits, self.capacity_fraction, self.workers, self.permutations == "per-round")


class DpheInsider(PluginConfig):
    """An insider user as the adversary (classifier and deep releases carry its own update)."""

    observer: int | None = Field(None, ge=0, description="the adversary is this user (insider) instead of the aggregator")


class DpheClassifierConfig(DphePermutations, DpheInsider, LinearTrainingConfig):
    """dphe on linear classifiers (``FederatedData``): local training, keys, permutations, insider."""


class DpheClusteringConfig(DphePermutations, ClusteringConfig):
    """dphe on clustering (``ClusteringData``): local mini-batch k-means, keys, permutations (no insider view)."""


class DpheDeepConfig(DpheKeys, DpheInsider, RoundsConfig):
    """dphe on a deep task (``DeepFederatedData``): Algorithm 1 runs once (the attacked round), so no permutations setting."""


class DpheConfig(DphePermutations, DpheInsider, FederatedConfig):
    """Every setting of every input (a script that calls ``protect`` itself); the matrix uses the per-input configs."""


class Dphe(Defense):
    """Users Paillier-encrypt only the non-zeros of their sparse updates; indices are doubly permuted."""

    name = "dphe"
    version = "1.0"
    scenario = "federated-learning"
    headline = ("test_accuracy", "ami")
    Config = DpheConfig
    consumes = (FederatedData, DeepFederatedData, ClusteringData)
    produces = (EncryptedUpdates, DeepPublishedAverage, EncryptedCentroidUpdates)
    configs = {
        FederatedData: DpheClassifierConfig,
        DeepFederatedData: DpheDeepConfig,
        ClusteringData: DpheClusteringConfig,
    }
    releases = {
        FederatedData: (EncryptedUpdates,),
        DeepFederatedData: (DeepPublishedAverage,),
        ClusteringData: (EncryptedCentroidUpdates,),
    }

    def protect(self, private: FederatedData | DeepFederatedData | ClusteringData, public: object,
                ctx: CellContext) -> Protected:
        cfg = self.config
        n_users = private.n_users
        if n_users < 3 and not cfg.force:
            raise InputError(
                f"dphe needs N >= 3 users, got N = {n_users}: with two users each recovers the other's update "
                "as 2 w̄ - w^(own) from the published average (DPHE, ICCV 2017, section 2.5); set force: true to run anyway"
            )
        if isinstance(cfg, DpheInsider) and cfg.observer is not None and cfg.observer >= n_users:
            raise InputError(f"observer must be a user in [0, {n_users}); got {cfg.observer}")
        settings = cfg.settings()
        if isinstance(private, DeepFederatedData):
            return self._protect_deep(private, public, settings, ctx)
        if isinstance(private, ClusteringData):
            return self._protect_clustering(private.data, public, settings, ctx)
        public = require_public(public)
        run = run_federated(private, public, cfg.training(), cfg.rounds, ctx, dphe=settings)

        msgs = [m for round_msgs in run.messages for m in round_msgs]
        rounds = [t for t, round_msgs in enumerate(run.messages) for _ in round_msgs]
        release = EncryptedUpdates(
            averages=run.averages,
            protocol={**cfg.protocol(n_users), "capacity": run.capacity, "key_bits": cfg.key_bits},
            target_ids=target_ids(cfg.rounds, n_users),
            ciphertexts=np.stack([pl.to_bytes(m.ciphertexts, run.ciphertext_width) for m in msgs]),
            permuted_indices=np.stack([m.permuted_indices for m in msgs]),
            message_round=np.asarray(rounds, np.int64),
            message_user=np.asarray([m.user for m in msgs], np.int64),
            modulus_hex=format(run.modulus, "x"),
            observer=cfg.observer,
            own_updates=run.updates[:, cfg.observer] if cfg.observer is not None else np.zeros((0, 0, 0)),
        )
        accuracy_curve(run, ctx)
        utility, directions = base_utility(run, private)
        costs, cost_directions = dphe_costs(run, n_users, cfg.rounds)
        utility.update(costs)
        directions.update(cost_directions)
        return Protected(release, target_truth(private, run), utility, directions)

    def _protect_clustering(self, private: FederatedData, public: object, settings: DpheSettings,
                            ctx: CellContext) -> Protected:
        """Federated mini-batch k-means with every user's centroids sent through Algorithm 1."""
        cfg: DpheClusteringConfig | DpheConfig = self.config
        if isinstance(cfg, DpheInsider) and cfg.observer is not None:
            raise InputError("observer (an insider user's view) applies to classifier releases, not to clustering")
        run = run_federated_kmeans(private, require_public(public), cfg.kmeans(), cfg.rounds, ctx, dphe=settings)
        msgs = [m for round_msgs in run.messages for m in round_msgs]
        release = EncryptedCentroidUpdates(
            centroids=run.averages,
            protocol={**cfg.clustering_protocol(private.n_users), "capacity": run.capacity, "key_bits": cfg.key_bits},
            target_ids=target_ids(cfg.rounds, private.n_users),
            ciphertexts=np.stack([pl.to_bytes(m.ciphertexts, run.ciphertext_width) for m in msgs]),
            permuted_indices=np.stack([m.permuted_indices for m in msgs]),
            message_round=np.asarray([t for t, round_msgs in enumerate(run.messages) for _ in round_msgs], np.int64),
            message_user=np.asarray([m.user for m in msgs], np.int64),
            modulus_hex=format(run.modulus, "x"),
        )
        accuracy_curve(run, ctx, score="ami")
        utility, directions = clustering_utility(run)
        costs, cost_directions = dphe_costs(run, private.n_users, cfg.rounds)
        utility.update(costs)
        directions.update(cost_directions)
        return Protected(release, target_truth(private, run), utility, directions)

    def _protect_deep(self, private: DeepFederatedData, public: object, settings: DpheSettings,
                      ctx: CellContext) -> Protected:
        """Algorithm 1 on the deep updates of the attacked round; see the module docstring."""
        from vispriv.plugins.federated.deep.rounds import run_deep_rounds

        cfg: DpheDeepConfig | DpheConfig = self.config
        deep_public = require_deep_public(public)
        stats: dict[str, float] = {}

        def aggregate(updates: np.ndarray) -> np.ndarray:
            if stats:  # the rounds after the attacked one (module docstring)
                return updates.mean(axis=0)
            secure, measured = secure_mean(updates, settings)
            stats.update(measured)
            return secure

        run = run_deep_rounds(private, deep_public, cfg.rounds, ctx, aggregate=aggregate)
        release = DeepPublishedAverage(
            protocol=deep_protocol(private, deep_public, key_bits=cfg.key_bits),
            target_ids=batch_truth_ids(private),
            average=run.average,
            observer=cfg.observer,
            own_update=run.sent[cfg.observer] if cfg.observer is not None else np.zeros(0, np.float32),
        )
        directions = dict.fromkeys(stats, False)
        return deep_protected(private, run, release, ctx, dict(stats), directions)


def dphe_costs(run: FederatedRun, n_users: int, rounds: int) -> tuple[dict[str, float], dict[str, bool]]:
    """Per user and round: encryption and obfuscator seconds, values encrypted; the secure sum's
    largest error; and A's expected candidates for a slot's plain origin (slot_leak.py)."""
    per_user_round = n_users * rounds
    costs = {
        "encryption_seconds_per_user_round": run.encryption_seconds / per_user_round,
        "offline_seconds_per_user_round": run.offline_seconds / per_user_round,
        "values_encrypted_per_user_round": run.values_encrypted / per_user_round,
        "secure_sum_max_abs_error": run.secure_max_abs_error,
        # A's candidate count for a slot's plain origin (slot_leak.py), D = no leak: its
        # expectation over the users' CSPRNG padding, so a function of config + seed.
        "slot_origin_candidates": float(
            expected_origin_candidates(
                run.updates.reshape(rounds, n_users, -1),
                run.averages[1:].reshape(rounds, -1) == 0.0,
                run.permutation_groups,
                run.capacity,
            ).mean()
        ),
    }
    directions = dict.fromkeys(costs, False)
    directions["slot_origin_candidates"] = True
    return costs, directions
