"""Photos read for feature extraction, downscaled to at most ``max_side`` px on the longer side.

Shared by the benchmark readers (HPatches, visual localisation): keypoints found on the
downscaled photo are mapped back to the photo's own pixels by the caller, with the factor
returned here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vispriv.harness.data.image_folder import read_image
from vispriv.harness.errors import InputError


def read_at_most(path: Path, max_side: int | None, what: str = "photo") -> tuple[np.ndarray, float, tuple[int, int]]:
    """(image in [0, 1] RGB, factor f applied, original (H, W)); f = 1 when no resize was needed.

    A photo the decoder cannot read is one ``InputError`` naming ``what`` and the file.
    """
    from skimage.transform import resize

    try:
        image = read_image(path)
    except Exception as exc:  # noqa: BLE001 -- any decoder failure means "unreadable"
        raise InputError(f"{what} {path} cannot be read ({type(exc).__name__})") from None
    h0, w0 = image.shape[:2]
    if max_side is None or max(h0, w0) <= max_side:
        return image, 1.0, (h0, w0)
    f = max_side / max(h0, w0)
    h, w = max(1, round(h0 * f)), max(1, round(w0 * f))
    return resize(image, (h, w), anti_aliasing=True, preserve_range=True).astype(np.float32), f, (h0, w0)
