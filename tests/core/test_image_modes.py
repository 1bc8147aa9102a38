"""Every image file a user's folder may hold is read as its colours, whatever Pillow's mode.

CMYK JPEGs (print workflows), palette PNGs, 1-bit scans and 16-bit PNGs open in Pillow modes
whose channels are not red, green and blue; each is read back to the RGB it was written from.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from vispriv.harness.data.image_folder import read_image

COLOUR = np.array([200, 40, 90], np.uint8)


def _solid(side: int = 16) -> np.ndarray:
    return np.broadcast_to(COLOUR, (side, side, 3)).copy()


@pytest.mark.parametrize("mode, suffix", [("CMYK", ".jpg"), ("RGB", ".png")])
def test_a_colour_photo_reads_as_its_rgb_in_every_mode(tmp_path, mode, suffix):
    path = tmp_path / f"photo{suffix}"
    Image.fromarray(_solid()).convert(mode).save(path, **({"quality": 100} if suffix == ".jpg" else {}))
    with Image.open(path) as im:
        assert im.mode == mode
    pixel = read_image(path)[8, 8] * 255
    # a CMYK file read as RGBA (its first three channels) gave C, M, Y = 55, 215, 165
    assert np.abs(pixel - COLOUR).max() <= 3, pixel


def test_a_palette_png_reads_as_its_palette_colour(tmp_path):
    path = tmp_path / "palette.png"
    Image.fromarray(_solid()).quantize(colors=4).save(path)
    with Image.open(path) as im:
        assert im.mode == "P"
        expected = np.asarray(im.convert("RGB"))[0, 0]
    assert np.array_equal(np.round(read_image(path)[0, 0] * 255), expected)


def test_sixteen_bit_grey_is_read_on_the_sixteen_bit_scale(tmp_path):
    grey = np.full((8, 8), 32768, np.int32)
    path = tmp_path / "deep.tif"
    Image.fromarray(grey).save(path)  # mode I: 32-bit integers holding 16-bit values
    with Image.open(path) as im:
        assert im.mode == "I"
    value = read_image(path)[0, 0]
    assert np.allclose(value, 32768 / 65535)  # on the 32-bit scale it read 1.5e-5: a black image
