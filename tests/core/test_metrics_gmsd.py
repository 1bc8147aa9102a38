"""GMSD (Xue et al. 2014) against the paper's equations written out pixel by pixel."""

from __future__ import annotations

import numpy as np
from skimage import data
from skimage.filters import gaussian

from vispriv.harness import CellContext, Images
from vispriv.plugins.metrics.image_quality import GMSD, GMSD_C


def _gmsd_by_loops(a: np.ndarray, b: np.ndarray) -> float:
    """The paper's definition with explicit loops: 2 x 2 block means (zeros past an odd edge), Prewitt / 3
    with zeros outside, GMS per pixel, its sample standard deviation."""
    def magnitude(img: np.ndarray) -> np.ndarray:
        h, w = (img.shape[0] + 1) // 2, (img.shape[1] + 1) // 2
        small = np.zeros((h, w))
        for i in range(h):
            for j in range(w):
                block = [img[y, x] if y < img.shape[0] and x < img.shape[1] else 0.0
                         for y in (2 * i, 2 * i + 1) for x in (2 * j, 2 * j + 1)]
                small[i, j] = sum(block) / 4.0
        out = np.zeros((h, w))
        for i in range(h):
            for j in range(w):
                def at(y: int, x: int) -> float:
                    return small[y, x] if 0 <= y < h and 0 <= x < w else 0.0
                gx = sum(at(i + d, j - 1) - at(i + d, j + 1) for d in (-1, 0, 1)) / 3.0
                gy = sum(at(i - 1, j + d) - at(i + 1, j + d) for d in (-1, 0, 1)) / 3.0
                out[i, j] = np.hypot(gx, gy)
        return out

    ma, mb = magnitude(a), magnitude(b)
    gms = (2 * ma * mb + GMSD_C) / (ma**2 + mb**2 + GMSD_C)
    return float(np.std(gms, ddof=1))


def _score(truth: np.ndarray, estimate: np.ndarray) -> dict[str, float]:
    ids = [f"i{k}" for k in range(len(truth))]
    return GMSD().score(Images(truth, ids), Images(estimate, ids), CellContext())


def test_gmsd_matches_the_equations_by_loops_on_odd_sizes():
    rng = np.random.default_rng(0)
    truth, estimate = rng.random((3, 9, 7, 1)), rng.random((3, 9, 7, 1))
    expected = [_gmsd_by_loops(t[..., 0], e[..., 0]) for t, e in zip(truth, estimate)]
    got = _score(truth, estimate)
    assert np.isclose(got["gmsd"], np.mean(expected), rtol=1e-10)
    assert np.isclose(got["gmsd_se"], np.std(expected, ddof=1) / np.sqrt(3), rtol=1e-10)


def test_gmsd_is_zero_for_identical_images_and_grows_with_blur():
    photo = data.camera()[::4, ::4].astype(float)[..., None] / 255.0
    assert _score(photo[None], photo[None])["gmsd"] == 0.0
    blurred = [_score(photo[None], gaussian(photo, sigma=s, channel_axis=-1)[None])["gmsd"] for s in (0.5, 1.0, 2.0, 4.0)]
    assert blurred == sorted(blurred) and blurred[0] > 0.0
