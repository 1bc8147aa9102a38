"""The dataset plugin of deep federated learning: users' images, the global model, the protocol.

The scene fixes everything the attacked round shares across defenses (common random
numbers): which images each user holds, the model's architecture and its weights at the
attacked round (initialised from the dataset's seed, then trained ``pretrain_rounds`` SGD
steps on the public images), and the users' local work (FedSGD or FedAvg).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from vispriv.harness import CellContext, Dataset, FolderPath, PluginConfig, Scene
from vispriv.harness.errors import ConfigError, InputError, VisprivError
from vispriv.plugins.federated.deep.payloads import DeepFederatedData, DeepFederatedPublic, state_of, to_tensor
from vispriv.plugins.federated.deep.sources import (
    ColourImages,
    bundled_counts,
    load_bundled_digits,
    load_bundled_faces,
    load_bundled_photos,
    load_cifar,
    load_colour_folder,
)


class DeepFederatedConfig(PluginConfig):
    source: Literal["bundled-photos", "lfw-faces", "digits", "cifar", "image-folder"] = Field(
        "bundled-photos",
        description="bundled-photos: 32x32 crops of the photos shipped with scikit-image and friends, one class "
        "per photo; lfw-faces: scikit-image's LFW subset (faces vs not); digits: scikit-learn's 1,797 handwritten "
        "digits (8x8 grey, enlarged), the bundled set a small network learns; cifar: CIFAR-10/100 python layout "
        "under root; image-folder: one sub-folder per class under root",
    )
    root: FolderPath = Field("", description="cifar / image-folder: the folder to read")
    coarse: bool = Field(False, description="cifar: CIFAR-100's 20 coarse labels instead of the 100 fine ones")
    size: int = Field(32, ge=8, le=256, description="image side (bundled sources and image-folder)")
    n_users: int = Field(1, ge=1, le=256)
    batch_size: int = Field(1, ge=1, le=64, description="B: images in one user's attacked update")
    images_per_user: int | None = Field(None, ge=1, description="images each user holds (default B); rounds cycle them")
    test_images: int = Field(64, ge=0, description="held-out images scoring the utility (test accuracy)")
    public_images: int = Field(64, ge=1, description="public images: pre-training and the attacks' label prior")
    arch: Literal["lenet", "convnet", "resnet18"] = "lenet"
    normalise: Literal["public", "none"] = Field(
        "public",
        description="public: the model standardises its input by the public images' per-channel mean and std "
        "(Inverting Gradients' setting); none: the model takes the [0, 1] pixels as they are (DLG's own code)",
    )
    head_classes: int | None = Field(
        None, ge=2, le=10_000,
        description="outputs of the model's last layer (default: the source's classes); DLG attacks a "
        "100-output LeNet (CIFAR-100), so 100 on the 12 bundled photos gives DLG's update size",
    )
    width: int = Field(16, ge=1, le=256, description="convnet: width multiplier (Inverting Gradients uses 64)")
    pretrain_rounds: int = Field(0, ge=0, description="SGD steps on the public images before the attacked round (0: untrained)")
    pretrain_lr: float = Field(0.01, gt=0)
    local: Literal["fedsgd", "fedavg"] = Field("fedsgd", description="fedsgd: one gradient; fedavg: local_steps steps")
    local_steps: int = Field(1, ge=1, le=1000, description="fedavg: E local steps on the user's batch")
    local_lr: float = Field(0.1, gt=0, description="local step size (fedavg) and server step size (fedsgd)")
    batchnorm: Literal["eval", "train"] = "eval"

    @model_validator(mode="after")
    def _root_given(self) -> DeepFederatedConfig:
        if self.source in ("cifar", "image-folder") and not self.root:
            raise ConfigError(f"source '{self.source}' needs root: the folder to read")
        if self.source in ("bundled-photos", "lfw-faces", "digits"):
            have, classes = bundled_counts(self.source)  # type: ignore[arg-type]
            self.check_fits(have, classes, error=ConfigError)
        if self.images_per_user is not None and self.images_per_user < self.batch_size:
            raise ConfigError(
                f"images_per_user ({self.images_per_user}) is smaller than batch_size ({self.batch_size}): "
                "a user cannot form a batch larger than its data"
            )
        return self

    def needed_images(self) -> int:
        """Images the config takes from its source: users' batches, test and public images."""
        return self.n_users * (self.images_per_user or self.batch_size) + self.test_images + self.public_images

    def check_fits(self, have: int, classes: int, error: type[VisprivError] = InputError) -> None:
        """Ask no more of a source of ``have`` images and ``classes`` classes than it has: at config
        build for a bundled source (its size is known before any run, ``ConfigError``), at load for
        files on disk."""
        per_user = self.images_per_user or self.batch_size
        need = self.needed_images()
        if need > have:
            raise error(
                f"the {self.source} source has {have} images but the config needs {need} "
                f"({self.n_users} users x {per_user} + {self.test_images} test + {self.public_images} public); "
                "lower n_users, images_per_user, test_images or public_images"
            )
        if self.head_classes is not None and self.head_classes < classes:
            raise error(
                f"head_classes ({self.head_classes}) is smaller than the {classes} classes of the "
                f"{self.source} source; use at least {classes} or leave it out"
            )


