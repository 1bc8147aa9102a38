"""Plain federated averaging (DPHE (ICCV 2017) section 2.1): the aggregator sees every update.

On a linear task (``FederatedData``) the updates are the one-vs-rest classifiers of the DPHE
paper; on a deep task (``DeepFederatedData``) they are FedSGD gradients or FedAvg weight
differences of the deep model (McMahan et al., AISTATS 2017), and ``rounds`` rounds measure
the test accuracy. On clustering data (``ClusteringData``) the users run federated mini-batch
k-means and send their centroids in plaintext: the baseline of DPHE's Table 6 (supplement A.3).
Each input takes only the settings it uses (``configs``, :mod:`vispriv.plugins.federated.config`):
the classifiers' local training, the clustering's k-means, ``rounds`` alone on a deep task or a
capture.
"""

from __future__ import annotations

from vispriv.harness import CellContext, Defense, Protected
from vispriv.plugins.federated.clustering.payloads import ClusteringData, PlainCentroidUpdates
from vispriv.plugins.federated.clustering.rounds import run_federated_kmeans
from vispriv.plugins.federated.config import ClusteringConfig, FederatedConfig, LinearTrainingConfig, RoundsConfig
from vispriv.plugins.federated.deep.outcome import captured_protected, deep_plaintext_protected
from vispriv.plugins.federated.deep.payloads import (
    CapturedUpdate,
    DeepFederatedData,
    DeepPlaintextUpdates,
    DeepPublishedAverage,
    require_deep_public,
)
from vispriv.plugins.federated.flower.outcome import captured_round_protected
from vispriv.plugins.federated.flower.payloads import CapturedRound
from vispriv.plugins.federated.outcome import (
    accuracy_curve,
    base_utility,
    clustering_utility,
    target_ids,
    target_truth,
)
from vispriv.plugins.federated.payloads import FederatedData, FederatedPublic, PlaintextUpdates, require_public
from vispriv.plugins.federated.protocol.rounds import run_federated


class PlainFedAvg(Defense):
    """No protection: users send their updates in plaintext (linear classifiers, deep-model updates or centroids)."""

    name = "none"
    version = "1.0"
    scenario = "federated-learning"
    headline = ("test_accuracy", "ami")
    Config = FederatedConfig
    consumes = (FederatedData, DeepFederatedData, CapturedUpdate, CapturedRound, ClusteringData)
    produces = (PlaintextUpdates, DeepPlaintextUpdates, DeepPublishedAverage, PlainCentroidUpdates)
    configs = {
        FederatedData: LinearTrainingConfig,
        ClusteringData: ClusteringConfig,
        DeepFederatedData: RoundsConfig,
        CapturedUpdate: RoundsConfig,
        CapturedRound: RoundsConfig,
    }
    releases = {
        FederatedData: (PlaintextUpdates,),
        ClusteringData: (PlainCentroidUpdates,),
        DeepFederatedData: (DeepPlaintextUpdates,),
        CapturedUpdate: (DeepPlaintextUpdates,),
        # a Flower capture: every reply as sent, or (SecAgg+) only the unmasked average
        CapturedRound: (DeepPlaintextUpdates, DeepPublishedAverage),
    }

    def protect(self, private: FederatedData | DeepFederatedData | CapturedUpdate | CapturedRound | ClusteringData,
                public: object, ctx: CellContext) -> Protected:
        cfg = self.config
        if isinstance(private, ClusteringData):
            return self._protect_clustering(private.data, require_public(public), ctx)
        if isinstance(private, CapturedUpdate):
            return captured_protected(private, require_deep_public(public))
        if isinstance(private, CapturedRound):
            return captured_round_protected(private, require_deep_public(public))
        if isinstance(private, DeepFederatedData):
            return deep_plaintext_protected(private, public, cfg.rounds, ctx)
        linear_public: FederatedPublic = require_public(public)
        run = run_federated(private, linear_public, cfg.training(), cfg.rounds, ctx)
        release = PlaintextUpdates(
            averages=run.averages,
            protocol=cfg.protocol(private.n_users),
            target_ids=target_ids(cfg.rounds, private.n_users),
            updates=run.updates,
        )
        accuracy_curve(run, ctx)
        utility, directions = base_utility(run, private)
        return Protected(release, target_truth(private, run), utility, directions)

    def _protect_clustering(self, private: FederatedData, public: FederatedPublic, ctx: CellContext) -> Protected:
        """Plain federated mini-batch k-means: the aggregator sees every user's centroids."""
        cfg = self.config
        run = run_federated_kmeans(private, public, cfg.kmeans(), cfg.rounds, ctx)
        release = PlainCentroidUpdates(
            centroids=run.averages,
            protocol=cfg.clustering_protocol(private.n_users),
            target_ids=target_ids(cfg.rounds, private.n_users),
            updates=run.updates,
        )
        accuracy_curve(run, ctx, score="ami")
        utility, directions = clustering_utility(run)
        return Protected(release, target_truth(private, run), utility, directions)
