"""Training configuration of the inversion network (ref [30] of LDP-Feat, after its public training code)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from vispriv.harness import PluginConfig


class InversionConfig(PluginConfig):
    """Architecture, loss, augmentation and training budget of one inversion network.

    Defaults are what the lever measurements of docs/inversion.md kept on 2 CPU cores;
    ``accelerator``/``devices`` pass straight through to Lightning's ``Trainer``.
    """

    crop: int = Field(64, ge=16, description="side of the square training crops (pixels)")
    depth: int = Field(4, ge=2, le=8, description="stride-2 encoder layers ([30] uses 6)")
    width: int = Field(32, ge=4, description="channels of the first encoder layer")
    max_width: int = Field(256, ge=4, description="cap on encoder channels")
    head_layers: int = Field(2, ge=0, le=4, description="full-resolution 3x3 layers before the output ([30]: 2)")
    projection: int = Field(32, ge=0, description="bias-free 1x1 projection of each feature; 0 = none")
    feature_scale: float = Field(8.0, gt=0, description="multiplier on feature values before the network")
    splat_radius: int = Field(
        3, ge=0, le=16,
        description="write each keypoint's vector on a disc of this radius (pixels) instead of one pixel (0 = [30]'s one pixel)",
    )
    color: bool = Field(False, description="reconstruct RGB (SIFT carries no colour: grey is the honest default)")
    steps: int = Field(
        2400, ge=1,
        description="optimiser steps (x batch_size images seen); 2400 x 8 = 19,200 crops (~4.6 steps/s seen on 2 idle CPU cores, so ~9 min): "
        "SSIM on Table 1's crops rose .472 -> .494 from 600 to 2400 steps (docs/inversion.md, 'Training budget')",
    )
    batch_size: int = Field(8, ge=1)
    lr: float = Field(2e-3, gt=0)
    ssim_weight: float = Field(1.0, ge=0, description="weight of the (1 - SSIM) term beside L1")
    l1_weight: float = Field(1.0, ge=0)
    gradient_weight: float = Field(
        0.0, ge=0, description="weight of an L1 term on image gradients (kornia spatial_gradient): rewards edges"
    )
    ssim_window: int = Field(7, ge=3)
    keep_min: float = Field(
        0.5, gt=0, le=1,
        description="keep a random keep_min..keep_max share of keypoints per training crop ([30]: 5-100%; "
        "50-100% measured better with splatting, .472 vs .454 on Table 1's crops, docs/inversion.md)",
    )
    keep_max: float = Field(1.0, gt=0, le=1)
    scales: tuple[float, ...] = Field((1.0,), description="rescale factors of the public images (augmentation)")
    flip: bool = Field(True, description="also train on horizontally flipped public images")
    seed: int = Field(0, description="training seed; fixed (not the cell's) so every cell shares one network")
    accelerator: str = "cpu"
    devices: int | str = 1
    precision: Literal["32", "bf16-mixed", "16-mixed"] = "32"
    max_minutes: float | None = Field(
        None, gt=0,
        description="stop training after this wall time (None, the default: train every step). A capped network "
        "depends on how fast the machine ran: it warns and is not cached",
    )
    threads: int | None = Field(
        2, ge=1,
        description="torch CPU threads while training: a fixed count gives the same network on any machine of the "
        "same instruction set, whatever its cores or load (None = torch's default, one per core: the network then "
        "depends on the machine)",
    )

    @model_validator(mode="after")
    def _check(self) -> InversionConfig:
        if self.keep_min > self.keep_max:
            raise ValueError(f"keep_min ({self.keep_min}) must be <= keep_max ({self.keep_max})")
        if self.crop % (2**self.depth):
            raise ValueError(f"crop ({self.crop}) must be a multiple of the network stride 2**depth = {2**self.depth}")
        if not self.scales or any(s <= 0 for s in self.scales):
            raise ValueError(f"scales must be positive factors; got {self.scales}")
        if self.l1_weight == 0 and self.ssim_weight == 0 and self.gradient_weight == 0:
            raise ValueError("at least one of l1_weight, ssim_weight and gradient_weight must be > 0")
        return self

    @property
    def stride(self) -> int:
        return 2**self.depth

    def network_params(self) -> dict:
        """The fields that shape the network (stored in every checkpoint)."""
        return {
            "depth": self.depth,
            "width": self.width,
            "max_width": self.max_width,
            "projection": self.projection,
            "feature_scale": self.feature_scale,
            "head_layers": self.head_layers,
            "splat_radius": self.splat_radius,
        }


class RefineConfig(PluginConfig):
    """Refinement of a reconstruction by descriptor matching (:mod:`.refine`; docs/inversion.md, 'Refinement by descriptor matching').

    Defaults: the best of three (prior, TV) settings compared on Table 1's crops
    ((20, 0), (1, 0.3), (5, 1); paired SSIM +.007, +.028, +.031 over the U-Net alone) at 100
    Adam steps; ``steps: 0`` turns the stage off. For descriptors recovered from a lifted
    release, matching the subspace alone (``points: none``) beat matching the recovery's
    estimate, the estimate plus the subspace, or the nearest candidate, with or without the
    subspace (clustering on Table 1's crops, docs/inversion.md, 'What the refinement matches'), and so it did on the
    attacker's own held-out photos (``benchmarks/probes/inversion_refine_calibration.py``), where a
    subspace weight of 3 beat 1 (paired SSIM +.084 vs +.065 over the network alone) and 200
    steps did not beat 100 -- hence the defaults.
    """

    steps: int = Field(100, ge=0, description="Adam steps on the pixels (0 = no refinement)")
    lr: float = Field(0.01, gt=0, description="Adam step size (pixel values in [0, 1])")
    prior_weight: float = Field(5.0, ge=0, description="weight of mean (x - x0)^2: stay near the network's estimate")
    tv_weight: float = Field(1.0, ge=0, description="weight of anisotropic total variation (Mahendran and Vedaldi 2015)")
    patch_size: int = Field(16, ge=4, le=64, description="samples a side of each keypoint's frame for the SIFT descriptor")
    chunk_keypoints: int = Field(16384, ge=1, description="images are optimised together up to this many keypoints")
    subspace_weight: float = Field(
        3.0, ge=0, description="weight of dist(f_k(x), D_k)^2 when the release holds each descriptor's lifted subspace "
        "D_k (dia; descriptors recovered by database / clustering / nearest); 0 = ignore the subspaces")
    points: Literal["estimate", "candidates", "none"] = Field(
        "none", description="which recovered descriptors to match besides the subspace: the recovery's estimate, "
        "the nearest of its candidate set (clustering's k candidates), or none (the subspace alone)")
