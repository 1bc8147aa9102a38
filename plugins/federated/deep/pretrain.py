"""The global model's state before the attacked round: untrained, or trained T steps on the public set.

Gradient inversion weakens as a model trains ("Inverting Gradients", Geiping et al., NeurIPS
2020, section 6, trained vs untrained ResNets), so the model state is a setting that a matrix
sweeps. Training is plain mini-batch SGD on the public (initialisation) images through a
Lightning ``Trainer`` (no logger, no checkpoints; the data order is seeded), deterministic on
a given machine and thread count.
"""

from __future__ import annotations

import logging
import warnings

import lightning as L
import numpy as np
import torch
from torch import nn

from vispriv.plugins.federated.deep.local import cross_entropy


class _Classifier(L.LightningModule):
    def __init__(self, net: nn.Module, lr: float) -> None:
        super().__init__()
        self.net = net
        self.lr = lr

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], _index: int) -> torch.Tensor:
        x, y = batch
        return cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.net.parameters(), lr=self.lr, momentum=0.9)


def pretrain(net: nn.Module, images: torch.Tensor, labels: torch.Tensor, steps: int, lr: float,
             batch_size: int, seed: int) -> nn.Module:
    """``steps`` SGD steps (momentum 0.9) on the public images, batches drawn with ``seed``."""
    if steps <= 0:
        return net
    generator = torch.Generator().manual_seed(int(seed) % (2**63))
    data = torch.utils.data.TensorDataset(images, labels)
    loader = torch.utils.data.DataLoader(
        data, batch_size=min(batch_size, len(data)), shuffle=True, generator=generator, drop_last=False
    )
    epochs = int(np.ceil(steps / max(1, len(loader))))
    for name in ("lightning.pytorch", "lightning.fabric", "lightning.pytorch.utilities.rank_zero"):
        logging.getLogger(name).setLevel(logging.ERROR)
    trainer = L.Trainer(
        max_steps=steps,
        max_epochs=epochs,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        enable_progress_bar=False,
        num_sanity_val_steps=0,
        deterministic=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(_Classifier(net, lr), loader)
    return net
