"""Image-release defenses: ``none`` (publish as is) and ``pixelate`` (block averaging)."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from vispriv.harness import CellContext, Defense, Images, Payload, PluginConfig, Protected
from vispriv.harness.errors import InputError


class PublishAsIs(Defense):
    """Publishes the private images unchanged (the no-defense baseline)."""

    name = "none"
    version = "1.0"
    scenario = "image-release"
    headline = ("pixel_change",)
    consumes = (Images,)
    produces = (Images,)

    def protect(self, private: Images, public: Payload | None, ctx: CellContext) -> Protected:
        release = Images(private.images.copy(), ids=list(private.ids))
        return Protected(
            release=release,
            truth={"images": private},
            utility={"pixel_change": pixel_change(private, release)},  # 0: the baseline of every frontier
            utility_directions={"pixel_change": False},
        )


def pixel_change(private: Images, release: Images) -> float:
    """Utility cost of a release: the mean absolute pixel change, images in [0, 1] (lower is better)."""
    return float(np.mean(np.abs(release.images - private.images)))


def pixelate(images: np.ndarray, block: int) -> np.ndarray:
    """Replace every ``block`` x ``block`` tile by its mean (edge tiles are partial)."""
    _n, h, w, _c = images.shape
    out = np.empty_like(images)
    for y in range(0, h, block):
        for x in range(0, w, block):
            tile = images[:, y : y + block, x : x + block]
            out[:, y : y + block, x : x + block] = tile.mean(axis=(1, 2), keepdims=True)
    return out


class Pixelate(Defense):
    """Publishes each image with ``block`` x ``block`` tiles averaged."""

    class Config(PluginConfig):
        block: int = Field(4, ge=1)

    name = "pixelate"
    version = "1.0"
    scenario = "image-release"
    headline = ("pixel_change",)
    consumes = (Images,)
    produces = (Images,)

    def protect(self, private: Images, public: Payload | None, ctx: CellContext) -> Protected:
        h, w = private.images.shape[1:3]
        if self.config.block > min(h, w):
            raise InputError(f"pixelate block {self.config.block} exceeds the image size {h}x{w}")
        release = Images(pixelate(private.images, self.config.block), ids=list(private.ids))
        return Protected(
            release=release,
            truth={"images": private},
            utility={"pixel_change": pixel_change(private, release)},
            utility_directions={"pixel_change": False},
        )
