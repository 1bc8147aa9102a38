"""Dataset ``flower-capture``: a captured round of a real Flower federation, for the deep attacks.

It reads a capture folder (:mod:`~vispriv.plugins.federated.flower.format`, written by
:class:`~vispriv.plugins.federated.flower.capture.CaptureStrategy`) with numpy alone and hands
the round's replies, as updates, through the ``none`` defense to ``dlg``, ``idlg``,
``inverting-gradients`` and ``public-mean-image``: every reply as a ``DeepPlaintextUpdates``
release, or, under SecAgg+, the unmasked aggregate as a ``DeepPublishedAverage``. The public
side is the user's model (``model``: ``package.module:function`` or a ``torch.export`` file) at
the round's global arrays.

A Flower client replies with weights w_E; the update is w_E - w (the FedAvg convention of
``local.py``, "Inverting Gradients", Geiping et al., NeurIPS 2020, section 5). When the
client took one step (one local epoch over one batch) the round is FedSGD and the update is
handed on as the gradient (w - w_E) / lr (McMahan et al., AISTATS 2017, section 2), the form
"Deep Leakage from Gradients" (Zhu et al., NeurIPS 2019) matches.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from vispriv.harness import CellContext, Dataset, PluginConfig, Scene
from vispriv.harness.errors import ConfigError, InputError
from vispriv.plugins.federated.deep.payloads import DeepFederatedPublic
from vispriv.plugins.federated.flower.format import (
    CapturedRoundEntry,
    Manifest,
    read_arrays,
    read_manifest,
    truth_path,
)
from vispriv.plugins.federated.flower.payloads import CapturedRound

log = logging.getLogger(__name__)


class FlowerCaptureConfig(PluginConfig):
    capture: str = Field(..., description="the capture folder CaptureStrategy wrote (manifest.json, round-<r>/)")
    round: int = Field(1, ge=1, description="the captured round to attack (Flower counts rounds from 1)")
    model: str = Field(..., description="the app's model: 'package.module:function' building the nn.Module, "
                       "or a torch.export (.pt2) file")
    image_shape: tuple[int, int, int] | None = Field(
        None, description="C, H, W of one input (default: from the kept true images, else the .pt2's example input)"
    )
    local: Literal["auto", "fedsgd", "fedavg"] = Field(
        "auto", description="auto: fedsgd when a client took one step (one epoch over one batch), else fedavg"
    )
    lr: float | None = Field(None, gt=0, description="the clients' learning rate (default: the capture's 'lr')")
    local_epochs: int | None = Field(None, ge=1, description="default: the capture's 'local-epochs' (else 1)")
    batch_size: int | None = Field(None, ge=1, description="the clients' minibatch size (default: the capture's "
                                   "'batch-size', else one batch of all a client's examples)")

    @model_validator(mode="after")
    def _capture_is_readable(self) -> FlowerCaptureConfig:
        """A missing folder, a cut manifest, a missing round, a damaged file or a model that is not
        the app's is one config error line, before any run exists."""
        from vispriv.plugins.federated.flower.model_source import build_module, load_arrays

        try:
            manifest = read_manifest(self.capture)
            entry = _round(manifest, self.round, self.capture)
            root = Path(self.capture).expanduser()
            global_arrays = read_arrays(root / entry.global_file, entry.global_sha256)
            for reply in entry.replies:
                if reply.file:
                    read_arrays(root / reply.file, reply.sha256)
            if entry.aggregate_file:
                read_arrays(root / entry.aggregate_file, entry.aggregate_sha256)
            load_arrays(build_module(self.model), global_arrays, self.model)
        except InputError as exc:
            raise ConfigError(f"flower-capture: {exc}") from None
        return self


def _round(manifest: Manifest, server_round: int, folder: str) -> CapturedRoundEntry:
    if server_round not in manifest.rounds:
        have = ", ".join(map(str, sorted(manifest.rounds))) or "none"
        raise InputError(f"round {server_round} was not captured in {folder} (captured rounds: {have})")
    return manifest.rounds[server_round]


def _setting(name: str, given: Any, entry_config: dict[str, Any], run_config: dict[str, Any], *keys: str) -> Any:
    """A local-work setting: the dataset config's, else the round's train config, else the app's run config."""
    if given is not None:
        return given
    for source in (entry_config, run_config):
        for key in keys:
            if key in source:
                return source[key]
    return None


