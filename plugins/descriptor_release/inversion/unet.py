"""The U-Net of Pittaluga et al. [30] (as in its public training code).

Encoder: ``depth`` 4x4 stride-2 convolutions (they use 6), batch norm, ReLU. Decoder:
``depth`` 3x3 convolutions each preceded by nearest-neighbour x2 upsampling and fed the
encoder output of the same resolution (skip connection), then ``head_layers`` + 1 3x3
convolutions at full resolution ([30]'s decoder has 9 = 6 + 3 layers: depth 6, head 2;
full-resolution layers dominate the cost on a CPU, so fewer is an option). The output is squashed into
[0, 1] (a tanh rescaled, as [30]'s tanh output maps to pixel values).

The input is sparse: (K, C) feature vectors and their flat pixel indices. An optional
bias-free linear map C -> ``projection`` (a 1x1 convolution of the dense map; a bias
would paint every empty pixel) is applied before scattering.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release.inversion.featuremap import scatter_to_map


def _block(cin: int, cout: int, kernel: int, stride: int) -> nn.Sequential:
    pad = 1
    return nn.Sequential(
        nn.Conv2d(cin, cout, kernel, stride=stride, padding=pad, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


class SparseUNet(nn.Module):
    """U-Net from a sparse feature map to an image in [0, 1]."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int = 1,
        depth: int = 6,
        width: int = 32,
        max_width: int = 256,
        projection: int = 32,
        feature_scale: float = 8.0,
        head_layers: int = 2,
        splat_radius: int = 0,
    ) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.depth = depth
        self.feature_scale = feature_scale
        self.splat_radius = splat_radius
        self.project = nn.Linear(in_channels, projection, bias=False) if projection else None
        map_channels = (projection or in_channels) + 1
        widths = [min(width * 2**i, max_width) for i in range(depth)]
        self.down = nn.ModuleList()
        cin = map_channels
        for w in widths:
            self.down.append(_block(cin, w, 4, 2))
            cin = w
        skips = [map_channels, *widths[:-1]]
        outs = [width, *widths[:-1]]
        self.up = nn.ModuleList()
        for level in reversed(range(depth)):
            self.up.append(_block(cin + skips[level], outs[level], 3, 1))
            cin = outs[level]
        head: list[nn.Module] = []
        for _ in range(head_layers):
            head.append(_block(cin, width, 3, 1))
            cin = width
        self.head = nn.Sequential(*head, nn.Conv2d(cin, out_channels, 3, padding=1))

    @property
    def stride(self) -> int:
        return 2**self.depth

    def forward(self, features: torch.Tensor, flat_index: torch.Tensor, batch: int, height: int, width: int) -> torch.Tensor:
        """Images (B, out, H, W) from features (K, C) at flat pixel indices into (B, H, W)."""
        if features.shape[-1] != self.in_channels:
            raise InputError(
                f"feature vectors have {features.shape[-1]} channels but this network was trained on {self.in_channels}"
            )
        if height < self.stride or width < self.stride:
            raise InputError(f"images of {height}x{width} are smaller than the network stride {self.stride}; use larger images or a smaller depth")
        values = features * self.feature_scale
        if self.project is not None:
            values = self.project(values)
        x = scatter_to_map(values, flat_index, batch, height, width, self.splat_radius)
        ph, pw = (-height) % self.stride, (-width) % self.stride
        if ph or pw:
            x = F.pad(x, (0, pw, 0, ph))
        skips = [x]
        for layer in self.down:
            x = layer(x)
            skips.append(x)
        skips.pop()
        for layer in self.up:
            x = F.interpolate(x, scale_factor=2, mode="nearest")
            x = layer(torch.cat([x, skips.pop()], dim=1))
        x = self.head(x)
        return (torch.tanh(x[:, :, :height, :width]) + 1) / 2
