"""Share of reconstructions a person would recognise, and the gallery of truth vs reconstruction.

Gradient-inversion papers count an image as leaked when its reconstruction is close enough to
be recognised; PSNR >= 20 dB is the threshold used here by default (a setting). The metric
scores images after the core's assignment of unordered batches (vispriv.harness.alignment) and
logs a sample of (truth, reconstruction) pairs for the report's side-by-side gallery.
Perceptual distances such as LPIPS are not offered: LPIPS' AlexNet weights are downloaded from
the internet at first use, and nothing in vispriv downloads at run time.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from pydantic import Field

from vispriv.harness import Anchor, Anchors, CellContext, Images, Metric, PluginConfig
from vispriv.harness.artifacts import RECONSTRUCTION_SAMPLE, save_reconstruction_sample
from vispriv.plugins.metrics.image_quality import RECOGNISABLE_DB, _paired, per_image_quality


class RecognisableConfig(PluginConfig):
    threshold_db: float = Field(RECOGNISABLE_DB, gt=0, description="PSNR (dB) from which a reconstruction counts as recognisable")
    gallery: int = Field(8, ge=0, le=64, description="(truth, reconstruction) pairs logged for the report's gallery")


class RecognisableShare(Metric):
    """Share of images reconstructed with PSNR >= threshold (default 20 dB), and the median PSNR."""

    name = "recognisable"
    version = "1.0"
    scenario = "any"
    Config = RecognisableConfig
    consumes = (Images,)
    higher_is_better: ClassVar[dict[str, bool]] = {"recognisable_share": True, "psnr_median": True}
    headline = ("recognisable_share", "psnr_median")

    def anchors(self, truth: Images, estimate: Images) -> dict[str, Anchors]:
        recognisable = Anchor(self.config.threshold_db, "the recognisable threshold")
        return {"recognisable_share": Anchors(Anchor(0.0, "none recognisable"), Anchor(1.0, "all recognisable")),
                "psnr_median": Anchors(success=recognisable)}

    def score(self, truth: Images, estimate: Images, ctx: CellContext) -> dict[str, float]:
        cfg: RecognisableConfig = self.config
        values = np.array([float(row["psnr"]) for row in per_image_quality(truth, estimate, ("psnr",))])
        if cfg.gallery and ctx.artifact_dir is not None:
            t, e = _paired(truth, estimate)
            shown = min(cfg.gallery, len(t))
            save_reconstruction_sample(ctx.artifact(RECONSTRUCTION_SAMPLE), estimate.ids[:shown], t[:shown], e[:shown])
        return {
            "recognisable_share": float(np.mean(values >= cfg.threshold_db)),
            "psnr_median": float(np.median(np.minimum(values, 100.0))),
        }


class FaithfulConfig(PluginConfig):
    threshold_db: float = Field(30.0, gt=0, description="PSNR (dB) from which a reconstruction counts as faithful")


class FaithfulShare(Metric):
    """Share of images reconstructed with PSNR >= threshold (default 30 dB): near-copies, beyond recognisable.

    The stricter companion of ``recognisable`` for attacks that copy images out rather than
    approximate them (the imprint attack, Fowl et al., ICLR 2022, recovers single images to
    float precision); scored on the same assignment of unordered sets.
    """

    name = "faithful"
    version = "1.0"
    scenario = "any"
    Config = FaithfulConfig
    consumes = (Images,)
    higher_is_better: ClassVar[dict[str, bool]] = {"faithful_share": True}
    headline = ("faithful_share",)

    def anchors(self, truth: Images, estimate: Images) -> dict[str, Anchors]:
        return {"faithful_share": Anchors(Anchor(0.0, "none faithful"), Anchor(1.0, "all faithful"))}

    def score(self, truth: Images, estimate: Images, ctx: CellContext) -> dict[str, float]:
        cfg: FaithfulConfig = self.config
        values = np.array([float(row["psnr"]) for row in per_image_quality(truth, estimate, ("psnr",))])
        return {"faithful_share": float(np.mean(values >= cfg.threshold_db))}
