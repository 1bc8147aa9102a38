"""Capture under SecAgg+: a wrapper around a strategy of Flower's legacy (``flwr.server.strategy``) API.

Flower 1.42 runs SecAgg+ as a workflow of the legacy API (``DefaultWorkflow(fit_workflow=
SecAggPlusWorkflow(...))`` with ``secaggplus_mod`` on the clients; Flower docs, "Secure
Aggregation Protocols": https://flower.ai/docs/framework/contributor-ref-secure-aggregation-protocols.html).
The workflow unmasks only the clients' weighted sum and hands ``Strategy.aggregate_fit`` results
whose parameters all equal that aggregate: it is all the server sees of the clients' arrays, and
all :class:`LegacyCaptureStrategy` writes (``aggregate.npz``; the replies list node ids and
num-examples, no arrays). The SecAgg+ protocol itself (Bell et al., CCS 2020) is Flower's.

Around Flower's legacy ``DifferentialPrivacyClientSideFixedClipping`` (the clients clip with
``fixedclipping_mod`` before SecAgg+ masks) the protocol is ``secaggplus-client-dp-fixed-clipping``
and the aggregate written is the unmasked mean of the clipped weights, before the wrapper noises it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import flwr
from flwr.common import FitIns, FitRes, Parameters, parameters_to_ndarrays
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.strategy import Strategy

from vispriv.plugins.federated.flower.format import CapturedRoundEntry, Manifest, Reply, plain_dict, write_arrays


class LegacyCaptureStrategy(Strategy):
    """Delegates to a legacy ``strategy`` and records, for the rounds named, the global arrays sent and
    the aggregate that ``aggregate_fit`` receives (SecAgg+: the unmasked mean, nothing per client).

    ``array_names`` name the arrays in order (legacy ``Parameters`` carry none; pass
    ``list(model.state_dict())``).
    """

    def __init__(
        self,
        strategy: Strategy,
        folder: str | Path,
        array_names: Sequence[str],
        rounds: Sequence[int] | None = None,
        run_config: dict[str, Any] | None = None,
        protocol_settings: dict[str, Any] | None = None,
    ) -> None:
        self.strategy = strategy
        self.folder = Path(folder)
        self.rounds = None if rounds is None else {int(r) for r in rounds}
        protocol, dp_settings = "secaggplus", {}
        if type(strategy).__name__ == "DifferentialPrivacyClientSideFixedClipping":
            protocol = "secaggplus-client-dp-fixed-clipping"
            dp_settings = {k: float(getattr(strategy, k)) for k in ("noise_multiplier", "clipping_norm",
                                                                     "num_sampled_clients")}
        self.manifest = Manifest(
            protocol=protocol,
            protocol_settings=plain_dict({**(protocol_settings or {}), **dp_settings}),
            strategy=repr(strategy),
            flwr_version=flwr.__version__,
            run_config=plain_dict(run_config or {}),
            array_names=list(array_names),
            rounds={},
        )

    def _captures(self, server_round: int) -> bool:
        return self.rounds is None or server_round in self.rounds

    def initialize_parameters(self, client_manager: ClientManager) -> Parameters | None:
        return self.strategy.initialize_parameters(client_manager)

    def configure_fit(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, FitIns]]:
        instructions = self.strategy.configure_fit(server_round, parameters, client_manager)
        if self._captures(server_round):
            rel = f"round-{server_round}/global.npz"
            digest = write_arrays(self.folder / rel, self.manifest.array_names, parameters_to_ndarrays(parameters))
            config = plain_dict(instructions[0][1].config) if instructions else {}
            self.manifest.rounds[server_round] = CapturedRoundEntry(server_round, rel, digest, config, [])
        return instructions

    def aggregate_fit(
        self,
        server_round: int,
        results: list[tuple[ClientProxy, FitRes]],
        failures: list[tuple[ClientProxy, FitRes] | BaseException],
    ) -> tuple[Parameters | None, dict[str, Any]]:
        entry = self.manifest.rounds.get(server_round) if self._captures(server_round) else None
        if entry is not None and results:
            for proxy, res in results:
                entry.replies.append(Reply(int(proxy.node_id), int(res.num_examples), "", "",
                                           {k: float(v) for k, v in res.metrics.items() if isinstance(v, (int, float))}))
            entry.aggregate_file = f"round-{server_round}/aggregate.npz"
            entry.aggregate_sha256 = write_arrays(self.folder / entry.aggregate_file, self.manifest.array_names,
                                                  parameters_to_ndarrays(results[0][1].parameters))
            self.manifest.write(self.folder)
        return self.strategy.aggregate_fit(server_round, results, failures)

    def configure_evaluate(self, server_round: int, parameters: Parameters, client_manager: ClientManager) -> list:
        return self.strategy.configure_evaluate(server_round, parameters, client_manager)

    def aggregate_evaluate(self, server_round: int, results: list, failures: list) -> tuple[float | None, dict]:
        return self.strategy.aggregate_evaluate(server_round, results, failures)

    def evaluate(self, server_round: int, parameters: Parameters) -> tuple[float, dict] | None:
        return self.strategy.evaluate(server_round, parameters)

    def __repr__(self) -> str:
        return f"LegacyCaptureStrategy({self.strategy!r}, folder={str(self.folder)!r})"
