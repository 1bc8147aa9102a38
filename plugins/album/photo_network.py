"""Per-photo features from a small CNN trained from scratch with Lightning (album-photos, ``features: network``).

album pruning (AAAI 2020) section 5 classifies photos into the 512 cells with a VGG-16
fine-tuned on 750k Flickr photos. Nothing pretrained can be downloaded here, so this is a
small network trained from random weights on the TRAINING photos only (never on the test
photos the albums are drawn from) to predict each photo's cell; its globally pooled last
convolution (``width`` numbers) is the feature vector of every photo. The two linear
classifiers of :func:`~vispriv.plugins.album.data.train_pair` are then trained on those
features, as for the handcrafted ones. Architecture: four 3x3 conv + batch norm + ReLU
blocks, stride 2 after the first, global average pooling, a linear cell classifier; Adam,
cross-entropy, random horizontal flips. Lightning picks the GPU when one is present.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import lightning as L
import numpy as np
import torch
from torch import nn

from vispriv.harness.data.bundled import square_resize
from vispriv.harness.data.image_folder import read_image
from vispriv.harness.hashing import derive_seed


@dataclass(frozen=True)
class NetworkSettings:
    """Training settings (part of the feature cache key)."""

    steps: int
    width: int
    input_size: int
    seed: int
    accelerator: str = "auto"
    batch_size: int = 32
    lr: float = 1e-3

    def key(self) -> dict[str, object]:
        return {k: v for k, v in asdict(self).items() if k != "accelerator"}


class PhotoNet(nn.Module):
    """Conv blocks -> global average pool (the features) -> linear cell classifier."""

    def __init__(self, width: int, n_places: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels = 3
        for i in range(4):
            layers += [nn.Conv2d(channels, width, 3, stride=2 if i < 3 else 1, padding=1), nn.BatchNorm2d(width), nn.ReLU()]
            channels = width
        self.body = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(width, n_places)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class PhotoModule(L.LightningModule):
    def __init__(self, width: int, n_places: int, lr: float) -> None:
        super().__init__()
        self.net = PhotoNet(width, n_places)
        self.lr = lr

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> torch.Tensor:
        x, y = batch
        flip = torch.rand(len(x), device=x.device) < 0.5
        x = torch.where(flip[:, None, None, None], x.flip(-1), x)
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def load_thumbnails(paths: list[Path], size: int) -> torch.Tensor:
    """Photos centre-cropped and resized to ``size``, as an (N, 3, size, size) tensor."""
    return torch.from_numpy(np.stack([square_resize(read_image(p), size) for p in paths])).permute(0, 3, 1, 2).contiguous()


def train_features(
    paths: list[Path], train: np.ndarray, cells: np.ndarray, n_places: int, settings: NetworkSettings, quiet: bool = True
) -> np.ndarray:
    """Train on ``paths[train]`` (labels ``cells``) and return every photo's (N, width) features."""
    torch.manual_seed(derive_seed(settings.seed, "album-photo-network"))
    x = load_thumbnails(paths, settings.input_size)
    data = torch.utils.data.TensorDataset(x[torch.as_tensor(train)], torch.as_tensor(cells, dtype=torch.long))
    sampler = torch.utils.data.RandomSampler(data, replacement=True, num_samples=settings.steps * settings.batch_size)
    loader = torch.utils.data.DataLoader(data, batch_size=settings.batch_size, sampler=sampler, num_workers=0)
    module = PhotoModule(settings.width, n_places, settings.lr)
    for name in ("lightning.pytorch", "lightning.fabric", "lightning"):
        logging.getLogger(name).setLevel(logging.ERROR)
    trainer = L.Trainer(
        max_steps=settings.steps, max_epochs=1, accelerator=settings.accelerator, devices=1, logger=False,
        enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=not quiet, num_sanity_val_steps=0,
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*does not have many workers.*")
        warnings.filterwarnings("ignore", message=".*GPU available but not used.*")
        trainer.fit(module, loader)
    net = module.net.cpu().eval()
    with torch.no_grad():
        return torch.cat([net.body(chunk) for chunk in x.split(256)]).numpy().astype(np.float32)
