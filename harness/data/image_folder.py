"""Images from a user's folder of JPEG/PNG files (e.g. a MegaDepth or Places365 subset).

Files are found recursively, sorted by relative path, read with Pillow, centre-cropped to
a square and resized to ``size`` (RGB in [0, 1]; grey and RGBA converted). A file that
cannot be read (empty, not an image, truncated, a decompression bomb) is skipped with one
warning that counts and names every such file with the reason; a folder with no readable
image is an :class:`InputError`.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from vispriv.harness.data.bundled import square_resize, to_rgb_float
from vispriv.harness.errors import ConfigError, InputError
from vispriv.harness.hashing import stable_hash
from vispriv.harness.payloads import Images

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


def list_images(root: str | Path) -> list[Path]:
    """Image files (by suffix, any case) under ``root``, sorted by relative path."""
    folder = Path(root).expanduser()
    if not folder.is_dir():
        raise ConfigError(f"image folder {str(folder)!r} does not exist or is not a directory")
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


#: Pillow modes whose pixel array :func:`to_rgb_float` reads as it is (grey, RGB, RGBA, 16-bit
#: and float grey); every other mode (CMYK and YCbCr JPEGs, palettes, LAB, HSV, 1-bit) is
#: converted to RGB(A) by Pillow first, since its channels are not red, green and blue.
_DIRECT_MODES = frozenset({"L", "RGB", "RGBA", "I;16", "I;16B", "I;16L", "F"})


def read_image(path: Path) -> np.ndarray:
    """One image file as float RGB (H, W, 3) in [0, 1].

    32-bit integer images (mode ``I``, as Pillow opens many 16-bit PNGs) are read on the
    16-bit scale.
    """
    from PIL import Image

    with Image.open(path) as opened:
        opened.load()
        if opened.mode == "I":
            return to_rgb_float(np.clip(np.asarray(opened), 0, 65535).astype(np.uint16))
        im = opened if opened.mode in _DIRECT_MODES else opened.convert(
            "RGBA" if opened.has_transparency_data or "A" in opened.getbands() else "RGB")
        arr = np.asarray(im)
    return to_rgb_float(arr)


def load_image_folder(
    root: str | Path, size: int, limit: int | None = None, files: list[Path] | None = None
) -> Images:
    """The readable images under ``root`` (or the given ``files``) as square RGB Images of side ``size``.

    Ids are paths relative to ``root``. Unreadable files are skipped with a warning naming them.
    """
    root = Path(root).expanduser()
    return load_image_splits(root, size, {"all": list_images(root) if files is None else list(files)}, limit)["all"]


def load_image_splits(root: str | Path, size: int, splits: dict[str, list[Path]], limit: int | None = None) -> dict[str, Images]:
    """Each split's files (under ``root``) read as by :func:`load_image_folder`, at most ``limit`` per split.

    The unreadable files of every split are named in one warning (one line for one cause);
    a split with no readable image is an :class:`InputError`.
    """
    root = Path(root).expanduser()
    read = {name: _read_images(root, paths, size, limit) for name, paths in splits.items()}
    bad = [b for _, _, skipped in read.values() for b in skipped]
    if bad:
        warnings.warn(f"skipped {len(bad)} unreadable image file(s) in {root}: {', '.join(bad)}", stacklevel=3)
    out = {}
    for name, (arrays, ids, _) in read.items():
        if not arrays:
            raise InputError(f"no readable JPEG/PNG image in {str(root)!r}")
        out[name] = Images(np.stack(arrays), ids)
    return out


def _read_images(root: Path, paths: list[Path], size: int, limit: int | None) -> tuple[list[np.ndarray], list[str], list[str]]:
    """(square images, their ids, ``"file (reason)"`` of each unreadable one) of ``paths``."""
    arrays, ids, bad = [], [], []
    for path in paths:
        if limit is not None and len(arrays) >= limit:
            break
        rel = str(path.relative_to(root)) if path.is_relative_to(root) else path.name
        try:
            arrays.append(square_resize(read_image(path), size))
            ids.append(rel)
        except Exception as exc:  # noqa: BLE001 -- any decoder failure means "unreadable"
            bad.append(f"{rel} ({unreadable_reason(path, exc)})")
    return arrays, ids, bad


def unreadable_reason(path: Path, exc: Exception) -> str:
    """Why ``path`` could not be read, in a few words (an empty file, not an image, ...)."""
    from PIL import Image, UnidentifiedImageError

    try:
        if path.stat().st_size == 0:
            return "empty file"
    except OSError as err:
        return f"cannot stat: {err.strerror or err}"
    if isinstance(exc, Image.DecompressionBombError):
        return "too many pixels (decompression bomb)"
    if isinstance(exc, UnidentifiedImageError):
        return "not a JPEG/PNG image"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:80]}" if text else type(exc).__name__


def split_files(paths: list[Path], root: Path, test_fraction: float) -> dict[str, list[Path]]:
    """A fixed split of files into ``test`` / ``lifting`` / ``public`` by a hash of their relative path.

    Adding files to the folder never moves an existing file to another split.
    """
    out: dict[str, list[Path]] = {"test": [], "lifting": [], "public": []}
    for p in paths:
        h = int(stable_hash(str(p.relative_to(root)), length=8), 16)
        if (h % 10_000) / 10_000 < test_fraction:
            out["test"].append(p)
        else:
            out["lifting" if (h // 10_000) % 2 == 0 else "public"].append(p)
    return out
