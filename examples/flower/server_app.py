"""The example's ``ServerApp``: FedAvg, optionally under one of Flower's DP wrappers, captured for vispriv.

The server evaluates the global model on held-out digits after every round with Flower's
centralized evaluation (``Strategy.start(evaluate_fn=...)``; Flower docs, "Evaluate your
federated system", https://flower.ai/docs/framework/explanation-federated-evaluation.html)
and writes what Flower reports to ``out/evaluation.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import (
    DifferentialPrivacyClientSideFixedClipping,
    DifferentialPrivacyServerSideAdaptiveClipping,
    DifferentialPrivacyServerSideFixedClipping,
    FedAvg,
    Strategy,
)

from vispriv.examples.flower.task import AppSettings, evaluate, load_test, make_net
from vispriv.plugins.federated.flower.capture import CaptureStrategy


def make_strategy(settings: AppSettings) -> Strategy:
    """FedAvg over every client, wrapped as ``settings.privacy`` says, then in the capture (outermost).

    ``local-dp`` leaves the server plain FedAvg (the noise is the clients' ``LocalDpMod``)."""
    n = settings.num_clients
    strategy: Strategy = FedAvg(fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=n, min_available_nodes=n)
    if settings.privacy == "client-dp-fixed-clipping":
        strategy = DifferentialPrivacyClientSideFixedClipping(strategy, settings.noise_multiplier,
                                                              settings.clipping_norm, n)
    elif settings.privacy == "server-dp-fixed-clipping":
        strategy = DifferentialPrivacyServerSideFixedClipping(strategy, settings.noise_multiplier,
                                                              settings.clipping_norm, n)
    elif settings.privacy == "server-dp-adaptive-clipping":
        # Andrew et al., "Differentially Private Learning with Adaptive Clipping" (NeurIPS 2021): the
        # norm starts at clipping_norm and follows the clipped quantile, on the server. The count's
        # noise std must exceed noise_multiplier / 2 (Flower's default n / 20 does not for a few
        # clients): the example takes max(n / 20, noise_multiplier).
        strategy = DifferentialPrivacyServerSideAdaptiveClipping(
            strategy, settings.noise_multiplier, n, initial_clipping_norm=settings.clipping_norm,
            clipped_count_stddev=max(n / 20, settings.noise_multiplier))
    elif settings.privacy not in ("plaintext", "local-dp"):
        raise ValueError(f"unknown privacy setting {settings.privacy!r}")
    if settings.capture:
        # local DP is a client mod, invisible to the server: the app declares it to the capture
        declared = ("local-dp", settings.local_dp()) if settings.privacy == "local-dp" else None
        strategy = CaptureStrategy(strategy, settings.capture, settings.capture_rounds or None, settings.run_config(),
                                   client_protocol=declared)
    return strategy


def write_evaluation(out: str, by_round: dict[int, dict[str, float]]) -> None:
    """Flower's centralized evaluation, round -> {"loss", "accuracy"} (round 0: the initial model)."""
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / "evaluation.json").write_text(json.dumps({str(r): m for r, m in sorted(by_round.items())}, indent=1))


def make_server_app(settings: AppSettings) -> ServerApp:
    """The ServerApp for ``settings``; it writes the final global model to ``out/final-model.npz`` and
    Flower's centralized evaluation of each round to ``out/evaluation.json``."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        if settings.noise_seed >= 0:
            np.random.seed(settings.noise_seed)
        net = make_net(settings.seed)
        test_x, test_y = load_test(settings.test_images)

        def evaluate_fn(server_round: int, arrays: ArrayRecord) -> MetricRecord:
            model = make_net(settings.seed)
            model.load_state_dict(arrays.to_torch_state_dict())
            loss, accuracy = evaluate(model, test_x, test_y)
            return MetricRecord({"loss": loss, "accuracy": accuracy})

        result = make_strategy(settings).start(
            grid=grid,
            initial_arrays=ArrayRecord(net.state_dict()),
            num_rounds=settings.rounds,
            train_config=ConfigRecord({"lr": settings.lr}),
            evaluate_fn=evaluate_fn,
        )
        if settings.out:
            Path(settings.out).mkdir(parents=True, exist_ok=True)
            arrays = result.arrays
            np.savez(Path(settings.out) / "final-model.npz", allow_pickle=False,
                     **dict(zip(arrays.keys(), arrays.to_numpy_ndarrays())))
            write_evaluation(settings.out, {r: {k: float(v) for k, v in m.items()}
                                            for r, m in result.evaluate_metrics_serverapp.items()})

    return app
