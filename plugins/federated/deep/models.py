"""The deep classifiers of the federated scenario: the networks gradient inversion is tested on.

* ``lenet`` -- the LeNet of "Deep Leakage from Gradients" (Zhu, Liu & Han, NeurIPS 2019,
  section 4.1): three 5x5 convolutions (12 channels; strides 2, 2, 1), sigmoid activations,
  one linear layer, every weight and bias drawn uniformly from [-0.5, 0.5]. Sigmoids make the
  gradient twice differentiable everywhere, which is what DLG's L-BFGS needs.
* ``convnet`` -- the ConvNet of "Inverting Gradients" (Geiping, Bauermeister, Dröge & Moeller,
  NeurIPS 2020, section 6): eight 3x3 convolution-BatchNorm-ReLU blocks with 1, 2, 2, 4, 4, 4,
  4, 4 times ``width`` channels and three 3x3 max-pools, then one linear layer whose input size
  follows from the image size. The paper uses width 64; width 16 runs on a laptop CPU.
* ``resnet18`` -- ResNet-18 (He, Zhang, Ren & Sun, CVPR 2016), BasicBlock [2, 2, 2, 2], with
  torchvision's parameter names so a torchvision state dict loads into it. The default
  ``cifar_stem`` (3x3 stride-1 first convolution, no max-pool) is the CIFAR variant that
  Inverting Gradients attacks. The architecture is defined here rather than imported from
  torchvision because torchvision's PyPI wheel fails to import beside a CPU-only torch build;
  with ``cifar_stem: false`` its state dict is interchangeable with
  ``torchvision.models.resnet18(num_classes=...)`` (no pretrained weights are ever loaded).

Every model takes images in [0, 1] (N, C, H, W) and applies the public input normalisation
(x - mean) / std itself (:class:`Normalised`), so attacks optimise pixels directly and their
box constraint is [0, 1].
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Literal

import torch
from torch import nn

Architecture = Literal["lenet", "convnet", "resnet18"]
ARCHITECTURES: tuple[str, ...] = ("lenet", "convnet", "resnet18")


class Normalised(nn.Module):
    """``net((x - mean) / std)``: the public input normalisation as part of the model."""

    def __init__(self, net: nn.Module, mean: list[float], std: list[float]) -> None:
        super().__init__()
        self.net = net
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net((x - self.mean) / self.std)


class LeNetDLG(nn.Module):
    """DLG's LeNet (NeurIPS 2019, section 4.1): sigmoid activations, weights uniform in ±0.5."""

    def __init__(self, channels: int = 3, n_classes: int = 10, size: int = 32) -> None:
        super().__init__()
        if size % 4:
            raise ValueError(f"lenet needs an image size divisible by 4; got {size}")
        self.body = nn.Sequential(
            nn.Conv2d(channels, 12, kernel_size=5, padding=2, stride=2),
            nn.Sigmoid(),
            nn.Conv2d(12, 12, kernel_size=5, padding=2, stride=2),
            nn.Sigmoid(),
            nn.Conv2d(12, 12, kernel_size=5, padding=2, stride=1),
            nn.Sigmoid(),
        )
        self.fc = nn.Linear(12 * (size // 4) ** 2, n_classes)

    def reset_uniform(self, generator: torch.Generator) -> None:
        """Every weight and bias uniform in [-0.5, 0.5] (DLG's ``weights_init``)."""
        with torch.no_grad():
            for p in self.parameters():
                p.uniform_(-0.5, 0.5, generator=generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.body(x).flatten(1))


def _conv_block(i: int, c_in: int, c_out: int) -> list[tuple[str, nn.Module]]:
    return [
        (f"conv{i}", nn.Conv2d(c_in, c_out, kernel_size=3, padding=1)),
        (f"bn{i}", nn.BatchNorm2d(c_out)),
        (f"relu{i}", nn.ReLU()),
    ]


class ConvNetIG(nn.Module):
    """Inverting Gradients' ConvNet (NeurIPS 2020, section 6): 8 conv-BN-ReLU blocks, 3 max-pools."""

    def __init__(self, channels: int = 3, n_classes: int = 10, size: int = 32, width: int = 16) -> None:
        super().__init__()
        w = width
        widths = [channels, w, 2 * w, 2 * w, 4 * w, 4 * w, 4 * w, 4 * w, 4 * w]
        layers: list[tuple[str, nn.Module]] = []
        for i in range(8):
            layers += _conv_block(i, widths[i], widths[i + 1])
            if i in (3, 5, 7):
                layers.append((f"pool{(i - 3) // 2}", nn.MaxPool2d(3)))
        self.features = nn.Sequential(OrderedDict(layers))
        side = size
        for _ in range(3):
            side //= 3
        if side < 1:
            raise ValueError(f"convnet needs images of at least 27x27 pixels (three 3x3 max-pools); got {size}")
        self.linear = nn.Linear(4 * w * side * side, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.features(x).flatten(1))


class BasicBlock(nn.Module):
    """ResNet's two-convolution residual block (He et al., CVPR 2016, Figure 2)."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.downsample: nn.Module | None = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class ResNet18(nn.Module):
    """ResNet-18 with torchvision's parameter names; ``cifar_stem`` = 3x3 stride-1 stem, no max-pool."""

    def __init__(self, channels: int = 3, n_classes: int = 10, cifar_stem: bool = True) -> None:
        super().__init__()
        if cifar_stem:
            self.conv1 = nn.Conv2d(channels, 64, 3, stride=1, padding=1, bias=False)
            self.maxpool: nn.Module = nn.Identity()
        else:
            self.conv1 = nn.Conv2d(channels, 64, 7, stride=2, padding=3, bias=False)
            self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU()
        c = 64
        for i, (c_out, stride) in enumerate([(64, 1), (128, 2), (256, 2), (512, 2)], start=1):
            setattr(self, f"layer{i}", nn.Sequential(BasicBlock(c, c_out, stride), BasicBlock(c_out, c_out, 1)))
            c = c_out
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.avgpool(x).flatten(1))


def build_model(
    arch: str,
    n_classes: int,
    channels: int,
    size: int,
    width: int = 16,
    seed: int = 0,
    mean: list[float] | None = None,
    std: list[float] | None = None,
    cifar_stem: bool = True,
) -> Normalised:
    """The architecture ``arch`` with its paper's initialisation drawn from ``seed``, wrapped in
    the input normalisation (mean 0.5, std 0.5 per channel unless given)."""
    generator = torch.Generator().manual_seed(int(seed) % (2**63))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed) % (2**63))
        net: nn.Module
        if arch == "lenet":
            lenet = LeNetDLG(channels, n_classes, size)
            lenet.reset_uniform(generator)
            net = lenet
        elif arch == "convnet":
            net = ConvNetIG(channels, n_classes, size, width)
        elif arch == "resnet18":
            net = ResNet18(channels, n_classes, cifar_stem)
        else:
            raise ValueError(f"unknown architecture {arch!r}; choose one of {', '.join(ARCHITECTURES)}")
    mean = mean if mean is not None else [0.5] * channels
    std = std if std is not None else [0.5] * channels
    return Normalised(net, mean, std)
