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

Every file is read and checked when the config is built
(:mod:`vispriv.plugins.federated.deep.captured_files`): a missing file, a TorchScript model,
a batch the export fixed at another size, ``module.``-prefixed parameter names or images of
the wrong shape are each one ``error:`` line before any run exists. Relative paths in a config
file are read from the config's folder.

The scene goes through the ``none`` defense (the update is already what was sent) to every
deep attack.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from vispriv.harness import CellContext, Dataset, FilePath, PluginConfig, Scene
from vispriv.harness.errors import InputError
from vispriv.plugins.federated.deep.captured_files import CapturedFiles, read_captured
from vispriv.plugins.federated.deep.payloads import CapturedUpdate, DeepFederatedPublic


class CapturedUpdateConfig(PluginConfig):
    model: FilePath = Field(..., description="torch.export file (.pt2) of the global model at the attacked round")
    update: FilePath = Field(..., description="torch.save'd dict {parameter name: tensor}: gradient or weight difference")
    image_shape: tuple[int, int, int] | None = Field(
        None, description="C, H, W of one input image (default: from the exported program's example input)"
    )
    batch_size: int = Field(1, ge=1, le=64, description="B: images behind the update")
    local: Literal["fedsgd", "fedavg"] = "fedsgd"
    local_steps: int = Field(1, ge=1, le=1000)
    local_lr: float = Field(0.1, gt=0)
    mean: tuple[float, ...] = Field((), description="input normalisation applied before the model (empty: none)")
    std: tuple[float, ...] = Field((), description="input normalisation applied before the model (empty: none)")
    images: FilePath = Field("", description="optional .npy of the true images (B, C, H, W) in [0, 1], for scoring")
    labels: FilePath = Field("", description="optional .npy of the true labels (B,), for scoring")

    @model_validator(mode="after")
    def _files_read(self) -> CapturedUpdateConfig:
        if bool(self.mean) != bool(self.std) or len(self.mean) != len(self.std):
            raise InputError(f"mean ({len(self.mean)} values) and std ({len(self.std)}) need one value per channel "
                             "each, or neither")
        self.files()
        return self

    def files(self) -> CapturedFiles:
        """The checked contents of every file this config names (read once per file version)."""
        return read_captured(self.model, self.update, self.images, self.labels, self.image_shape, self.batch_size,
                             len(self.mean))


class CapturedUpdateDataset(Dataset):
    """A model (torch.export) and an update captured from the user's own federated code."""

    name = "captured-update"
    version = "1.0"
    scenario = "federated-learning"
    Config = CapturedUpdateConfig
    produces = (CapturedUpdate,)

    def load(self, ctx: CellContext) -> Scene:
        cfg: CapturedUpdateConfig = self.config
        files = cfg.files()
        c, h, w = files.image_shape
        public = DeepFederatedPublic(
            arch="exported",
            width=0,
            n_classes=files.n_classes,
            image_shape=(c, h, w),
            mean=list(cfg.mean),
            std=list(cfg.std),
            state={},
            work={"mode": cfg.local, "steps": cfg.local_steps, "lr": cfg.local_lr, "batchnorm": "eval"},
            public_images=np.zeros((0, h, w, c), np.float32),
            public_labels=np.zeros(0, np.int64),
            exported=files.model,
        )
        private = CapturedUpdate(update=files.update, batch_size=cfg.batch_size, images=files.images, labels=files.labels)
        return Scene(private=private, public=public)
