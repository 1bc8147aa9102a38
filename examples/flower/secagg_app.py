"""The example app under SecAgg+ (Flower 1.42 runs SecAgg+ in its legacy API: a ``NumPyClient`` with
``secaggplus_mod``, and ``DefaultWorkflow(fit_workflow=SecAggPlusWorkflow(...))`` on the server,
as in Flower's secaggplus-mt example). Same model, data, local training and centralized
evaluation (``FedAvg(evaluate_fn=...)``, reported in ``History.metrics_centralized``) as the
Message-API app.

Privacy ``secaggplus-client-dp-fixed-clipping`` adds Flower's central DP with client-side
clipping under the secure aggregation: the legacy ``DifferentialPrivacyClientSideFixedClipping``
wrapper sends the clipping norm in the fit config and noises the unmasked aggregate, and the
clients run ``mods=[secaggplus_mod, fixedclipping_mod]``, so each update is clipped before
SecAgg+ masks it (a mod listed later sits closer to the app: it sees the reply first; Flower
docs, "Differential Privacy", https://flower.ai/docs/framework/how-to-use-differential-privacy.html).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from flwr.client import ClientApp, NumPyClient
from flwr.client.mod import fixedclipping_mod, secaggplus_mod
from flwr.common import Context, ndarrays_to_parameters
from flwr.server import LegacyContext, ServerApp, ServerConfig
from flwr.server.strategy import DifferentialPrivacyClientSideFixedClipping, FedAvg, Strategy
from flwr.server.workflow import DefaultWorkflow, SecAggPlusWorkflow

from vispriv.examples.flower.server_app import write_evaluation
from vispriv.examples.flower.task import AppSettings, evaluate, load_partition, load_test, make_net, round_batch, train
from vispriv.plugins.federated.flower.capture_legacy import LegacyCaptureStrategy
from vispriv.plugins.federated.flower.format import save_truth


class DigitsClient(NumPyClient):
    """One client: trains on its round batch, replies with its weights."""

    def __init__(self, settings: AppSettings, context: Context) -> None:
        self.settings = settings
        self.context = context

    def fit(self, parameters: list[np.ndarray], config: dict) -> tuple[list[np.ndarray], int, dict]:
        net = make_net()
        net.load_state_dict({k: torch.from_numpy(v) for k, v in zip(net.state_dict(), parameters)})
        node = self.context.node_config
        images, labels = load_partition(int(node["partition-id"]), int(node["num-partitions"]),
                                        self.settings.images_per_client)
        server_round = int(config["server-round"])
        x, y = round_batch(images, labels, server_round, self.settings.batch_size)
        if self.settings.capture and self.settings.save_truth:
            save_truth(self.settings.capture, server_round, self.context.node_id, x.numpy(), y.numpy())
        loss = train(net, x, y, self.settings.local_epochs, float(config["lr"]), self.settings.batch_size)
        return [v.numpy() for v in net.state_dict().values()], len(y), {"train_loss": loss}


CLIENT_DP = "secaggplus-client-dp-fixed-clipping"


def make_secagg_client_app(settings: AppSettings) -> ClientApp:
    """SecAgg+ on the clients; with client-side DP, fixed clipping inside it (clipped, then masked)."""
    mods = [secaggplus_mod, fixedclipping_mod] if settings.privacy == CLIENT_DP else [secaggplus_mod]
    return ClientApp(client_fn=lambda context: DigitsClient(settings, context).to_client(), mods=mods)


def make_secagg_server_app(settings: AppSettings) -> ServerApp:
    """FedAvg under SecAgg+ (every client holds a share; all are needed), optionally with client-side DP,
    captured; final model and Flower's centralized evaluation to out/."""
    app = ServerApp()

    @app.main()
    def main(grid, context: Context) -> None:
        if settings.noise_seed >= 0:
            np.random.seed(settings.noise_seed)
        net = make_net(settings.seed)
        n = settings.num_clients
        test_x, test_y = load_test(settings.test_images)

        def evaluate_fn(server_round: int, parameters: list[np.ndarray], config: dict) -> tuple[float, dict]:
            model = make_net(settings.seed)
            model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in zip(model.state_dict(), parameters)})
            loss, accuracy = evaluate(model, test_x, test_y)
            return loss, {"accuracy": accuracy}

        strategy: Strategy = FedAvg(
            fraction_fit=1.0, fraction_evaluate=0.0, min_fit_clients=n, min_available_clients=n,
            initial_parameters=ndarrays_to_parameters([v.numpy() for v in net.state_dict().values()]),
            on_fit_config_fn=lambda r: {"server-round": r, "lr": settings.lr}, evaluate_fn=evaluate_fn)
        if settings.privacy == CLIENT_DP:
            strategy = DifferentialPrivacyClientSideFixedClipping(strategy, settings.noise_multiplier,
                                                                  settings.clipping_norm, n)
        elif settings.privacy != "secaggplus":
            raise ValueError(f"unknown SecAgg+ privacy setting {settings.privacy!r}")
        workflow = SecAggPlusWorkflow(num_shares=1.0, reconstruction_threshold=1.0)
        if settings.capture:
            strategy = LegacyCaptureStrategy(strategy, settings.capture, list(net.state_dict()),
                                             settings.capture_rounds or None, settings.run_config(),
                                             {"clipping_range": workflow.clipping_range,
                                              "quantization_range": workflow.quantization_range})
        legacy = LegacyContext(context=context, config=ServerConfig(num_rounds=settings.rounds), strategy=strategy)
        DefaultWorkflow(fit_workflow=workflow)(grid, legacy)
        if settings.out:
            Path(settings.out).mkdir(parents=True, exist_ok=True)
            final = legacy.state.array_records["parameters"]
            np.savez(Path(settings.out) / "final-model.npz", allow_pickle=False,
                     **dict(zip(net.state_dict(), final.to_numpy_ndarrays())))
            by_round: dict[int, dict[str, float]] = {}
            for server_round, loss in legacy.history.losses_centralized:
                by_round.setdefault(int(server_round), {})["loss"] = float(loss)
            for key, values in legacy.history.metrics_centralized.items():
                for server_round, value in values:
                    by_round.setdefault(int(server_round), {})[key] = float(value)
            write_evaluation(settings.out, by_round)

    return app
