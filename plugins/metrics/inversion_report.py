"""Metric ``reconstruction-report``: the grid PNG and per-image CSV of an image reconstruction.

Only a metric sees both the truth and the estimate, so the "original | reconstruction"
grid and the per-image MAE/SSIM/PSNR table of the inversion attacks (LDP-Feat (ICCV 2023) Table 1,
Figs. 3-4) are written here, under the cell's artifact folder (logged to MLflow). Scores:
the median and the worst per-image SSIM (the mean is the generic ``ssim`` metric's).
"""

from __future__ import annotations

import numpy as np

from vispriv.harness import CellContext, Images, Metric
from vispriv.harness.artifacts import (
    RECONSTRUCTION_SAMPLE,
    save_csv,
    save_image_grid,
    save_reconstruction_sample,
    spread_indices,
)
from vispriv.plugins.metrics.image_quality import per_image_quality


class ReconstructionReport(Metric):
    """Writes reconstruction_grid.png, reconstruction_per_image.csv and the report's sample; scores median/min SSIM.

    The grid and the sample show ``max_grid`` images spread evenly over the estimate's
    ids (e.g. two crops of each of four photos), the same ones in every cell of a dataset.
    """

    name = "reconstruction-report"
    version = "1.0"
    scenario = "descriptor-release"
    consumes = (Images,)
    higher_is_better = {"ssim_median": True, "ssim_min": True}
    max_grid: int = 8

    def score(self, truth: Images, estimate: Images, ctx: CellContext) -> dict[str, float]:
        rows = per_image_quality(truth, estimate)
        ssim = np.array([r["ssim"] for r in rows], dtype=np.float64)
        if ctx.artifact_dir is not None:
            save_csv(ctx.artifact("reconstruction_per_image.csv"), rows)
            index = {id_: i for i, id_ in enumerate(truth.ids)}
            picked = spread_indices(len(estimate.ids), self.max_grid)
            shown = [estimate.ids[k] for k in picked]
            originals = truth.images[[index[i] for i in shown]]
            estimates = estimate.images[picked]
            if estimates.shape[-1] == 1:
                originals = originals.mean(axis=-1, keepdims=True)
            save_image_grid(ctx.artifact("reconstruction_grid.png"), [originals, estimates],
                            ["original", "reconstruction"], [f"{i}\nSSIM {ssim[k]:.2f}" for k, i in zip(picked, shown)])
            save_reconstruction_sample(ctx.artifact(RECONSTRUCTION_SAMPLE), shown, originals, estimates)
        return {"ssim_median": float(np.median(ssim)) if len(ssim) else 0.0,
                "ssim_min": float(ssim.min()) if len(ssim) else 0.0}
