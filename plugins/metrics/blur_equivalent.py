"""Yardstick metrics of an image reconstruction: SSIM read as a blur, and the oracle floor.

* ``blur-equivalent`` -- per reconstruction, the Gaussian sigma (px) at which the blurred
  true image has the reconstruction's SSIM against the truth, found by bisection
  (scikit-image's ``gaussian`` and ``structural_similarity``, the ``ssim`` metric's
  settings). Reported as ``blur_equivalent_px`` (median over images; a median, since
  capped values make a mean meaningless), ``blur_equivalent_capped`` (share of images at
  the cap) and a per-image CSV. "As revealing as the photo blurred by 5 px" reads better
  than a bare SSIM.

  Choice: the blurred truth is **not** shifted to the public mean brightness. A metric
  sees only the truth and the estimate, not the public images; and the unshifted blur is
  the stricter ruler (it keeps the crop's own mean, so a given SSIM maps to a larger sigma
  than with the shifted one -- the reading errs towards "less revealing").
  SSIM(blur(truth, sigma), truth) decreases with sigma on natural images; bisection assumes
  it. SSIM >= 1 (up to ``tolerance``) gives 0; an SSIM at or below that of the blur at
  ``max_sigma`` gives ``max_sigma`` (the cap, counted in ``blur_equivalent_capped``).

* ``oracle-flat`` -- ORACLE, not an attack: the SSIM (mean and standard error) of each
  true image's own mean brightness as a flat estimate. No attack may see the private
  image, so this floor is a metric computed from the truth alone; it is the same number
  for every attack row of a dataset, as a yardstick beside ``flat-grey``.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from vispriv.harness import CellContext, Images, Metric, PluginConfig, mean_se
from vispriv.harness.artifacts import save_csv
from vispriv.plugins.metrics.image_quality import _paired, _ssim


def _blurred(truth: np.ndarray, sigma: float) -> np.ndarray:
    from skimage.filters import gaussian

    if sigma <= 0:
        return truth
    return gaussian(truth, sigma=sigma, channel_axis=-1, preserve_range=True).astype(truth.dtype)


def blur_equivalent(truth: np.ndarray, ssim: float, max_sigma: float = 32.0, tolerance: float = 0.01) -> float:
    """The sigma in [0, max_sigma] with SSIM(gaussian(truth, sigma), truth) = ``ssim``, by bisection.

    ``truth`` is one (H, W, C) image in [0, 1]; the result is within ``tolerance`` px.
    """
    if ssim >= 1.0 - 1e-6:
        return 0.0
    if _ssim(truth, _blurred(truth, max_sigma)) >= ssim:
        return float(max_sigma)
    lo, hi = 0.0, float(max_sigma)
    while hi - lo > tolerance:
        mid = 0.5 * (lo + hi)
        if _ssim(truth, _blurred(truth, mid)) > ssim:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


class BlurEquivalent(Metric):
    """Median Gaussian sigma (px) whose blur of the truth has the reconstruction's SSIM; per-image CSV."""

    class Config(PluginConfig):
        max_sigma: float = Field(32.0, gt=0.0, description="cap of the bisection (px); images at it are counted")
        tolerance: float = Field(0.01, gt=0.0, description="bisection stops when the bracket is this narrow (px)")

    name = "blur-equivalent"
    version = "1.0"
    scenario = "any"
    description = "SSIM read as the Gaussian blur (px) of the truth with the same SSIM (bisection)"
    consumes = (Images,)
    higher_is_better = {"blur_equivalent_px": False, "blur_equivalent_capped": False}

    def score(self, truth: Images, estimate: Images, ctx: CellContext) -> dict[str, float]:
        t, e = _paired(truth, estimate)
        cfg = self.config
        rows = []
        for id_, a, b in zip(estimate.ids, t, e):
            s = _ssim(a, b)
            rows.append({"id": id_, "ssim": s, "blur_equivalent_px": blur_equivalent(a, s, cfg.max_sigma, cfg.tolerance)})
        if ctx.artifact_dir is not None:
            save_csv(ctx.artifact("blur_equivalent_per_image.csv"), rows)
        sigmas = np.array([r["blur_equivalent_px"] for r in rows], dtype=np.float64)
        if not len(sigmas):
            return {"blur_equivalent_px": 0.0, "blur_equivalent_capped": 0.0}
        return {"blur_equivalent_px": float(np.median(sigmas)),
                "blur_equivalent_capped": float(np.mean(sigmas >= cfg.max_sigma))}


class OracleFlat(Metric):
    """ORACLE floor: SSIM of each true image's own mean brightness as a flat estimate (needs the truth)."""

    name = "oracle-flat"
    version = "1.0"
    scenario = "any"
    description = "ORACLE: SSIM of a flat image at each true image's own mean (no attacker can reach it)"
    consumes = (Images,)
    higher_is_better = {"oracle_flat_ssim": True, "oracle_flat_ssim_se": False}

    def score(self, truth: Images, estimate: Images, ctx: CellContext) -> dict[str, float]:
        t, _ = _paired(truth, estimate)
        values = [_ssim(a, np.full_like(a, a.mean())) for a in t]
        mean, se = mean_se(values) if values else (0.0, 0.0)
        return {"oracle_flat_ssim": mean, "oracle_flat_ssim_se": se}
