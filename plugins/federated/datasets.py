"""The dataset plugin of the federated-learning scenario."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from vispriv.harness import CellContext, Dataset, FolderPath, PluginConfig, Scene
from vispriv.harness.errors import ConfigError
from vispriv.plugins.federated.data import (
    NOT_CLASSES,
    LabelledImages,
    load_digits_source,
    load_image_folder,
    load_lfw_source,
    split_users,
)
from vispriv.plugins.federated.payloads import FederatedData


class FederatedImagesConfig(PluginConfig):
    source: Literal["digits", "lfw-faces", "image-folder"] = "digits"
    root: FolderPath | None = Field(None, description="image-folder only: one sub-folder per class")
    size: int = Field(16, ge=4, le=128, description="image-folder only: images resized to size x size")
    exclude_classes: tuple[str, ...] = Field(
        NOT_CLASSES, description="image-folder only: class folders left out (by default Caltech-101's "
        "BACKGROUND_Google and Caltech-256's 257.clutter: not object categories)"
    )
    n_users: int = Field(5, ge=1, le=1000)
    test_fraction: float = Field(0.25, gt=0, lt=1)
    init_fraction: float = Field(0.1, gt=0, lt=1)
    standardise: bool = True
    split: Literal["iid", "by-class"] = "iid"
    max_per_user: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _root_for_folder(self) -> FederatedImagesConfig:
        if self.source == "image-folder" and not self.root:
            raise ConfigError("source 'image-folder' needs root: a folder with one sub-folder per class")
        return self


class FederatedImages(Dataset):
    """N users' labelled images (digits 8x8, LFW faces vs non-faces 25x25, or an image folder)."""

    name = "federated-images"
    version = "1.0"
    scenario = "federated-learning"
    Config = FederatedImagesConfig
    produces = (FederatedData,)

    def labelled_images(self, ctx: CellContext) -> LabelledImages:
        """The labelled images the users are formed from."""
        cfg: FederatedImagesConfig = self.config
        if cfg.source == "digits":
            return load_digits_source()
        if cfg.source == "lfw-faces":
            return load_lfw_source()
        return load_image_folder(cfg.root, cfg.size, cfg.exclude_classes)

    def load(self, ctx: CellContext) -> Scene:
        cfg: FederatedImagesConfig = self.config
        private, public = split_users(
            self.labelled_images(ctx),
            cfg.n_users,
            ctx.rng("federated-split"),
            test_fraction=cfg.test_fraction,
            init_fraction=cfg.init_fraction,
            standardise=cfg.standardise,
            split=cfg.split,
            max_per_user=cfg.max_per_user,
            schedule_seed=ctx.child_seed("federated-schedule"),
        )
        return Scene(private=private, public=public)
