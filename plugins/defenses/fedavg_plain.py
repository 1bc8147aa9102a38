"""Plain federated averaging (DPHE (ICCV 2017) section 2.1): the aggregator sees every update."""

from __future__ import annotations

from vispriv.harness import CellContext, Defense, Protected
from vispriv.plugins.federated.config import FederatedConfig
from vispriv.plugins.federated.outcome import accuracy_curve, base_utility, target_ids, target_truth
from vispriv.plugins.federated.payloads import FederatedData, FederatedPublic, PlaintextUpdates, require_public
from vispriv.plugins.federated.protocol import run_federated


class PlainFedAvg(Defense):
    """No protection: users send w_t^(n) in plaintext; the release is every update and every average."""

    name = "none"
    version = "1.0"
    scenario = "federated-learning"
    Config = FederatedConfig
    consumes = (FederatedData,)
    produces = (PlaintextUpdates,)

    def protect(self, private: FederatedData, public: FederatedPublic | None, ctx: CellContext) -> Protected:
        public = require_public(public)
        cfg = self.config
        run = run_federated(private, public, cfg.training(), cfg.rounds, ctx)
        release = PlaintextUpdates(
            averages=run.averages,
            protocol=cfg.protocol(private.n_users),
            target_ids=target_ids(cfg.rounds, private.n_users),
            updates=run.updates,
        )
        accuracy_curve(run, ctx)
        utility, directions = base_utility(run)
        return Protected(release, target_truth(private, run), utility, directions)
