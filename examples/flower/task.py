"""Model, data and local training of the example Flower app (Flower's quickstart-pytorch ``task.py`` shape).

The model is DLG's LeNet ("Deep Leakage from Gradients", Zhu, Liu & Han, NeurIPS 2019:
sigmoids, weights uniform in ±0.5) on scikit-learn's bundled digits enlarged to 32x32 (vispriv's
loader: nothing is downloaded). ``make_net`` is what the attack imports
(``model: vispriv.examples.flower.task:make_net``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from vispriv.plugins.federated.deep.models import LeNetDLG
from vispriv.plugins.federated.deep.sources import load_bundled_digits

IMAGE_SIDE = 32
N_CLASSES = 10


@dataclass(frozen=True)
class AppSettings:
    """What the ServerApp and the ClientApps share (``flwr run`` would read these from pyproject's run config)."""

    num_clients: int = 2
    rounds: int = 1
    batch_size: int = 1
    local_epochs: int = 1
    lr: float = 0.1
    images_per_client: int = 4
    seed: int = 0
    #: capture folder ("" for none) and the rounds captured (empty: all)
    capture: str = ""
    capture_rounds: tuple[int, ...] = (1,)
    #: clients save their true batch of each round beside the capture (the optional scoring hook)
    save_truth: bool = True
    #: plaintext | client-dp-fixed-clipping | server-dp-fixed-clipping | server-dp-adaptive-clipping | local-dp |
    #: secaggplus | secaggplus-client-dp-fixed-clipping (the last two: secagg_app.py)
    privacy: str = "plaintext"
    noise_multiplier: float = 0.0
    clipping_norm: float = 1.0
    #: local-dp: Flower's LocalDpMod's per-round epsilon and delta (its sensitivity is clipping_norm)
    epsilon: float = 1.0
    delta: float = 1e-5
    #: where the ServerApp writes the final global model (final-model.npz) and Flower's centralized
    #: evaluation of each round (evaluation.json); "" for nowhere
    out: str = ""
    #: the server's held-out digits (the last ``test_images`` of the bundled set, no client's)
    test_images: int = 200
    #: seed of numpy's global generator, which Flower's DP noise draws from: in the server's process, and
    #: under local-dp in each client's, reseeded from (noise_seed, partition, round) before LocalDpMod
    #: noises the reply (-1: unseeded, as Flower leaves it)
    noise_seed: int = -1

    def run_config(self) -> dict[str, float | int]:
        """The keys the capture records (those of Flower's quickstart run config)."""
        return {"num-server-rounds": self.rounds, "local-epochs": self.local_epochs, "lr": self.lr,
                "batch-size": self.batch_size}

    def local_dp(self) -> dict[str, float]:
        """LocalDpMod's arguments under ``local-dp`` and the per-entry std of the Gaussian noise it adds:
        sensitivity x sqrt(2 ln(1.25 / delta)) / epsilon (flwr 1.42, ``flwr.clientapp.mod.LocalDpMod``;
        the classical Gaussian mechanism, Dwork & Roth 2014, Thm A.1). The sensitivity is the clipping
        norm: the L2 norm every clipped update is bounded by."""
        std = self.clipping_norm * math.sqrt(2 * math.log(1.25 / self.delta)) / self.epsilon
        return {"clipping_norm": self.clipping_norm, "sensitivity": self.clipping_norm, "epsilon": self.epsilon,
                "delta": self.delta, "local_noise_std": std}


def make_net(seed: int = 0) -> nn.Module:
    """DLG's LeNet for 1 x 32 x 32 digits, initialised from ``seed``."""
    net = LeNetDLG(channels=1, n_classes=N_CLASSES, size=IMAGE_SIDE)
    net.reset_uniform(torch.Generator().manual_seed(seed))
    return net


def load_partition(partition_id: int, num_partitions: int, images_per_client: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Client ``partition_id``'s digits: every ``num_partitions``-th image, (n, 1, 32, 32) in [0, 1], and labels."""
    data = load_bundled_digits(IMAGE_SIDE)
    rows = np.arange(partition_id, len(data.labels), num_partitions)[:images_per_client]
    images = torch.from_numpy(data.images[rows].transpose(0, 3, 1, 2).copy())
    return images, torch.from_numpy(data.labels[rows].astype(np.int64))


def load_test(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The server's held-out digits: the last ``n`` bundled images (no client holds them while
    ``num_clients x images_per_client`` stays below the 1,797 digits less ``n``) and their labels."""
    data = load_bundled_digits(IMAGE_SIDE)
    rows = np.arange(len(data.labels) - n, len(data.labels))
    images = torch.from_numpy(data.images[rows].transpose(0, 3, 1, 2).copy())
    return images, torch.from_numpy(data.labels[rows].astype(np.int64))


def evaluate(net: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of ``net`` on ``images``: the server's centralized evaluation."""
    net.eval()
    with torch.no_grad():
        logits = net(images)
        loss = float(nn.functional.cross_entropy(logits, labels))
        accuracy = float((logits.argmax(dim=1) == labels).float().mean())
    return loss, accuracy


def round_batch(images: torch.Tensor, labels: torch.Tensor, server_round: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch a client trains on in round ``server_round`` (1-based): its images cycled in order."""
    per = len(labels) // batch_size
    k = (server_round - 1) % per
    rows = slice(k * batch_size, (k + 1) * batch_size)
    return images[rows], labels[rows]


def train(net: nn.Module, images: torch.Tensor, labels: torch.Tensor, epochs: int, lr: float, batch_size: int) -> float:
    """Plain SGD on the mean cross-entropy, minibatches in order; the last step's loss."""
    optimiser = torch.optim.SGD(net.parameters(), lr=lr)
    net.train()
    loss = torch.zeros(())
    for _ in range(epochs):
        for start in range(0, len(labels), batch_size):
            optimiser.zero_grad()
            loss = nn.functional.cross_entropy(net(images[start:start + batch_size]), labels[start:start + batch_size])
            loss.backward()
            optimiser.step()
    return float(loss.detach())
