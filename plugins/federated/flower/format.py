"""The capture folder: a versioned on-disk format that loads without pickle.

Layout (``format_version`` 1)::

    manifest.json                       what was captured, by round (below)
    round-<r>/global.npz                the global arrays the server sent in round r
    round-<r>/reply-<node id>.npz       one client's reply arrays as the server received them
    round-<r>/aggregate.npz             the aggregate the strategy computed (SecAgg+: all the server sees)
    truth/round-<r>/node-<node id>.npz  optional: the client's true batch (``images`` (B, C, H, W) in [0, 1], ``labels``)

Every ``.npz`` is written by :func:`numpy.savez` with one entry per array, named as in the
Flower ``ArrayRecord`` (a PyTorch ``state_dict``'s keys), and read with ``allow_pickle=False``.
The manifest holds ``format`` (``"vispriv-flower-capture"``), ``format_version``, the
``protocol`` that produced the capture (``plaintext``, ``client-dp-fixed-clipping``,
``server-dp-fixed-clipping``, ``server-dp-adaptive-clipping``, ``local-dp``, ``secaggplus``,
``secaggplus-client-dp-fixed-clipping``) with its settings and its ``protocol_source``
(``server``: read off the server's strategy wrappers; ``app``: declared by the app for a client
mod the server cannot see, such as Flower's ``LocalDpMod``; absent in older captures: ``server``), the ``run_config`` the app reported (``local-epochs``, ``lr``, ``batch-size``, ...),
the ``array_names`` in order, and per round the train config sent, each reply's node id,
num-examples, metrics and file, with the SHA-256 of every file (a truncated file is caught
before numpy reads it).
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vispriv.harness.errors import InputError

FORMAT = "vispriv-flower-capture"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
PROTOCOLS = (
    "plaintext",
    "client-dp-fixed-clipping",
    "client-dp-adaptive-clipping",
    "server-dp-fixed-clipping",
    "server-dp-adaptive-clipping",
    "local-dp",
    "secaggplus",
    "secaggplus-client-dp-fixed-clipping",
)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_arrays(path: Path, names: list[str], arrays: list[np.ndarray]) -> str:
    """Save ``arrays`` under ``names`` (no pickle) and return the file's SHA-256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        np.savez(fh, allow_pickle=False, **{n: np.ascontiguousarray(a) for n, a in zip(names, arrays)})
    return sha256(path)


def read_arrays(path: Path, digest: str | None = None) -> dict[str, np.ndarray]:
    """The arrays of one ``.npz`` of a capture, checked against its SHA-256; one-line InputError otherwise."""
    if not path.is_file():
        raise InputError(f"capture file {path} is missing")
    if digest is not None and sha256(path) != digest:
        raise InputError(f"capture file {path} is damaged or truncated (its SHA-256 differs from the manifest's)")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise InputError(f"capture file {path} does not load as .npz ({type(exc).__name__})") from None


@dataclass
class Reply:
    """One client's reply to a train message, as the manifest lists it."""

    node_id: int
    num_examples: int
    file: str
    sha256: str
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class CapturedRoundEntry:
    """One captured round: what was sent, what came back, what was aggregated."""

    round: int
    global_file: str
    global_sha256: str
    train_config: dict[str, Any]
    replies: list[Reply]
    aggregate_file: str = ""
    aggregate_sha256: str = ""


@dataclass
class Manifest:
    """The manifest of a capture folder (``manifest.json``)."""

    protocol: str
    protocol_settings: dict[str, Any]
    strategy: str
    flwr_version: str
    run_config: dict[str, Any]
    array_names: list[str]
    rounds: dict[int, CapturedRoundEntry]
    #: "server" (detected from the strategy) or "app" (a client mod the app declared; unverifiable)
    protocol_source: str = "server"
    format: str = FORMAT
    format_version: int = FORMAT_VERSION

    def to_json(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "format_version": self.format_version,
            "protocol": self.protocol,
            "protocol_settings": self.protocol_settings,
            "protocol_source": self.protocol_source,
            "strategy": self.strategy,
            "flwr_version": self.flwr_version,
            "run_config": self.run_config,
            "array_names": self.array_names,
            "rounds": {
                str(r): {
                    "global": e.global_file,
                    "global_sha256": e.global_sha256,
                    "train_config": e.train_config,
                    "replies": [vars(rep) for rep in e.replies],
                    "aggregate": e.aggregate_file,
                    "aggregate_sha256": e.aggregate_sha256,
                }
                for r, e in sorted(self.rounds.items())
            },
        }

    def write(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1, sort_keys=False))
        tmp.replace(folder / MANIFEST)


def _plain(value: Any) -> Any:
    """A JSON-safe copy of a Flower config or metric value (numbers, strings, bools, lists of them)."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


def plain_dict(mapping: Any) -> dict[str, Any]:
    return {str(k): _plain(v) for k, v in dict(mapping).items()}


def read_manifest(folder: str | Path) -> Manifest:
    """The manifest of a capture folder, or one-line InputError naming what is wrong."""
    root = Path(folder).expanduser()
    path = root / MANIFEST
    if not path.is_file():
        raise InputError(f"{root} is not a Flower capture folder: {MANIFEST} is missing")
    try:
        raw = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path} is not valid JSON ({exc.msg if hasattr(exc, 'msg') else type(exc).__name__}); "
                         "the capture was interrupted or the file was cut") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise InputError(f"{path} is not a vispriv Flower capture manifest (format {FORMAT!r} expected)")
    version = raw.get("format_version")
    if version != FORMAT_VERSION:
        raise InputError(f"{path} has format_version {version!r}; this vispriv reads version {FORMAT_VERSION}")
    try:
        rounds = {
            int(r): CapturedRoundEntry(
                round=int(r),
                global_file=e["global"],
                global_sha256=e["global_sha256"],
                train_config=dict(e.get("train_config", {})),
                replies=[Reply(**rep) for rep in e["replies"]],
                aggregate_file=e.get("aggregate", ""),
                aggregate_sha256=e.get("aggregate_sha256", ""),
            )
            for r, e in raw["rounds"].items()
        }
        manifest = Manifest(
            protocol=raw["protocol"],
            protocol_settings=dict(raw.get("protocol_settings", {})),
            protocol_source=str(raw.get("protocol_source", "server")),
            strategy=str(raw.get("strategy", "")),
            flwr_version=str(raw.get("flwr_version", "")),
            run_config=dict(raw.get("run_config", {})),
            array_names=list(raw["array_names"]),
            rounds=rounds,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{path} lacks a field of format version {FORMAT_VERSION} ({type(exc).__name__}: {exc})") from None
    if manifest.protocol not in PROTOCOLS:
        raise InputError(f"{path}: unknown protocol {manifest.protocol!r}; known: {', '.join(PROTOCOLS)}")
    return manifest


def truth_path(folder: str | Path, server_round: int, node_id: int) -> Path:
    """Where a client's true batch of a round is kept (``truth/round-<r>/node-<id>.npz``)."""
    return Path(folder).expanduser() / "truth" / f"round-{server_round}" / f"node-{node_id}.npz"


def save_truth(folder: str | Path, server_round: int, node_id: int, images: np.ndarray, labels: np.ndarray) -> Path:
    """The optional scoring hook a client app calls: its batch of the round, images (B, C, H, W) in [0, 1]."""
    path = truth_path(folder, server_round, node_id)
    write_arrays(path, ["images", "labels"], [np.asarray(images, np.float32), np.asarray(labels, np.int64)])
    return path