class FlowerCaptureDataset(Dataset):
    """One captured round of a Flower federation (CaptureStrategy's folder) and the user's model."""

    name = "flower-capture"
    version = "1.0"
    scenario = "federated-learning"
    Config = FlowerCaptureConfig
    produces = (CapturedRound,)

    def provenance(self) -> str:
        return f"Flower capture {self.config.capture}, round {self.config.round}"

    def load(self, ctx: CellContext) -> Scene:
        import torch

        from vispriv.plugins.federated.deep.local import trainable
        from vispriv.plugins.federated.flower.model_source import build_module, export_bytes, load_arrays

        cfg: FlowerCaptureConfig = self.config
        root = Path(cfg.capture).expanduser()
        manifest = read_manifest(root)
        entry = _round(manifest, cfg.round, cfg.capture)
        global_arrays = read_arrays(root / entry.global_file, entry.global_sha256)
        module = build_module(cfg.model)
        load_arrays(module, global_arrays, cfg.model)
        names = list(trainable(module))
        averaged = manifest.protocol.startswith("secaggplus")
        if averaged:
            if not entry.aggregate_file:
                raise InputError(f"round {cfg.round} of {cfg.capture} holds no aggregate (SecAgg+ capture)")
            sent = [read_arrays(root / entry.aggregate_file, entry.aggregate_sha256)]
        else:
            sent = [read_arrays(root / r.file, r.sha256) for r in entry.replies]
        if not sent:
            raise InputError(f"round {cfg.round} of {cfg.capture} holds no reply with arrays")
        counts = {r.num_examples for r in entry.replies}
        if len(counts) != 1 or 0 in counts:
            raise InputError(f"round {cfg.round}: the clients' num-examples differ or are missing ({sorted(counts)}); "
                             "the attacks need one batch size B for every client")
        n_examples = counts.pop()
        work = self._work(manifest, entry.train_config, n_examples)
        deltas = np.stack([
            np.concatenate([(np.asarray(s[k], np.float64) - np.asarray(global_arrays[k], np.float64)).reshape(-1)
                            for k in names])
            for s in sent
        ])
        updates = -deltas / work["lr"] if work["mode"] == "fedsgd" else deltas
        node_ids = [r.node_id for r in entry.replies]
        images, labels = self._truth(root, cfg.round, node_ids, n_examples)
        shape = cfg.image_shape or (tuple(images.shape[i] for i in (3, 1, 2)) if len(images) else None)
        if shape is None and Path(cfg.model).expanduser().is_file():
            from vispriv.plugins.federated.deep.captured import load_exported

            shape = load_exported(cfg.model)[2]
        if shape is None:
            raise InputError("the input shape is unknown (no true images kept, no .pt2 example input): "
                             "set image_shape: [C, H, W]")
        c, h, w = shape
        with torch.no_grad():
            n_classes = int(module(torch.zeros(1, c, h, w)).shape[-1])
        protocol = {"flower_protocol": manifest.protocol, **manifest.protocol_settings, "round": cfg.round}
        public = DeepFederatedPublic(
            arch="exported", width=0, n_classes=n_classes, image_shape=(c, h, w), mean=[], std=[], state={},
            work=work, public_images=np.zeros((0, h, w, c), np.float32), public_labels=np.zeros(0, np.int64),
            exported=export_bytes(module, (c, h, w)),
        )
        private = CapturedRound(updates=updates.astype(np.float32), averaged=averaged, batch_size=n_examples,
                                node_ids=node_ids, protocol=protocol, images=images, labels=labels)
        return Scene(private=private, public=public)

    def _work(self, manifest: Manifest, train_config: dict[str, Any], n_examples: int) -> dict[str, Any]:
        """The clients' local work (``LocalWork``'s fields) from the config, the round's train config, the run config."""
        cfg: FlowerCaptureConfig = self.config
        lr = _setting("lr", cfg.lr, train_config, manifest.run_config, "lr", "learning-rate", "learning_rate")
        if lr is None:
            raise InputError("the clients' learning rate is not in the capture (no 'lr' in its train or run config): "
                             "set lr")
        epochs = int(_setting("local_epochs", cfg.local_epochs, train_config, manifest.run_config,
                              "local-epochs", "local_epochs", "epochs") or 1)
        batch = int(_setting("batch_size", cfg.batch_size, train_config, manifest.run_config,
                             "batch-size", "batch_size") or n_examples)
        per_epoch = math.ceil(n_examples / batch)
        steps = epochs * per_epoch
        mode = cfg.local if cfg.local != "auto" else ("fedsgd" if steps == 1 else "fedavg")
        if mode == "fedavg" and per_epoch > 1:
            log.warning("clients took %d minibatch steps per epoch; the attack unrolls %d full-batch steps on all "
                        "%d images (an approximation of their minibatch path)", per_epoch, steps, n_examples)
        return {"mode": mode, "steps": steps, "lr": float(lr), "batchnorm": "eval"}

    def _truth(self, root: Path, server_round: int, node_ids: list[int], n_examples: int) -> tuple[np.ndarray, np.ndarray]:
        """The clients' kept batches (the example app's scoring hook), in ``node_ids`` order, or empty."""
        paths = [truth_path(root, server_round, n) for n in node_ids]
        if not node_ids or not all(p.is_file() for p in paths):
            if any(p.is_file() for p in paths):
                log.warning("true batches are kept for some clients only: no privacy score can be computed")
            return np.zeros((0, 1, 1, 1), np.float32), np.zeros(0, np.int64)
        images, labels = [], []
        for p in paths:
            arrays = read_arrays(p)
            if arrays["images"].ndim != 4 or len(arrays["images"]) != n_examples:
                raise InputError(f"{p}: images must have shape ({n_examples}, C, H, W); got {arrays['images'].shape}")
            images.append(arrays["images"].transpose(0, 2, 3, 1))
            labels.append(arrays["labels"].reshape(-1))
        return np.concatenate(images).astype(np.float32), np.concatenate(labels).astype(np.int64)
