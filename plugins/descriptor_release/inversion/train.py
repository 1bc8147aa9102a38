"""Train once, cache by content, reconstruct (LDP-Feat (ICCV 2023) section 6.1, 6.3).

A trained network is a Lightning checkpoint in the cache, keyed by the training config
(its own ``seed`` included, not the cell's: every cell of a matrix shares one network, as
section 6.1 uses one pre-trained network for all attacks) and a fingerprint of the training data (images and features of every variant),
so a second matrix run with the same public data never retrains. A network the wall-time
cap (``max_minutes``) stopped before ``steps`` is not cached: how far it got depends on the
machine's load, and a later run must not read it as the config's network. The cache stores it with
a checksum (``Cache.store``, temporary file renamed into place) and a damaged entry is
retrained (``Cache.load``); loads use ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import lightning as L
import numpy as np
import torch

from vispriv.harness import CellContext, Images, torch_threads
from vispriv.harness.errors import InputError
from vispriv.harness.hashing import derive_seed, fingerprint
from vispriv.harness.heartbeat import Heartbeat
from vispriv.plugins.descriptor_release.inversion.config import InversionConfig
from vispriv.plugins.descriptor_release.inversion.data import CropDataset, collate
from vispriv.plugins.descriptor_release.inversion.featuremap import SparseFeatures, flat_pixel_index
from vispriv.plugins.descriptor_release.inversion.module import InversionModule
from vispriv.plugins.descriptor_release.inversion.unet import SparseUNet

CACHE_NAMESPACE = "inversion-net"
#: "2": the splat's gather became index_select (a deterministic backward), so networks trained
#: with two or more threads differ from version "1"'s.
CACHE_VERSION = "2"


@dataclass
class TrainedInverter:
    """A trained network and how it came to be (``info``: trained, seconds, images/s)."""

    net: SparseUNet
    info: dict[str, Any] = field(default_factory=dict)


def training_fingerprint(sets: list[tuple[Images, SparseFeatures]]) -> str:
    """Content fingerprint of the training data: every image and feature array."""
    arrays: list[np.ndarray] = []
    for images, feats in sets:
        arrays += [images.images, feats.keypoints, feats.features, feats.image_index]
    return fingerprint(*arrays)


def load_checkpoint(path: str | Path) -> SparseUNet:
    """The network stored in a checkpoint written by :func:`train_or_load` (eval mode)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"inversion checkpoint not found: {path}")
    try:
        return _net_from(path)
    except Exception as exc:  # noqa: BLE001 -- torch raises many types on a damaged file
        raise InputError(f"inversion checkpoint {path} is corrupt or not an inversion checkpoint ({type(exc).__name__})") from None


def _net_from(source: str | Path | IO[bytes]) -> SparseUNet:
    """The network of a checkpoint file or stream (raises whatever torch raises on a damaged one)."""
    ckpt = torch.load(source, map_location="cpu", weights_only=True)
    hp = ckpt["hyper_parameters"]
    net = SparseUNet(hp["in_channels"], hp["out_channels"], **hp["network"])
    state = {k.removeprefix("net."): v for k, v in ckpt["state_dict"].items()}
    net.load_state_dict(state)
    return net.eval()


class _HeartbeatCallback(L.Callback):
    """Ticks a :class:`~vispriv.harness.heartbeat.Heartbeat` after every training step (off a terminal)."""

    def __init__(self, beat: Heartbeat) -> None:
        self.beat = beat

    def on_train_batch_end(self, trainer: L.Trainer, *_: Any) -> None:
        self.beat.tick(trainer.global_step)


def _fit(sets: list[tuple[Images, SparseFeatures]], out_channels: int, cfg: InversionConfig, ctx: CellContext) -> tuple[InversionModule, L.Trainer, dict[str, Any]]:
    seed = derive_seed(cfg.seed, "inversion-train")
    torch.manual_seed(seed)
    data = CropDataset(sets, cfg.crop, (cfg.keep_min, cfg.keep_max), cfg.color, cfg.steps * cfg.batch_size, seed)
    loader = torch.utils.data.DataLoader(data, batch_size=cfg.batch_size, shuffle=False, collate_fn=collate, num_workers=0)
    module = InversionModule(
        in_channels=data.channels,
        out_channels=out_channels,
        network=cfg.network_params(),
        lr=cfg.lr,
        steps=cfg.steps,
        l1_weight=cfg.l1_weight,
        ssim_weight=cfg.ssim_weight,
        ssim_window=cfg.ssim_window,
        gradient_weight=cfg.gradient_weight,
    )
    for name in ("lightning.pytorch", "lightning.fabric", "lightning"):
        logging.getLogger(name).setLevel(logging.ERROR)
    trainer = L.Trainer(
        max_steps=cfg.steps,
        max_epochs=1,
        max_time={"minutes": cfg.max_minutes} if cfg.max_minutes else None,
        accelerator=cfg.accelerator,
        devices=cfg.devices,
        precision=cfg.precision,
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        enable_progress_bar=not ctx.quiet,
        num_sanity_val_steps=0,
        callbacks=[_HeartbeatCallback(beat)] if (beat := ctx.heartbeat_for("inversion training", cfg.steps)) else [],
    )
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*does not have many workers.*")
        warnings.filterwarnings("ignore", message=".*GPU available but not used.*")
        warnings.filterwarnings("ignore", message=".*treespec.*")
        with torch_threads(cfg.threads):
            trainer.fit(module, loader)
    seconds = time.perf_counter() - start
    seen = trainer.global_step * cfg.batch_size
    info = {
        "trained": 1.0,
        "train_seconds": seconds,
        "train_images_per_second": seen / max(seconds, 1e-9),
        "train_steps": float(trainer.global_step),
        "train_images_seen": float(seen),
        "train_crops_available": float(len(data.targets)),
    }
    return module, trainer, info


