"""Lightning module of the inversion network: L1 + SSIM (+ gradient) loss, AdamW, one-cycle.

[30] trains with L1 + a VGG16 perceptual loss (+ an adversarial refinement stage); no
pretrained VGG can be downloaded here, so the perceptual term is replaced by a
structural one, 1 - SSIM (kornia), which is also what the evaluation scores, and
optionally an L1 term on the images' Sobel gradients (kornia ``spatial_gradient``), which
penalises blurred edges that L1 on intensities forgives.
"""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
from kornia.filters import spatial_gradient
from kornia.losses import ssim_loss
from torch.nn import functional as F

from vispriv.plugins.descriptor_release.inversion.unet import SparseUNet


class InversionModule(L.LightningModule):
    """Trains a :class:`SparseUNet`; batches are dicts from :func:`data.collate`."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        network: dict[str, Any],
        lr: float,
        steps: int,
        l1_weight: float,
        ssim_weight: float,
        ssim_window: int,
        gradient_weight: float = 0.0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = SparseUNet(in_channels, out_channels, **network)

    def forward(self, batch: dict[str, Any]) -> torch.Tensor:
        target = batch["target"]
        b, _, h, w = target.shape
        return self.net(batch["features"], batch["index"], b, h, w)

    def loss(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        hp = self.hparams
        total = hp.l1_weight * F.l1_loss(pred, target)
        if hp.ssim_weight:
            # kornia's ssim_loss is (1 - SSIM) / 2.
            total = total + hp.ssim_weight * 2 * ssim_loss(pred, target, hp.ssim_window, max_val=1.0)
        if hp.gradient_weight:
            total = total + hp.gradient_weight * F.l1_loss(spatial_gradient(pred), spatial_gradient(target))
        return total

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> torch.Tensor:
        loss = self.loss(self(batch), batch["target"])
        self.log("loss", loss, prog_bar=True, batch_size=len(batch["target"]))
        return loss

    def configure_optimizers(self) -> dict[str, Any]:
        opt = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr, weight_decay=1e-4)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=self.hparams.lr, total_steps=max(self.hparams.steps, 2), pct_start=0.1)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