class DeepFederatedImages(Dataset):
    """Users' colour images and a deep global model (DLG's LeNet, Inverting Gradients' ConvNet, ResNet-18)."""

    name = "federated-deep"
    version = "1.0"
    scenario = "federated-learning"
    Config = DeepFederatedConfig
    produces = (DeepFederatedData,)

    def provenance(self) -> str:
        cfg: DeepFederatedConfig = self.config
        if cfg.source == "bundled-photos":
            return f"bundled photos: {cfg.size}x{cfg.size} crops, one class per photo (a stand-in for CIFAR)"
        if cfg.source == "lfw-faces":
            return f"bundled LFW subset: 25x25 grey faces and non-faces resized to {cfg.size}x{cfg.size}"
        if cfg.source == "digits":
            return f"bundled digits (scikit-learn): 8x8 grey handwritten digits enlarged to {cfg.size}x{cfg.size}"
        return ""

    def _source(self) -> ColourImages:
        cfg: DeepFederatedConfig = self.config
        if cfg.source == "bundled-photos":
            return load_bundled_photos(cfg.size)
        if cfg.source == "lfw-faces":
            return load_bundled_faces(cfg.size)
        if cfg.source == "digits":
            return load_bundled_digits(cfg.size)
        if cfg.source == "cifar":
            return load_cifar(cfg.root, "train", coarse=cfg.coarse)
        return load_colour_folder(cfg.root, cfg.size)

    def load(self, ctx: CellContext) -> Scene:
        import torch

        from vispriv.plugins.federated.deep.local import LocalWork
        from vispriv.plugins.federated.deep.models import build_model
        from vispriv.plugins.federated.deep.pretrain import pretrain

        cfg: DeepFederatedConfig = self.config
        data = self._source()
        cfg.check_fits(len(data.labels), len(data.class_names))
        per_user, need = cfg.images_per_user or cfg.batch_size, cfg.needed_images()
        order = ctx.rng("deep-split").permutation(len(data.labels))
        users = order[: cfg.n_users * per_user]
        test = order[len(users) : len(users) + cfg.test_images]
        pub = order[len(users) + cfg.test_images : need]
        n_classes = cfg.head_classes or len(data.class_names)
        channels, side = data.images.shape[-1], data.images.shape[1]
        pub_x = to_tensor(data.images[pub])
        if cfg.normalise == "public":
            mean = pub_x.mean(dim=(0, 2, 3)).tolist()
            std = pub_x.std(dim=(0, 2, 3)).clamp_min(1e-3).tolist()
        else:
            mean, std = [0.0] * channels, [1.0] * channels
        work = LocalWork(cfg.local, cfg.local_steps, cfg.local_lr, cfg.batchnorm)
        model = build_model(cfg.arch, n_classes, channels, side, cfg.width, ctx.child_seed("deep-model-init"), mean, std)
        model = pretrain(model, pub_x, torch.as_tensor(data.labels[pub]), cfg.pretrain_rounds, cfg.pretrain_lr,
                         32, ctx.child_seed("deep-pretrain"))
        private = DeepFederatedData(
            images=data.images[users],
            labels=data.labels[users],
            user_index=np.repeat(np.arange(cfg.n_users), per_user),
            test_images=data.images[test],
            test_labels=data.labels[test],
            n_users=cfg.n_users,
            n_classes=n_classes,
            batch_size=cfg.batch_size,
            class_names=list(data.class_names),
        )
        public = DeepFederatedPublic(
            arch=cfg.arch,
            width=cfg.width,
            n_classes=n_classes,
            image_shape=(channels, side, side),
            mean=mean,
            std=std,
            state=state_of(model),
            work={"mode": work.mode, "steps": work.steps, "lr": work.lr, "batchnorm": work.batchnorm},
            public_images=data.images[pub],
            public_labels=data.labels[pub],
        )
        return Scene(private=private, public=public)
