"""Colour image sources of the federated deep-gradient-inversion scenario.

Every source returns :class:`ColourImages`: float32 images (N, H, W, C) in [0, 1] with
C = 1 or 3, int64 labels and class names. Nothing is ever downloaded:

* :func:`load_cifar` -- CIFAR-10 / CIFAR-100 (Krizhevsky 2009) from the user's disk, in the
  *python* layout the datasets ship as (``cifar-10-python.tar.gz`` unpacks to
  ``cifar-10-batches-py/``, ``cifar-100-python.tar.gz`` to ``cifar-100-python/``);
* :func:`load_bundled_faces` -- scikit-image's bundled ``lfw_subset`` (100 LFW faces and
  100 non-faces, 25x25 grey), a binary task;
* :func:`load_bundled_digits` -- scikit-learn's bundled handwritten digits (1,797 8x8 grey,
  ten classes), enlarged: the bundled set a small network learns, for the utility side;
* :func:`load_bundled_photos` -- fixed crops of the colour photos shipped inside
  scikit-image / scikit-learn / matplotlib (:mod:`vispriv.harness.data.bundled`), one
  class per photo: a stand-in for CIFAR when no dataset is on disk;
* :func:`load_colour_folder` -- the user's own images, one sub-folder per class, read as RGB.

``provenance`` is empty for a dataset read as it is (CIFAR, the user's folder) and says
what the images are otherwise (crops of bundled photos, resized LFW crops), so a report can
tell a stand-in from the benchmark's data.
"""

from __future__ import annotations

import functools
import math
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from vispriv.harness.data.bundled import BUNDLED_SOURCES, grid_crops, square_resize, to_rgb_float
from vispriv.harness.errors import ConfigError, InputError
from vispriv.harness.payloads import Images
from vispriv.plugins.federated.data import load_digits_source, read_class_folders


@dataclass
class ColourImages:
    """Images float32 (N, H, W, C) in [0, 1] (C = 1 or 3), labels int64 (N,), class_names.

    ``provenance`` is empty for real data read as it is; otherwise it says what the images
    are (e.g. ``'bundled photos: 32x32 crops of ...'``).
    """

    images: np.ndarray
    labels: np.ndarray
    class_names: list[str]
    provenance: str = ""


# --------------------------------------------------------------------------- CIFAR

#: Files of ``cifar-10-batches-py/`` and ``cifar-100-python/`` as the datasets ship them.
CIFAR10_DIR = "cifar-10-batches-py"
CIFAR100_DIR = "cifar-100-python"
CIFAR10_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR10_TEST = "test_batch"
CIFAR10_META = "batches.meta"
CIFAR100_FILES = ("train", "test", "meta")
CIFAR_SIDE = 32
CIFAR_ROW = 3 * CIFAR_SIDE * CIFAR_SIDE  # 3072 bytes: the R, G, B planes of 32x32, row-major

_EXPECTED = (
    f"{CIFAR10_DIR}/ ({', '.join(CIFAR10_TRAIN)}, {CIFAR10_TEST}, {CIFAR10_META}) or "
    f"{CIFAR100_DIR}/ ({', '.join(CIFAR100_FILES)}), or a folder holding one of them"
)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _find_cifar(root: Path) -> tuple[Literal["cifar10", "cifar100"], Path]:
    """Which CIFAR ``root`` is, and the folder holding its files."""
    if not root.is_dir():
        raise InputError(f"CIFAR root {str(root)!r} is not a directory; expected {_EXPECTED}")
    if any((root / name).is_file() for name in (*CIFAR10_TRAIN, CIFAR10_TEST, CIFAR10_META)):
        return "cifar10", root
    if (root / "meta").is_file() or ((root / "train").is_file() and (root / "test").is_file()):
        return "cifar100", root
    found = [(kind, root / sub) for kind, sub in (("cifar10", CIFAR10_DIR), ("cifar100", CIFAR100_DIR))
             if (root / sub).is_dir()]
    if len(found) == 2:
        raise InputError(f"{str(root)!r} holds both {CIFAR10_DIR}/ and {CIFAR100_DIR}/; point root at one of them")
    if found:
        kind, folder = found[0]
        return kind, folder  # type: ignore[return-value]
    raise InputError(f"{str(root)!r} is not a CIFAR folder: expected {_EXPECTED}")


