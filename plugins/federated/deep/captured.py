"""Bring your own federated system: attack a model and an update captured from the user's own code.

A practitioner asks "my clients send this -- what leaks?". The dataset ``captured-update``
reads what they captured, with no vispriv code on their side:

* ``model`` -- the global model as a ``torch.export`` file (``torch.export.save(
  torch.export.export(model, (example_batch,)), "model.pt2")``), the weights the client
  started from included. TorchScript files are not accepted: a scripted module cannot be
  called with substituted weights, which gradient matching and the FedAvg unroll need.
  The model takes images in [0, 1] unless ``mean``/``std`` are given (then (x - mean) / std
  is applied before it);
* ``update`` -- a ``torch.save``'d dict {parameter name: tensor} (read with
  ``weights_only=True``): the gradient (``local: fedsgd``) or the weight difference w_E - w
  (``local: fedavg``, E = ``local_steps`` at ``local_lr``), one entry per trainable parameter;
* ``images`` / ``labels`` (optional) -- ``.npy`` files of the true batch, images (B, C, H, W)
  in [0, 1] as PyTorch holds them, labels (B,), for scoring; without them the attacks still
  run and log their reconstructions, but no privacy score can be computed.

The scene goes through the ``none`` defense (the update is already what was sent) to every
deep attack.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from vispriv.harness import CellContext, Dataset, PluginConfig, Scene
from vispriv.harness.errors import InputError
from vispriv.plugins.federated.deep.payloads import CapturedUpdate, DeepFederatedPublic, flatten

if TYPE_CHECKING:  # torch is imported where it is used, so listing plugins stays light
    import torch


class CapturedUpdateConfig(PluginConfig):
    model: str = Field(..., description="torch.export file (.pt2) of the global model at the attacked round")
    update: str = Field(..., description="torch.save'd dict {parameter name: tensor}: gradient or weight difference")
    image_shape: tuple[int, int, int] | None = Field(
        None, description="C, H, W of one input image (default: from the exported program's example input)"
    )
    batch_size: int = Field(1, ge=1, le=64, description="B: images behind the update")
    local: Literal["fedsgd", "fedavg"] = "fedsgd"
    local_steps: int = Field(1, ge=1, le=1000)
    local_lr: float = Field(0.1, gt=0)
    mean: tuple[float, ...] = Field((), description="input normalisation applied before the model (empty: none)")
    std: tuple[float, ...] = Field((), description="input normalisation applied before the model (empty: none)")
    images: str = Field("", description="optional .npy of the true images (B, C, H, W) in [0, 1], for scoring")
    labels: str = Field("", description="optional .npy of the true labels (B,), for scoring")


def _file(path: str, what: str) -> Path:
    p = Path(path).expanduser()
    if not p.is_file():
        raise InputError(f"{what} file not found: {p}")
    return p


def load_exported(path: str) -> tuple[bytes, torch.nn.Module, tuple[int, ...] | None]:
    """The bytes of a ``torch.export`` file, its module and its example input's (C, H, W), or one-line InputError."""
    import torch

    data = _file(path, "model").read_bytes()
    # torch.export logs a traceback of its own before raising on a foreign file: the one line below replaces it.
    torch_export_log = logging.getLogger("torch.export")
    level = torch_export_log.level
    torch_export_log.setLevel(logging.CRITICAL)
    try:
        program = torch.export.load(io.BytesIO(data))
        module = program.module()
    except Exception as exc:  # noqa: BLE001 -- torch raises many types on a file that is not an exported program
        raise InputError(
            f"model {path} does not load as a torch.export program ({type(exc).__name__}); "
            "save it with torch.export.save(torch.export.export(model, (example_batch,)), path)"
        ) from None
    finally:
        torch_export_log.setLevel(level)
    example = program.example_inputs[0] if program.example_inputs else ()
    shape = tuple(example[0].shape[1:]) if example and getattr(example[0], "ndim", 0) == 4 else None
    return data, module, shape


def load_update(path: str, module: torch.nn.Module) -> np.ndarray:
    """The captured update, checked name by name and shape by shape against the model."""
    import torch

    from vispriv.plugins.federated.deep.local import trainable

    try:
        state = torch.load(_file(path, "update"), map_location="cpu", weights_only=True)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 -- a damaged or foreign file
        raise InputError(f"update {path} does not load with torch.load ({type(exc).__name__})") from None
    if not isinstance(state, dict):
        raise InputError(f"update {path} must hold a dict {{parameter name: tensor}}; got {type(state).__name__}")
    params = trainable(module)
    missing = [k for k in params if k not in state]
    extra = [k for k in state if k not in params]
    if missing or extra:
        raise InputError(
            f"update {path} does not match the model's parameters: missing {missing[:3]}, unexpected {extra[:3]}"
        )
    for k, p in params.items():
        if tuple(state[k].shape) != tuple(p.shape):
            raise InputError(f"update {path}: {k} has shape {tuple(state[k].shape)}, the model's is {tuple(p.shape)}")
    return flatten([state[k].to(torch.float32) for k in params])


class CapturedUpdateDataset(Dataset):
    """A model (torch.export) and an update captured from the user's own federated code."""

    name = "captured-update"
    version = "1.0"
    scenario = "federated-learning"
    Config = CapturedUpdateConfig
    produces = (CapturedUpdate,)

    def load(self, ctx: CellContext) -> Scene:
        import torch

        cfg: CapturedUpdateConfig = self.config
        data, module, example_shape = load_exported(cfg.model)
        vector = load_update(cfg.update, module)
        shape = cfg.image_shape or example_shape
        if shape is None:
            raise InputError(f"model {cfg.model} carries no 4-d example input: set image_shape: [C, H, W]")
        c, h, w = shape
        try:
            with torch.no_grad():
                n_classes = int(module(torch.zeros(cfg.batch_size, c, h, w)).shape[-1])
        except Exception as exc:  # noqa: BLE001 -- a model that rejects the stated input shape
            raise InputError(f"model {cfg.model} does not accept a batch of {cfg.batch_size} x {shape} "
                             f"images ({type(exc).__name__}); check image_shape and batch_size") from None
        images = np.zeros((0, h, w, c), np.float32)
        labels = np.zeros(0, np.int64)
        if cfg.images:
            raw = np.load(_file(cfg.images, "images"))
            if raw.shape != (cfg.batch_size, c, h, w):
                raise InputError(f"images {cfg.images} have shape {raw.shape}; expected {(cfg.batch_size, c, h, w)}")
            images = np.asarray(raw, np.float32).transpose(0, 2, 3, 1)
            labels = np.load(_file(cfg.labels, "labels")) if cfg.labels else np.zeros(cfg.batch_size, np.int64)
            if len(labels) != cfg.batch_size:
                raise InputError(f"labels {cfg.labels} hold {len(labels)} labels; expected {cfg.batch_size}")
        if bool(cfg.mean) != bool(cfg.std) or (cfg.mean and len(cfg.mean) != c):
            raise InputError(f"mean and std need one value per channel ({c}) each, or neither")
        public = DeepFederatedPublic(
            arch="exported",
            width=0,
            n_classes=n_classes,
            image_shape=(c, h, w),
            mean=list(cfg.mean),
            std=list(cfg.std),
            state={},
            work={"mode": cfg.local, "steps": cfg.local_steps, "lr": cfg.local_lr, "batchnorm": "eval"},
            public_images=np.zeros((0, h, w, c), np.float32),
            public_labels=np.zeros(0, np.int64),
            exported=data,
        )
        private = CapturedUpdate(update=vector, batch_size=cfg.batch_size, images=images, labels=labels)
        return Scene(private=private, public=public)
