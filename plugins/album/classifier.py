"""Per-photo location classifier trained with Lightning (section 5, "Location Classifier").

The paper fine-tunes VGG-16 with a 512-way output; here the classifier is a linear
softmax layer over per-photo image features (simulated vectors, or the handcrafted
features of :mod:`vispriv.plugins.album.manifest`), trained with cross-entropy. The weights are
returned as numpy arrays so they travel in the public :class:`GeoModels` payload.
"""

from __future__ import annotations

import logging
import warnings

import lightning as L
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from vispriv.harness import torch_threads


class LinearGeolocator(L.LightningModule):
    """Softmax regression over the cells, cross-entropy loss, Adam."""

    def __init__(self, dim: int, n_places: int, lr: float = 0.01, weight_decay: float = 1e-4) -> None:
        super().__init__()
        self.layer = nn.Linear(dim, n_places)
        self.lr = lr
        self.weight_decay = weight_decay

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(self(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.lr, weight_decay=self.weight_decay)


def train_classifier(
    features: np.ndarray,
    places: np.ndarray,
    n_places: int,
    seed: int,
    epochs: int = 5,
    batch_size: int = 1024,
    lr: float = 0.01,
) -> tuple[np.ndarray, np.ndarray]:
    """Train and return ``(W, b)`` with log-probabilities ``log_softmax(x @ W + b)``."""
    L.seed_everything(seed, workers=False, verbose=False)
    data = TensorDataset(torch.as_tensor(features, dtype=torch.float32), torch.as_tensor(places, dtype=torch.long))
    generator = torch.Generator().manual_seed(seed)
    loader = DataLoader(data, batch_size=batch_size, shuffle=True, generator=generator)
    model = LinearGeolocator(features.shape[1], n_places, lr=lr)
    for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.ERROR)
    trainer = L.Trainer(
        max_epochs=epochs,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    with torch_threads(1), warnings.catch_warnings():  # tiny matrices: one thread is several times faster than many
        warnings.simplefilter("ignore")
        trainer.fit(model, loader)
    weight = model.layer.weight.detach().numpy().T.astype(np.float32)
    bias = model.layer.bias.detach().numpy().astype(np.float32)
    return weight, bias