#: The only globals a CIFAR pickle refers to: numpy's array reconstruction (numpy 1 and 2 names),
#: and ``_codecs.encode``, with which a protocol-2 pickle written by Python 3 rebuilds bytes.
#: Anything else (``os.system``, ``builtins.eval``, ...) is refused before it is looked up.
_CIFAR_GLOBALS = frozenset(
    (module, name)
    for prefix in ("numpy.core", "numpy._core")
    for module, name in ((f"{prefix}.multiarray", "_reconstruct"), (f"{prefix}.numeric", "_frombuffer"))
) | {("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")}


class _ArraysOnly(pickle.Unpickler):
    """An unpickler that builds dicts, lists, bytes, numbers and numpy arrays, and nothing else."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _CIFAR_GLOBALS:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed in a CIFAR file")
        return super().find_class(module, name)


def _unpickle(path: Path) -> dict[bytes, Any]:
    """One CIFAR pickle as its dict with bytes keys (``encoding="bytes"``, as the datasets ship),
    read by :class:`_ArraysOnly`: a file that names any other global is refused, not run."""
    if not path.is_file():
        raise InputError(f"CIFAR file {str(path)!r} is missing")
    try:
        with open(path, "rb") as f:
            obj = _ArraysOnly(f, encoding="bytes").load()
    except Exception as exc:  # noqa: BLE001 -- truncated or foreign files fail in many ways
        raise InputError(
            f"CIFAR file {str(path)!r} cannot be unpickled (truncated or not a CIFAR pickle): "
            f"{type(exc).__name__}: {_one_line(exc)[:120]}"
        ) from None
    if not isinstance(obj, dict):
        raise InputError(f"CIFAR file {str(path)!r} holds a {type(obj).__name__}; expected a dict with bytes keys")
    return obj


def _entry(d: dict[bytes, Any], key: bytes, path: Path) -> Any:
    if key in d:
        return d[key]
    if key.decode() in d:  # a pickle re-written with str keys
        return d[key.decode()]
    keys = ", ".join(repr(k) for k in list(d)[:8])
    raise InputError(f"CIFAR file {str(path)!r} has no {key!r} entry; it has {keys}")


def _names(d: dict[bytes, Any], key: bytes, path: Path) -> list[str]:
    raw = _entry(d, key, path)
    try:
        return [n.decode("utf-8") if isinstance(n, bytes) else str(n) for n in raw]
    except (TypeError, UnicodeDecodeError) as exc:
        raise InputError(f"CIFAR file {str(path)!r}: {key!r} is not a list of names ({_one_line(exc)})") from None


def _pixels(d: dict[bytes, Any], path: Path) -> np.ndarray:
    """``b'data'`` as uint8 (N, 3072), checked."""
    data = np.asarray(_entry(d, b"data", path))
    if data.ndim != 2 or data.shape[1] != CIFAR_ROW:
        raise InputError(
            f"CIFAR file {str(path)!r}: b'data' has shape {data.shape} ({data.size} values); "
            f"expected (N, {CIFAR_ROW}): N images of 3x{CIFAR_SIDE}x{CIFAR_SIDE} bytes"
        )
    if data.dtype != np.uint8:
        if data.dtype.kind not in "ui" or (data.size and (data.min() < 0 or data.max() > 255)):
            raise InputError(f"CIFAR file {str(path)!r}: b'data' is {data.dtype}; expected uint8 pixel values 0..255")
        data = data.astype(np.uint8)
    return data


def _labels(d: dict[bytes, Any], key: bytes, n: int, n_classes: int, path: Path) -> np.ndarray:
    raw = _entry(d, key, path)
    try:
        labels = np.asarray(raw, dtype=np.int64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise InputError(f"CIFAR file {str(path)!r}: {key!r} is not a list of integers ({_one_line(exc)})") from None
    if len(labels) != n:
        raise InputError(f"CIFAR file {str(path)!r}: {len(labels)} {key.decode()} for {n} images in b'data'")
    if n and (labels.min() < 0 or labels.max() >= n_classes):
        raise InputError(
            f"CIFAR file {str(path)!r}: {key.decode()} range over [{labels.min()}, {labels.max()}]; "
            f"the meta file names {n_classes} classes"
        )
    return labels


def load_cifar(
    root: str | Path, split: Literal["train", "test"] = "train", coarse: bool = False
) -> ColourImages:
    """CIFAR-10 or CIFAR-100 from the user's disk, in the *python* layout the datasets ship.

    ``root`` is ``cifar-10-batches-py/`` (``data_batch_1`` .. ``data_batch_5``, ``test_batch``,
    ``batches.meta``), ``cifar-100-python/`` (``train``, ``test``, ``meta``) or a folder holding
    one of them; which one is detected from the file names. Each batch is a pickled dict with
    bytes keys: ``b'data'`` uint8 (N, 3072), one row per image, the R, G and B 32x32 planes in
    turn, each row-major; ``b'labels'`` (CIFAR-10) or ``b'fine_labels'`` / ``b'coarse_labels'``
    (CIFAR-100); class names in the meta file. ``split="train"`` gives 50000 images,
    ``"test"`` 10000, in file order. ``coarse=True`` gives CIFAR-100's 20 superclasses
    (an error for CIFAR-10, which has none).

    Security: the files are Python pickles (how the datasets ship), and a plain unpickler
    runs whatever code a file names. They are read with an unpickler that accepts only
    numpy's array reconstruction (:data:`_CIFAR_GLOBALS`), so a file naming any other
    function is refused with an :class:`InputError` instead of being run.

    Returns images float32 (N, 32, 32, 3) in [0, 1]; empty ``provenance`` (real data).
    Raises :class:`InputError` (one line naming the file) on a missing file, a file that
    cannot be unpickled, a wrong array size, or a label count that does not match the images.
    """
    if split not in ("train", "test"):
        raise ConfigError(f"CIFAR split must be 'train' or 'test'; got {split!r}")
    kind, folder = _find_cifar(Path(root).expanduser())
    if kind == "cifar10":
        if coarse:
            raise InputError(
                f"coarse=True needs CIFAR-100's coarse labels; {str(folder / CIFAR10_META)!r} is CIFAR-10, "
                "which has 10 classes and no superclasses"
            )
        files = list(CIFAR10_TRAIN) if split == "train" else [CIFAR10_TEST]
        meta_path, names_key, labels_key = folder / CIFAR10_META, b"label_names", b"labels"
    else:
        files = [split]
        meta_path = folder / "meta"
        names_key, labels_key = (b"coarse_label_names", b"coarse_labels") if coarse else (
            b"fine_label_names", b"fine_labels")
    missing = [name for name in [*files, meta_path.name] if not (folder / name).is_file()]
    if missing:
        raise InputError(
            f"CIFAR folder {str(folder)!r} lacks {', '.join(missing)}; "
            f"{'CIFAR-10' if kind == 'cifar10' else 'CIFAR-100'} {split} needs {', '.join([*files, meta_path.name])}"
        )
    class_names = _names(_unpickle(meta_path), names_key, meta_path)
    data, labels = [], []
    for name in files:
        path = folder / name
        d = _unpickle(path)
        pix = _pixels(d, path)
        data.append(pix)
        labels.append(_labels(d, labels_key, len(pix), len(class_names), path))
    flat = np.concatenate(data) if len(data) > 1 else data[0]
    images = flat.reshape(-1, 3, CIFAR_SIDE, CIFAR_SIDE).transpose(0, 2, 3, 1).astype(np.float32)
    images /= np.float32(255.0)
    return ColourImages(images, np.concatenate(labels), class_names)


# --------------------------------------------------------------------------- bundled


def _check_size(size: int) -> None:
    if int(size) != size or size < 4:
        raise ConfigError(f"image size must be a whole number of at least 4 px; got {size}")


def load_bundled_faces(size: int = 32) -> ColourImages:
    """scikit-image's bundled ``lfw_subset`` resized to ``size`` x ``size``: a face / non-face task.

    The 200 images are 25x25 grey crops from Labeled Faces in the Wild: the first 100 are
    faces, the last 100 background crops of the same photos (``skimage.data.lfw_subset``).
    Resized with ``skimage.transform.resize`` (anti-aliased); C = 1; labels 0 = non-face,
    1 = face. Nothing is downloaded: the file ships inside scikit-image.
    """
    from skimage import data
    from skimage.transform import resize

    _check_size(size)
    raw = np.asarray(data.lfw_subset(), dtype=np.float64)
    if raw.max() > 1.0:
        raw = raw / 255.0
    images = np.stack([resize(img, (size, size), anti_aliasing=True) for img in raw])
    images = np.clip(images, 0.0, 1.0).astype(np.float32)[..., None]
    labels = np.r_[np.ones(100, np.int64), np.zeros(len(raw) - 100, np.int64)]
    return ColourImages(
        images,
        labels,
        ["non-face", "face"],
        f"bundled LFW subset (scikit-image lfw_subset): 100 faces and 100 non-faces, 25x25 grey resized to {size}x{size}",
    )


def load_bundled_digits(size: int = 32) -> ColourImages:
    """scikit-learn's bundled handwritten digits resized to ``size`` x ``size``: ten classes.

    ``sklearn.datasets.load_digits`` ships the test part of UCI's "Optical Recognition of
    Handwritten Digits" (Alpaydin & Kaynak, 1998): 1,797 digits written by 43 people, each an
    8x8 block of counts 0..16. Scaled to [0, 1] (counts / 16) and enlarged with bilinear
    interpolation (``skimage.transform.resize``, order 1, no anti-aliasing: an enlargement);
    C = 1; labels 0..9 in the file's order. The one bundled image set large enough for a small
    network to learn in a few hundred federated rounds (LeNet: ~90 % test accuracy), so the
    utility side of a defense can be read on it; nothing is downloaded.
    """
    from skimage.transform import resize

    _check_size(size)
    digits = load_digits_source()
    images = np.stack([resize(img, (size, size), order=1, anti_aliasing=False) for img in digits.images])
    images = np.clip(images, 0.0, 1.0).astype(np.float32)[..., None]
    return ColourImages(
        images,
        digits.labels,
        digits.class_names,
        f"bundled digits (scikit-learn load_digits): {len(images)} 8x8 grey handwritten digits enlarged to {size}x{size}",
    )


#: Bundled photos left out of :func:`load_bundled_photos`: the right view of the stereo pair
#: is nearly the left one, so its crops would make a class that is a copy of another.
PHOTO_DUPLICATES = ("motorcycle_right",)


def _is_colour(rgb: np.ndarray) -> bool:
    """Whether an RGB float image has channels that differ (grey photos are replicated)."""
    return bool(np.abs(rgb - rgb[..., :1]).max() > 2.0 / 255.0)


def load_bundled_photos(size: int = 32, per_photo: int = 16) -> ColourImages:
    """``per_photo`` fixed ``size`` x ``size`` RGB crops of each bundled colour photo; one class per photo.

    The photos are :data:`vispriv.harness.data.bundled.BUNDLED_SOURCES` (files inside
    scikit-image, scikit-learn and matplotlib; nothing is downloaded) that are in colour,
    without the near-duplicate right view of the stereo pair (:data:`PHOTO_DUPLICATES`).
    Each is centre-cropped to a square and resized to ``g * size`` with
    ``g = ceil(sqrt(per_photo))``, so a g x g grid of crops tiles it without sharing a
    pixel; ``per_photo`` of those g * g positions are taken, evenly spaced in grid order.
    So a crop covers 1/g of the photo's side (a part of the scene, not a flat patch), the
    crops are distinct, and the same arguments give the same images. Classes are photo
    names in :data:`BUNDLED_SOURCES` order.
    """
    _check_size(size)
    if int(per_photo) != per_photo or per_photo < 1:
        raise ConfigError(f"per_photo must be a whole number of at least 1; got {per_photo}")
    grid = math.isqrt(per_photo - 1) + 1  # ceil(sqrt(per_photo))
    side = size * grid
    picks = np.unique(np.round(np.linspace(0, grid * grid - 1, per_photo)).astype(int))
    names, crops = [], []
    for name, load in BUNDLED_SOURCES.items():
        if name in PHOTO_DUPLICATES:
            continue
        rgb = to_rgb_float(load())
        if not _is_colour(rgb):
            continue
        photo = Images(np.clip(square_resize(rgb, side), 0.0, 1.0)[None], [name])
        crops.append(grid_crops(photo, size, grid, disjoint=True).images[picks])
        names.append(name)
    images = np.concatenate(crops).astype(np.float32)
    labels = np.repeat(np.arange(len(names), dtype=np.int64), len(picks))
    return ColourImages(
        images,
        labels,
        names,
        f"bundled photos: {len(picks)} {size}x{size} crops (a {grid}x{grid} grid, no shared pixels) of each of "
        f"{len(names)} colour photos shipped in scikit-image / scikit-learn / matplotlib, one class per photo "
        f"({', '.join(names)})",
    )


@functools.cache
def bundled_counts(source: Literal["bundled-photos", "lfw-faces", "digits"]) -> tuple[int, int]:
    """(images, classes) of a bundled source at its default settings, whatever the image size:
    what a config can ask of it, known before any run (the photos are read once per process)."""
    if source == "bundled-photos":
        data = load_bundled_photos(8)
    elif source == "lfw-faces":
        data = load_bundled_faces(8)
    else:
        data = load_bundled_digits(8)
    return len(data.labels), len(data.class_names)


# --------------------------------------------------------------------------- folder


def _read_rgb(path: Path) -> np.ndarray:
    """One image file as float RGB (H, W, 3) in [0, 1]: grey replicated, alpha dropped,
    palette / CMYK / YCbCr / LAB / HSV converted by Pillow."""
    from PIL import Image

    with Image.open(path) as opened:
        opened.load()
        if opened.mode in ("P", "PA", "LA"):
            arr = np.asarray(opened.convert("RGBA"))
        elif opened.mode in ("CMYK", "YCbCr", "LAB", "HSV", "1"):
            arr = np.asarray(opened.convert("RGB"))
        else:
            arr = np.asarray(opened)
    if arr.dtype == np.int32:  # mode "I": 16-bit grey on older Pillow versions
        arr = np.clip(arr, 0, 65535).astype(np.uint16)
    return to_rgb_float(arr)


def load_colour_folder(root: str | Path, size: int) -> ColourImages:
    """The user's images, one sub-folder per class, read as RGB and resized to ``size`` x ``size``.

    Class folders are the sub-folders of ``root`` in sorted order (labels 0, 1, ...), except
    the clutter folders of Caltech-101/256 (:data:`vispriv.plugins.federated.data.NOT_CLASSES`,
    left out with a warning). Files with an image suffix
    (:data:`vispriv.plugins.federated.data.IMAGE_SUFFIXES`) directly in a class folder are
    read with Pillow, grey replicated to RGB, alpha dropped, and resized (anti-aliased, whole
    image, aspect not kept) -- the same geometry as the grey ``image-folder`` source. Files
    that cannot be read are skipped with one warning that counts and names them with the reason.
    Nothing is downloaded; ``provenance`` is empty.
    """
    from skimage.transform import resize

    _check_size(size)

    def read(path: Path) -> np.ndarray:
        small = resize(_read_rgb(path), (size, size, 3), anti_aliasing=True)
        return np.clip(small, 0.0, 1.0).astype(np.float32)

    images, labels, classes = read_class_folders(root, read, "colour image folder")
    return ColourImages(images, labels, classes)
