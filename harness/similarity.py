"""The one SSIM every view quotes: the ``ssim`` metric's table value and the gallery's row titles.

Structural similarity (Wang, Bovik, Sheikh and Simoncelli, IEEE TIP 2004) by scikit-image,
on (H, W, C) images in [0, 1] with ``data_range=1``, every channel compared (``channel_axis=-1``,
the mean over channels), with scikit-image's 7-pixel window shrunk to the largest odd size that
fits an image smaller than 7 pixels. The ``ssim`` metric plugin scores with this function and
:func:`vispriv.harness.artifacts.save_reconstruction_sample` records it per image, so the
gallery quotes the number the table shows for the same images.
"""

from __future__ import annotations

import numpy as np

from vispriv.harness.errors import InputError


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """SSIM of two (H, W, C) images in [0, 1] (colour: the mean over channels); 1.0 for identical images.

    Raises :class:`~vispriv.harness.errors.InputError` for images smaller than 3 x 3 pixels.
    """
    from skimage.metrics import structural_similarity

    side = min(a.shape[0], a.shape[1])
    if side < 3:
        raise InputError(f"SSIM needs images of at least 3x3 pixels; got {a.shape[0]}x{a.shape[1]}")
    win = min(7, side if side % 2 else side - 1)
    return float(structural_similarity(a, b, data_range=1.0, channel_axis=-1, win_size=win))
