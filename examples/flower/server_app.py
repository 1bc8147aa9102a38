"""The example's ``ServerApp``: FedAvg, optionally under one of Flower's DP wrappers, captured for vispriv."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import (
    DifferentialPrivacyClientSideFixedClipping,
    DifferentialPrivacyServerSideFixedClipping,
    FedAvg,
    Strategy,
)

from vispriv.examples.flower.task import AppSettings, make_net
from vispriv.plugins.federated.flower.capture import CaptureStrategy


def make_strategy(settings: AppSettings) -> Strategy:
    """FedAvg over every client, wrapped as ``settings.privacy`` says, then in the capture (outermost)."""
    n = settings.num_clients
    strategy: Strategy = FedAvg(fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=n, min_available_nodes=n)
    if settings.privacy == "client-dp-fixed-clipping":
        strategy = DifferentialPrivacyClientSideFixedClipping(strategy, settings.noise_multiplier,
                                                              settings.clipping_norm, n)
    elif settings.privacy == "server-dp-fixed-clipping":
        strategy = DifferentialPrivacyServerSideFixedClipping(strategy, settings.noise_multiplier,
                                                              settings.clipping_norm, n)
    elif settings.privacy != "plaintext":
        raise ValueError(f"unknown privacy setting {settings.privacy!r}")
    if settings.capture:
        strategy = CaptureStrategy(strategy, settings.capture, settings.capture_rounds or None, settings.run_config())
    return strategy


def make_server_app(settings: AppSettings) -> ServerApp:
    """The ServerApp for ``settings``; it writes the final global model to ``out/final-model.npz``."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        net = make_net(settings.seed)
        result = make_strategy(settings).start(
            grid=grid,
            initial_arrays=ArrayRecord(net.state_dict()),
            num_rounds=settings.rounds,
            train_config=ConfigRecord({"lr": settings.lr}),
        )
        if settings.out:
            Path(settings.out).mkdir(parents=True, exist_ok=True)
            arrays = result.arrays
            np.savez(Path(settings.out) / "final-model.npz", allow_pickle=False,
                     **dict(zip(arrays.keys(), arrays.to_numpy_ndarrays())))

    return app
