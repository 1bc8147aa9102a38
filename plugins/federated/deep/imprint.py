"""The imprint block a malicious server prepends to the global model, and how its gradient is read.

"Robbing the Fed: Directly Obtaining Private Data in Federated Learning with Modified Models"
(Fowl, Geiping, Czaja, Goldblum & Goldstein, ICLR 2022, section 3): a linear layer of k rows
that all measure one image statistic h(x), with biases -t_1 > ... > -t_k at staggered
thresholds t_1 < ... < t_k, then a ReLU. Row i fires for the images with h(x) > t_i, so over a
batch (or an average of batches) its gradients are

    dL/dW_i = sum_{x: h(x) > t_i} g_i(x) x,        dL/db_i = sum_{x: h(x) > t_i} g_i(x),

with g_i(x) = dL/dy_i the loss's derivative at the row's output. When g_i(x) is the same for
every row an image fires (here: the block's output is x + gain * sum_i relu(y_i), so every row
reaches the loss through the same path), neighbouring rows differ by exactly the images with
t_i < h(x) <= t_{i+1}, and if one image x falls in that bin

    x = (dL/dW_i - dL/dW_{i+1}) / (dL/db_i - dL/db_{i+1})

whatever the scale of the update (the 1/B of a mean loss, the 1/N of an average over users,
the -lr of one FedAvg step, a DP-SGD clipping factor all cancel). Two images in one bin come
out as their mixture weighted by g(x); images below t_1 are not seen.

The thresholds are the quantiles at i/(k+1) of a normal distribution fitted to h on the
public images (the server's own data; the paper places bins at equal-mass quantiles of h's
distribution estimated from data). ``brightness`` measures the mean pixel value (every row
1/D); ``random`` one fixed random direction (every row the same Gaussian vector / sqrt(D)),
which spreads images more evenly when their brightness is concentrated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from scipy.stats import norm
from torch import nn

Statistic = Literal["brightness", "random"]
STATISTICS: tuple[str, ...] = ("brightness", "random")
#: The block's default output path: x + gain * sum_i relu(y_i) / k; small, so the network behind
#: the block still sees (nearly) its input, and the same for every row (what isolates a bin).
GAIN = 1.0


class ImprintBlock(nn.Module):
    """k rows measuring one statistic, staggered biases, ReLU; output x + gain/k * sum of the rows."""

    def __init__(self, dim: int, bins: int, gain: float = GAIN) -> None:
        super().__init__()
        self.measure = nn.Linear(dim, bins)
        self.register_buffer("gain", torch.tensor(gain / bins, dtype=torch.float32))

    @property
    def bins(self) -> int:
        return self.measure.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        active = torch.relu(self.measure(x.flatten(1)))
        return x + self.gain * active.sum(dim=1).view(-1, *([1] * (x.ndim - 1)))


class Imprinted(nn.Module):
    """``net(imprint(x))``: the block on the [0, 1] pixels, before the model's own normalisation."""

    def __init__(self, imprint: ImprintBlock, net: nn.Module) -> None:
        super().__init__()
        self.imprint = imprint
        self.net = net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(self.imprint(x))


def statistic_row(statistic: str, dim: int, seed: int) -> np.ndarray:
    """The one row every bin shares: h(x) = row . x."""
    if statistic == "brightness":
        return np.full(dim, 1.0 / dim)
    if statistic == "random":
        return np.random.default_rng(seed).standard_normal(dim) / np.sqrt(dim)
    raise ValueError(f"unknown imprint statistic {statistic!r}; choose one of {', '.join(STATISTICS)}")


def thresholds(values: np.ndarray, bins: int) -> np.ndarray:
    """t_1 < ... < t_k: the quantiles at i/(k+1) of a normal fitted to ``values`` (h on public images)."""
    mean, std = float(np.mean(values)), max(float(np.std(values)), 1e-6)
    return mean + std * norm.ppf(np.arange(1, bins + 1) / (bins + 1))


def imprint_model(net: nn.Module, public_images: torch.Tensor, bins: int, statistic: str, seed: int,
                  gain: float = GAIN) -> Imprinted:
    """``net`` behind an imprint block whose bins are placed by the public images (N, C, H, W).

    ``gain`` scales the block's output path and with it the share of the update its rows carry
    (what pruning keeps and what DP-SGD's clipping leaves against its noise); the readout does not
    depend on it."""
    dim = int(np.prod(public_images.shape[1:]))
    row = statistic_row(statistic, dim, seed)
    h = public_images.reshape(len(public_images), -1).double().numpy() @ row
    block = ImprintBlock(dim, bins, gain)
    with torch.no_grad():
        block.measure.weight.copy_(torch.from_numpy(np.tile(row, (bins, 1))))
        block.measure.bias.copy_(torch.from_numpy(-thresholds(h, bins)))
    return Imprinted(block, net)


def find_block(model: nn.Module) -> ImprintBlock | None:
    """The model's imprint block, or None when the server sent an honest model."""
    return next((m for m in model.modules() if isinstance(m, ImprintBlock)), None)


@dataclass(frozen=True)
class BinReadout:
    """Per bin i (in threshold order): the isolated numerator dW_i - dW_{i+1} (k, D) and denominator db_i - db_{i+1} (k,)."""

    weights: np.ndarray
    biases: np.ndarray

    def images(self, count: int, relative_tol: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
        """Up to ``count`` images (n, D) from the bins with the largest |denominator| above
        ``relative_tol`` times the largest, and their bin indices."""
        strength = np.abs(self.biases)
        if not strength.size or strength.max() <= 0:
            return np.zeros((0, self.weights.shape[1])), np.zeros(0, np.int64)
        order = np.argsort(-strength, kind="stable")
        keep = order[strength[order] > relative_tol * strength.max()][:count]
        return self.weights[keep] / self.biases[keep, None], keep


def read_bins(weight_grad: np.ndarray, bias_grad: np.ndarray, biases: np.ndarray) -> BinReadout:
    """Neighbouring-row differences of the imprint rows' update, in increasing threshold t_i = -b_i."""
    order = np.argsort(-np.asarray(biases, np.float64), kind="stable")
    w = np.asarray(weight_grad, np.float64)[order]
    b = np.asarray(bias_grad, np.float64)[order]
    w_next = np.vstack([w[1:], np.zeros((1, w.shape[1]))])
    b_next = np.append(b[1:], 0.0)
    return BinReadout(w - w_next, b - b_next)
