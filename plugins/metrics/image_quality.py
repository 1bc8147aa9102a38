"""Image-quality metrics of a reconstruction against the true image: MAE, SSIM, PSNR, GMSD.

All take images in [0, 1] with ``data_range=1`` stated explicitly, use scikit-image's
implementations for SSIM and PSNR, and report the mean over images (and its standard
error, ``*_se``, so that gaps between attacks can be judged). GMSD (Xue, Zhang, Mou and
Bovik, "Gradient magnitude similarity deviation: a highly efficient perceptual image
quality index", IEEE TIP 2014) compares where the edges are and how strong, blind to
brightness: see :func:`_gmsd`.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from vispriv.harness import Anchor, Anchors, CellContext, Images, Metric, mean_se
from vispriv.harness.artifacts import save_csv
from vispriv.harness.errors import InputError
from vispriv.harness.similarity import ssim


def _paired(truth: Images, estimate: Images) -> tuple[np.ndarray, np.ndarray]:
    """Align estimate to truth by id and check shapes; grey estimates of RGB truth are compared in grey."""
    index = {id_: i for i, id_ in enumerate(truth.ids)}
    missing = [i for i in estimate.ids if i not in index]
    if missing:
        raise InputError(f"estimate ids not in truth: {missing[:3]}")
    t = truth.images[[index[i] for i in estimate.ids]]
    e = estimate.images
    if t.shape[-1] != e.shape[-1]:
        t = t.mean(axis=-1, keepdims=True)
        e = e.mean(axis=-1, keepdims=True)
    if t.shape != e.shape:
        raise InputError(f"estimate images {e.shape} do not match truth {t.shape}")
    return t, np.clip(e, 0.0, 1.0)


def _mae(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(np.abs(a - b)))


def _ssim(a: np.ndarray, b: np.ndarray) -> float:
    """scikit-image SSIM (Wang et al. 2004), data_range=1, colour images compared channel by
    channel; the 7-pixel window shrinks to the largest odd size that fits images smaller than
    7 pixels (:func:`vispriv.harness.similarity.ssim`, which the report's gallery quotes too)."""
    return ssim(a, b)


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    from skimage.metrics import peak_signal_noise_ratio

    if np.array_equal(a, b):
        return float("inf")
    return float(peak_signal_noise_ratio(a, b, data_range=1.0))


#: GMSD's stability constant: T = 170 for images in [0, 255] (Xue et al. 2014), i.e. 170 / 255^2 in [0, 1].
GMSD_C = 170.0 / 255.0**2
#: Prewitt's horizontal derivative over 3 (Xue et al. 2014); the vertical one is its transpose.
PREWITT_X = np.array([[1.0, 0.0, -1.0]] * 3) / 3.0


def gradient_magnitude(image: np.ndarray) -> np.ndarray:
    """GMSD's gradient magnitude of a grey (H, W) image: 2 x 2 block means (the
    paper's down-sampling by 2, an odd last row or column padded with zeros), then Prewitt
    derivatives with zeros outside the image."""
    from scipy.ndimage import correlate

    h, w = image.shape
    padded = np.zeros((h + h % 2, w + w % 2))
    padded[:h, :w] = image
    small = padded.reshape(padded.shape[0] // 2, 2, padded.shape[1] // 2, 2).mean(axis=(1, 3))
    gx = correlate(small, PREWITT_X, mode="constant")
    gy = correlate(small, PREWITT_X.T, mode="constant")
    return np.sqrt(gx**2 + gy**2)


def _gmsd(a: np.ndarray, b: np.ndarray) -> float:
    """GMSD (Xue et al. 2014): the standard deviation (N - 1) over pixels of the
    gradient magnitude similarity ``(2 m_a m_b + c) / (m_a^2 + m_b^2 + c)``, ``c`` =
    :data:`GMSD_C`. 0 for identical images, larger = more different (at most .5). Colour
    images are compared in their channel mean (the paper's metric is for grey images)."""
    ma, mb = gradient_magnitude(a.mean(axis=-1)), gradient_magnitude(b.mean(axis=-1))
    gms = (2.0 * ma * mb + GMSD_C) / (ma**2 + mb**2 + GMSD_C)
    return float(gms.std(ddof=1)) if gms.size > 1 else 0.0


QUALITY = {"mae": _mae, "ssim": _ssim, "psnr": _psnr, "gmsd": _gmsd}


def per_image_quality(
    truth: Images, estimate: Images, keys: tuple[str, ...] = ("mae", "ssim", "psnr")
) -> list[dict[str, float | str]]:
    """MAE, SSIM and PSNR (or the ``keys`` asked for) of each estimated image, for per-image CSVs."""
    t, e = _paired(truth, estimate)
    return [
        {"id": estimate.ids[i], **{k: QUALITY[k](a, b) for k in keys}} for i, (a, b) in enumerate(zip(t, e))
    ]


#: PSNR (dB) from which a reconstruction counts as recognisable (the ``recognisable`` metric's default).
RECOGNISABLE_DB = 20.0


class _ImageMetric(Metric):
    scenario = "any"
    consumes = (Images,)
    key: ClassVar[str] = ""
    #: The value from which the attack has succeeded (the colour scale's red end), if one is known.
    success: ClassVar[Anchor | None] = None

    def anchors(self, truth: Images, estimate: Images) -> dict[str, Anchors]:
        return {self.key: Anchors(success=self.success)} if self.success else {}

    def score(self, truth: Images, estimate: Images, ctx: CellContext) -> dict[str, float]:
        rows = per_image_quality(truth, estimate, (self.key,))
        if ctx.artifact_dir is not None:  # per-image values: `vispriv report --paired` compares cells image by image
            save_csv(ctx.artifact(f"{self.key}_per_image.csv"), rows)
        values = [float(row[self.key]) for row in rows]
        finite = [v for v in values if np.isfinite(v)]
        mean, se = mean_se(finite) if finite else (float("inf"), 0.0)
        out = {self.key: mean, f"{self.key}_se": se}
        if self.key == "psnr":
            out["psnr_exact_share"] = 1.0 - len(finite) / len(values)
        return out


class MAE(_ImageMetric):
    """Mean absolute error per pixel, images in [0, 1] (lower is better)."""

    name = "mae"
    version = "1.0"
    key = "mae"
    higher_is_better = {"mae": False, "mae_se": False}
    success = Anchor(0.0, "identical")


class SSIM(_ImageMetric):
    """Structural similarity, scikit-image, data_range=1 (higher is better)."""

    name = "ssim"
    version = "1.0"
    key = "ssim"
    higher_is_better = {"ssim": True, "ssim_se": False}
    headline = ("ssim",)
    success = Anchor(1.0, "identical")


class GMSD(_ImageMetric):
    """Gradient magnitude similarity deviation (Xue et al. 2014), lower is better.

    SSIM rewards a smooth estimate at the right brightness; GMSD only asks whether edges are
    where the truth has them, and as strong, which is what a person reads a reconstruction
    by (docs/results.md: refined LDP-Feat reconstructions draw the scene's edges that SSIM
    scores below the network's smooth blobs).
    """

    name = "gmsd"
    version = "1.0"
    key = "gmsd"
    higher_is_better = {"gmsd": False, "gmsd_se": False}


class PSNR(_ImageMetric):
    """Peak signal-to-noise ratio in dB, scikit-image, data_range=1.

    Identical images have infinite PSNR; the mean is over the finite values (and
    ``psnr_exact_share`` says how many were identical), so one perfect image does not
    make the mean infinite.
    """

    name = "psnr"
    version = "1.0"
    key = "psnr"
    higher_is_better = {"psnr": True, "psnr_se": False, "psnr_exact_share": True}
    headline = ("psnr",)
    success = Anchor(RECOGNISABLE_DB, "the recognisable threshold")
