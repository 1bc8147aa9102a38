"""Natural photos shipped inside installed packages: scikit-image, scikit-learn, matplotlib.

Nothing is downloaded: every image is a file inside an installed wheel
(:data:`BUNDLED_SOURCES`, by name). How a scenario splits them is the scenario's choice
(e.g. :mod:`vispriv.plugins.descriptor_release.splits`, after LDP-Feat (ICCV 2023) section 6.1); the core
only loads them. The rectified motorcycle stereo pair with its ground-truth disparity is
served by :func:`load_stereo_motorcycle` to utility evaluators.

Every photo is centre-cropped to a square, resized (anti-aliased) to ``size`` and
returned as RGB in [0, 1]: grey photos are replicated to three channels, RGBA photos lose
their alpha channel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from vispriv.harness.errors import ConfigError, InputError
from vispriv.harness.payloads import Images


def _skimage(name: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        import skimage.data

        return getattr(skimage.data, name)()

    return load


def _sklearn(filename: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        from sklearn.datasets import load_sample_image

        return load_sample_image(filename)

    return load


def _matplotlib(filename: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        import matplotlib.cbook
        import matplotlib.image

        path = matplotlib.cbook.get_sample_data(filename, asfileobj=False)
        return np.asarray(matplotlib.image.imread(path, format=Path(filename).suffix[1:]))

    return load


def _motorcycle(side: int) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        import skimage.data

        return skimage.data.stereo_motorcycle()[side]

    return load


#: Every bundled natural photo by name.
BUNDLED_SOURCES: dict[str, Callable[[], np.ndarray]] = {
    "astronaut": _skimage("astronaut"),
    "camera": _skimage("camera"),
    "grace_hopper": _matplotlib("grace_hopper.jpg"),
    "chelsea": _skimage("chelsea"),
    "coffee": _skimage("coffee"),
    "rocket": _skimage("rocket"),
    "china": _sklearn("china.jpg"),
    "brick": _skimage("brick"),
    "coins": _skimage("coins"),
    "hubble_deep_field": _skimage("hubble_deep_field"),
    "page": _skimage("page"),
    "flower": _sklearn("flower.jpg"),
    "gravel": _skimage("gravel"),
    "grass": _skimage("grass"),
    "moon": _skimage("moon"),
    "clock": _skimage("clock"),
    "immunohistochemistry": _skimage("immunohistochemistry"),
    "retina": _skimage("retina"),
    "present": _matplotlib("Minduka_Present_Blue_Pack.png"),
    "motorcycle_left": _motorcycle(0),
    "motorcycle_right": _motorcycle(1),
}

def to_uint8(image: np.ndarray) -> np.ndarray:
    """Float pixels in [0, 1] (clipped) rounded to uint8 (round half to even, as ``np.round``)."""
    return np.round(np.clip(np.asarray(image), 0, 1) * 255).astype(np.uint8)


def to_rgb_float(image: np.ndarray) -> np.ndarray:
    """Any grey / RGB / RGBA image (uint8 or float) as float32 RGB in [0, 1], (H, W, 3)."""
    arr = np.asarray(image)
    if arr.dtype == np.uint8:
        arr = arr.astype(np.float32) / 255.0
    elif arr.dtype.kind in "ui":
        arr = arr.astype(np.float32) / float(np.iinfo(arr.dtype).max)
    elif arr.dtype == bool:
        arr = arr.astype(np.float32)
    else:
        arr = arr.astype(np.float32)
        if arr.size and arr.max() > 1.0:
            arr = arr / 255.0
    if arr.ndim == 2:
        arr = np.repeat(arr[..., None], 3, axis=-1)
    elif arr.ndim == 3 and arr.shape[-1] == 1:
        arr = np.repeat(arr, 3, axis=-1)
    elif arr.ndim == 3 and arr.shape[-1] == 4:
        arr = arr[..., :3]
    if arr.ndim != 3 or arr.shape[-1] != 3:
        raise InputError(f"cannot read an image of shape {np.shape(image)} as grey, RGB or RGBA")
    return np.clip(np.nan_to_num(arr), 0.0, 1.0)


def square_resize(image: np.ndarray, size: int) -> np.ndarray:
    """Centre-crop to a square, then resize (anti-aliased) to ``size`` x ``size``."""
    from skimage.transform import resize

    h, w = image.shape[:2]
    side = min(h, w)
    top, left = (h - side) // 2, (w - side) // 2
    crop = image[top : top + side, left : left + side]
    return resize(crop, (size, size), anti_aliasing=side > size, preserve_range=True).astype(np.float32)


def load_bundled(names: Sequence[str], size: int) -> Images:
    """The named bundled photos as square RGB :class:`Images` of side ``size`` (ids = names)."""
    if size < 16:
        raise ConfigError(f"image size must be at least 16 px; got {size}")
    unknown = [n for n in names if n not in BUNDLED_SOURCES]
    if unknown:
        raise ConfigError(f"unknown bundled images {unknown}; known: {', '.join(BUNDLED_SOURCES)}")
    arrays = [square_resize(to_rgb_float(BUNDLED_SOURCES[n]()), size) for n in names]
    return Images(np.stack(arrays) if arrays else np.zeros((0, size, size, 3), np.float32), list(names))


def grid_crops(images: Images, size: int, grid: int, disjoint: bool = False) -> Images:
    """``grid`` x ``grid`` crops of side ``size`` from each image, half a crop apart
    (``disjoint``: a whole crop apart, so no two crops share a pixel).

    The images must be :func:`crop_source_size` pixels square.
    Crop ``(r, c)`` of image ``name`` has id ``name@r,c``. ``grid = 1`` returns the images.
    """
    if grid == 1:
        return images
    stride = size if disjoint else size // 2
    crops, ids = [], []
    for img, name in zip(images.images, images.ids):
        for r in range(grid):
            for c in range(grid):
                crops.append(img[r * stride : r * stride + size, c * stride : c * stride + size])
                ids.append(f"{name}@{r},{c}")
    return Images(np.stack(crops), ids)


def crop_source_size(size: int, grid: int, disjoint: bool = False) -> int:
    """Side of the photo that ``grid`` x ``grid`` crops of ``size`` tile exactly
    (half-overlapping, or ``disjoint``)."""
    return size * grid if disjoint else size * (grid + 1) // 2


def load_stereo_motorcycle(width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rectified motorcycle pair resized to ``width`` px wide (aspect kept).

    Returns ``(left, right, disparity)``: RGB float images and the left image's disparity
    in pixels of the resized frame (a left pixel (x, y) is seen at (x - disp, y) on the
    right); unknown disparities are NaN.
    """
    import skimage.data
    from skimage.transform import resize

    left, right, disp = skimage.data.stereo_motorcycle()
    h, w = disp.shape
    height = max(1, round(h * width / w))
    scale = width / w
    left_r = resize(to_rgb_float(left), (height, width), anti_aliasing=True).astype(np.float32)
    right_r = resize(to_rgb_float(right), (height, width), anti_aliasing=True).astype(np.float32)
    d = np.where(np.isfinite(disp), disp, np.nan).astype(np.float32)
    d_r = resize(d, (height, width), order=0, anti_aliasing=False, preserve_range=True).astype(np.float32) * scale
    return left_r, right_r, d_r