def train_or_load(
    sets: list[tuple[Images, SparseFeatures]],
    cfg: InversionConfig,
    ctx: CellContext,
    tag: str = "",
) -> TrainedInverter:
    """The network trained on ``sets`` (one (images, features) pair per augmentation variant).

    Loaded from ``ctx.cache`` when an entry with the same config, ``tag`` and
    training-data fingerprint exists; a damaged entry is retrained and replaced.
    """
    if not sets:
        raise InputError("no training data for the inversion network")
    channels = {feats.channels for _, feats in sets}
    if len(channels) != 1:
        raise InputError(f"training features disagree on their channel count: {sorted(channels)}")
    out_channels = 3 if cfg.color else 1
    parts = {
        "version": CACHE_VERSION,
        "tag": tag,
        # The cap is left out: a network that trained every step is the same under any cap, and one
        # the cap stopped is never stored.
        "config": cfg.model_dump(mode="json", exclude={"accelerator", "devices", "max_minutes"}),
        "data": training_fingerprint(sets),
    }
    key = ctx.cache.key(CACHE_NAMESPACE, parts)
    net, path = ctx.cache.load(CACHE_NAMESPACE, key, ".ckpt", _net_from)
    if net is not None:
        return TrainedInverter(net, {"trained": 0.0, "checkpoint": str(path)})
    module, trainer, info = _fit(sets, out_channels, cfg, ctx)
    if trainer.global_step < cfg.steps:
        # The wall-time cap stopped training early: how far it got depends on the machine's load,
        # so the network is used for this run only, never stored under the full config's key.
        warnings.warn(
            f"inversion network stopped by max_minutes={cfg.max_minutes} after {trainer.global_step} of {cfg.steps} "
            "steps; results depend on this machine's speed and the network is not cached "
            "(set network.max_minutes: null to train every step)",
            stacklevel=2,
        )
        info["train_capped"] = 1.0
        return TrainedInverter(module.net.cpu().eval(), info)
    stored = ctx.cache.store(CACHE_NAMESPACE, key, ".ckpt", lambda tmp: trainer.save_checkpoint(tmp, weights_only=True))
    if stored is not None:
        info["checkpoint"] = str(stored)
    return TrainedInverter(module.net.cpu().eval(), info)


@torch.no_grad()
def reconstruct(net: SparseUNet, feats: SparseFeatures, batch_size: int = 4) -> np.ndarray:
    """Reconstructed images (N, H, W, out_channels) in [0, 1] of every image in ``feats``."""
    if feats.channels != net.in_channels:
        raise InputError(
            f"feature maps have {feats.channels} channels but the inversion network expects {net.in_channels}"
        )
    h, w = feats.image_size
    if h < net.stride or w < net.stride:
        raise InputError(f"images of {h}x{w} are smaller than the network stride {net.stride}")
    net = net.eval()
    device = next(net.parameters()).device
    pix = feats.pixels()
    out = []
    for start in range(0, feats.n_images, batch_size):
        stop = min(start + batch_size, feats.n_images)
        rows = np.flatnonzero((feats.image_index >= start) & (feats.image_index < stop))
        index = flat_pixel_index(feats.image_index[rows] - start, pix[rows, 0], pix[rows, 1], h, w)
        pred = net(
            torch.from_numpy(feats.features[rows]).to(device),
            torch.from_numpy(index).to(device),
            stop - start,
            h,
            w,
        )
        out.append(pred.permute(0, 2, 3, 1).cpu().numpy())
    if not out:
        return np.zeros((0, h, w, net.out_channels), np.float32)
    return np.concatenate(out).astype(np.float32)
