"""Capture what a Flower server sees: a wrapper around any strategy of Flower's Message API.

``CaptureStrategy(strategy, folder, rounds=[1])`` behaves exactly as ``strategy`` (every call
is delegated, the replies are handed on unchanged) and, for the rounds named, writes into
``folder`` (layout: :mod:`vispriv.plugins.federated.flower.format`) the global arrays of
``configure_train``, each reply's arrays, num-examples, metrics and node id as
``aggregate_train`` receives them, and the aggregate it returns. Put it outermost, around
Flower's DP wrappers too: then it holds what the server receives -- with client-side clipping
(``fixedclipping_mod``) the clipped updates; with server-side clipping the raw updates, which
the server clips and noises only after it has them (Flower docs, "Differential Privacy":
https://flower.ai/docs/framework/explanation-differential-privacy.html).

A client mod (Flower's ``LocalDpMod``, ``fixedclipping_mod`` without its server wrapper, ...) leaves
no trace in the strategy chain: the server cannot see or verify what the clients ran. An app that
runs one declares it with ``client_protocol`` (name and settings, e.g. ``("local-dp", {"epsilon": 1,
...})``); the manifest then records that protocol with ``protocol_source`` ``"app"`` -- the app's
word, not the server's observation -- instead of ``"server"``.

Strategies follow ``flwr.serverapp.strategy.Strategy`` (flwr >= 1.21: ``configure_train``,
``aggregate_train``, ``configure_evaluate``, ``aggregate_evaluate``, ``summary``; ``start``
runs the rounds and calls them, so the wrapper's ``start`` is the base class's).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import flwr
import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from vispriv.plugins.federated.flower.format import (
    CapturedRoundEntry,
    Manifest,
    Reply,
    plain_dict,
    write_arrays,
)

#: Flower's DP strategy wrappers by class name -> the protocol name the manifest uses.
DP_WRAPPERS = {
    "DifferentialPrivacyClientSideFixedClipping": "client-dp-fixed-clipping",
    "DifferentialPrivacyClientSideAdaptiveClipping": "client-dp-adaptive-clipping",
    "DifferentialPrivacyServerSideFixedClipping": "server-dp-fixed-clipping",
    "DifferentialPrivacyServerSideAdaptiveClipping": "server-dp-adaptive-clipping",
}
#: protocols only the app can declare (client mods; the server sees no wrapper)
CLIENT_PROTOCOLS = ("local-dp",)
DP_SETTINGS = ("noise_multiplier", "clipping_norm", "initial_clipping_norm", "num_sampled_clients",
               "target_clipped_quantile", "clip_norm_lr", "clipped_count_stddev")


def detect_protocol(strategy: Any) -> tuple[str, dict[str, Any]]:
    """The protocol of a strategy chain (outermost DP wrapper wins) and its DP settings."""
    current = strategy
    while current is not None:
        name = type(current).__name__
        if name in DP_WRAPPERS:
            settings = {k: float(getattr(current, k)) for k in DP_SETTINGS if getattr(current, k, None) is not None}
            return DP_WRAPPERS[name], settings
        current = getattr(current, "strategy", None)
    return "plaintext", {}


def _arrays_of(record: ArrayRecord) -> tuple[list[str], list[np.ndarray]]:
    return list(record.keys()), record.to_numpy_ndarrays()


def _num_examples(msg: Message, key: str) -> int:
    for metrics in msg.content.metric_records.values():
        if key in metrics:
            return int(metrics[key])
    return 0


class CaptureStrategy(Strategy):
    """Delegates to ``strategy`` and records what the server saw in the rounds named (all if None).

    ``run_config`` is the app's configuration the attack needs (``local-epochs``, ``lr``,
    ``batch-size``; the ServerApp's ``context.run_config`` is a good start); ``weighted_by_key``
    the reply metric holding num-examples (FedAvg's default); ``client_protocol`` the privacy
    protocol the app's clients run as (name, settings), which the server cannot detect (only
    ``local-dp``, over a strategy chain without Flower's DP wrappers).
    """

    def __init__(
        self,
        strategy: Strategy,
        folder: str | Path,
        rounds: Sequence[int] | None = None,
        run_config: dict[str, Any] | None = None,
        weighted_by_key: str = "num-examples",
        client_protocol: tuple[str, dict[str, Any]] | None = None,
    ) -> None:
        self.strategy = strategy
        self.folder = Path(folder)
        self.rounds = None if rounds is None else {int(r) for r in rounds}
        self.weighted_by_key = weighted_by_key
        protocol, settings = detect_protocol(strategy)
        source = "server"
        if client_protocol is not None:
            if client_protocol[0] not in CLIENT_PROTOCOLS or protocol != "plaintext":
                raise ValueError(f"client_protocol {client_protocol[0]!r} over a {protocol!r} strategy: "
                                 f"only {', '.join(CLIENT_PROTOCOLS)} over a strategy without Flower's DP wrappers")
            protocol, settings, source = client_protocol[0], plain_dict(client_protocol[1]), "app"
        self.manifest = Manifest(
            protocol=protocol,
            protocol_settings=settings,
            protocol_source=source,
            strategy=repr(strategy),
            flwr_version=flwr.__version__,
            run_config=plain_dict(run_config or {}),
            array_names=[],
            rounds={},
        )

    def _captures(self, server_round: int) -> bool:
        return self.rounds is None or server_round in self.rounds

    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        messages = list(self.strategy.configure_train(server_round, arrays, config, grid))
        if self._captures(server_round):
            names, values = _arrays_of(arrays)
            self.manifest.array_names = names
            rel = f"round-{server_round}/global.npz"
            digest = write_arrays(self.folder / rel, names, values)
            self.manifest.rounds[server_round] = CapturedRoundEntry(
                round=server_round, global_file=rel, global_sha256=digest,
                train_config=plain_dict(config), replies=[],
            )
        return messages

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        replies = list(replies)
        entry = self.manifest.rounds.get(server_round) if self._captures(server_round) else None
        if entry is not None:
            for msg in replies:
                if msg.has_error() or not msg.content.array_records:
                    continue
                record = next(iter(msg.content.array_records.values()))
                names, values = _arrays_of(record)
                node = int(msg.metadata.src_node_id)
                rel = f"round-{server_round}/reply-{node}.npz"
                metrics = {k: float(v) for m in msg.content.metric_records.values() for k, v in m.items()
                           if isinstance(v, (int, float))}
                entry.replies.append(Reply(node, _num_examples(msg, self.weighted_by_key), rel,
                                           write_arrays(self.folder / rel, names, values), metrics))
        aggregated, metrics = self.strategy.aggregate_train(server_round, replies)
        if entry is not None:
            if aggregated is not None:
                entry.aggregate_file = f"round-{server_round}/aggregate.npz"
                entry.aggregate_sha256 = write_arrays(self.folder / entry.aggregate_file, *_arrays_of(aggregated))
            self.manifest.write(self.folder)
        return aggregated, metrics

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        return self.strategy.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        return self.strategy.aggregate_evaluate(server_round, replies)

    def summary(self) -> None:
        self.strategy.summary()

    def __getattr__(self, name: str) -> Any:
        """Anything else (``privacy_spent()`` of a DP wrapper, ...) is the wrapped strategy's."""
        if name == "strategy":
            raise AttributeError(name)
        return getattr(self.strategy, name)

    def __repr__(self) -> str:
        return f"CaptureStrategy({self.strategy!r}, folder={str(self.folder)!r})"
