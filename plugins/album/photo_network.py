"""Per-photo features from a small CNN trained from scratch with Lightning (album-photos, ``features: network``).

album pruning (AAAI 2020) section 5 classifies photos into the 512 cells with a VGG-16
fine-tuned on 750k Flickr photos. Nothing pretrained can be downloaded here, so this is a
small network trained from random weights on the TRAINING photos only (never on the test
photos the albums are drawn from) to predict each photo's cell; its globally pooled last
convolution (``width`` numbers) is the feature vector of every photo. The two linear
classifiers of :func:`~vispriv.plugins.album.data.train_pair` are then trained on those
features, as for the handcrafted ones. Architecture: four 3x3 conv + batch norm + ReLU
blocks, stride 2 after the first, global average pooling, a linear cell classifier; Adam,
cross-entropy, random horizontal flips. Lightning picks the GPU when one is present.

Thumbnails (``decode``). Every photo is centre-cropped to a square and resized to
``input_size``. Reading a 1024 px JPEG at full resolution and resizing it with scikit-image's
anti-aliased float resize (``network_decode: full``, the only reader until 2026-11-25) costs
0.07-0.2 s per photo on the shared 2-core machine (15-42 h for the paper's 750k photos); the
default ``network_decode: draft`` (2-3.5 ms per photo there, benchmarks/pipeline_stages.py) asks libjpeg for the smallest reduced DCT scale (1/2, 1/4 or 1/8) whose image is still at
least ``input_size`` on its short side (Pillow ``Image.draft``), so most of the
inverse DCT and all full-resolution pixels are skipped, then resizes the same centre square
(mapped to the reduced grid in sub-pixel coordinates) with Pillow's BILINEAR filter, which is
anti-aliased when shrinking (a triangle filter widened by the shrink factor). BILINEAR was
chosen because it agrees best with the full decode among Pillow's filters (mean absolute
difference 0.002-0.011 in [0, 1] units on 1024 px photos at 32-128 px; BICUBIC, LANCZOS,
HAMMING and BOX 1-3x further). Non-JPEG files, and JPEGs Pillow will not draft (e.g. more
than one tile), are decoded at full size and resized the same way. Neither decode applies
the EXIF orientation tag: pixels are used in stored order, as
:func:`~vispriv.harness.data.image_folder.read_image` (the full decode and the
``handcrafted`` features) reads them; colour modes are converted as ``read_image`` does.

Memory. The thumbnails are stored once, as uint8 (N, size, size, 3) in a ``.npy`` file of
the run's cache (:meth:`~vispriv.harness.Cache.big_file`, namespace ``album-thumbnails``;
a temporary file when the cache is off), and training and feature extraction read rows from
it batch by batch (``os.pread``), converting to float per batch: memory O(batch), not O(N).
At the paper's 750k photos and 128 px the file holds 36.9 GB (3 x 128 x 128 bytes per photo)
on disk; as float32 in memory it would have been 147 GB.
"""

from __future__ import annotations

import functools
import logging
import os
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any, Literal

import lightning as L
import numpy as np
import torch
from PIL import Image
from torch import nn

from vispriv.harness.cache import Cache
from vispriv.harness.data.bundled import square_resize, to_rgb_float, to_uint8
from vispriv.harness.hashing import derive_seed

Decode = Literal["draft", "full"]
#: Pillow filter of the final resize of ``decode: draft`` (anti-aliased when shrinking; see the module docstring).
RESAMPLE = Image.Resampling.BILINEAR
#: Layout version of the ``album-thumbnails`` cache entries (part of their key).
THUMBNAIL_FORMAT = 1


@dataclass(frozen=True)
class NetworkSettings:
    """Training settings (part of the feature cache key)."""

    steps: int
    width: int
    input_size: int
    seed: int
    accelerator: str = "auto"
    batch_size: int = 32
    lr: float = 1e-3
    decode: Decode = "draft"

    def key(self) -> dict[str, object]:
        return {k: v for k, v in asdict(self).items() if k != "accelerator"}


class PhotoNet(nn.Module):
    """Conv blocks -> global average pool (the features) -> linear cell classifier."""

    def __init__(self, width: int, n_places: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels = 3
        for i in range(4):
            layers += [nn.Conv2d(channels, width, 3, stride=2 if i < 3 else 1, padding=1), nn.BatchNorm2d(width), nn.ReLU()]
            channels = width
        self.body = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(width, n_places)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class PhotoModule(L.LightningModule):
    def __init__(self, width: int, n_places: int, lr: float) -> None:
        super().__init__()
        self.net = PhotoNet(width, n_places)
        self.lr = lr

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> torch.Tensor:
        x, y = batch
        x = as_input(x)
        flip = torch.rand(len(x), device=x.device) < 0.5
        x = torch.where(flip[:, None, None, None], x.flip(-1), x)
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def as_input(x: torch.Tensor) -> torch.Tensor:
    """A batch of uint8 (B, H, W, 3) thumbnails as the network's float (B, 3, H, W) in [0, 1]; float input passes through."""
    if x.dtype == torch.uint8:
        return x.permute(0, 3, 1, 2).float().div_(255.0)
    return x



def decode_thumbnail(path: Path, size: int, decode: Decode = "draft") -> np.ndarray:
    """One photo centre-cropped to a square and resized to ``size``: uint8 (size, size, 3).

    ``draft``: Pillow's reduced-scale JPEG decoding, then a BILINEAR resize of the centre
    square (~30-70x cheaper than ``full`` on a 1024 px JPEG: benchmarks/pipeline_stages.py). ``full``: the
    whole image at full size, :func:`~vispriv.harness.data.bundled.square_resize`
    (scikit-image, anti-aliased), rounded to uint8. EXIF orientation is not applied by either.
    """
    if decode == "full":
        from vispriv.harness.data.image_folder import read_image

        return to_uint8(square_resize(read_image(path), size))
    with Image.open(path) as im:
        width, height = im.size
        scale = 1.0
        if im.format == "JPEG":
            drafted = im.draft("RGB", (size, size))  # the smallest 1/s scale still >= size on both sides
            if drafted is not None:
                scale = width / drafted[1][2]
        im.load()
        rgb: Image.Image = im
        if im.mode != "RGB":  # grey, palette, alpha, CMYK, 16-bit: converted as read_image converts them
            rgb = Image.fromarray(to_uint8(to_rgb_float(np.asarray(im.convert("RGBA") if im.mode in ("P", "LA") else im))))
        side = min(width, height)
        left, top = (width - side) // 2, (height - side) // 2
        box = (left / scale, top / scale, (left + side) / scale, (top + side) / scale)
        return np.asarray(rgb.resize((size, size), RESAMPLE, box=box), dtype=np.uint8)


class Thumbnails:
    """uint8 (N, size, size, 3) thumbnails in an open ``.npy`` file, read a few rows at a time (``os.pread``).

    Memory is what the caller reads, not N; :meth:`memmap` maps the whole file read-only.
    """

    def __init__(self, file: IO[bytes]) -> None:
        self.file = file
        file.seek(0)
        version = np.lib.format.read_magic(file)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(file)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(file)
        if fortran or dtype != np.uint8 or len(shape) != 4 or shape[-1] != 3:
            raise ValueError(f"not a C-ordered uint8 (N, size, size, 3) thumbnail file: {shape} {dtype}")
        self.shape: tuple[int, int, int, int] = tuple(shape)  # type: ignore[assignment]
        self.offset = file.tell()
        self.row_bytes = int(np.prod(self.shape[1:]))

    def __len__(self) -> int:
        return self.shape[0]

    def _read(self, out: np.ndarray, start: int) -> np.ndarray:
        view, offset = memoryview(out).cast("B"), self.offset + start * self.row_bytes
        done = 0
        while done < len(view):
            got = os.preadv(self.file.fileno(), [view[done:]], offset + done)
            if got <= 0:
                raise OSError(f"thumbnail file ends at byte {offset + done}; expected {self.shape}")
            done += got
        return out

    def read_into(self, out: np.ndarray, start: int) -> np.ndarray:
        """Rows ``start:start + len(out)`` read into the C-contiguous uint8 array ``out`` (returned)."""
        if out.dtype != np.uint8 or out.shape[1:] != self.shape[1:] or not out.flags.c_contiguous or start + len(out) > len(self):
            raise ValueError(f"cannot read {out.shape} {out.dtype} rows from {start} of {self.shape}")
        return self._read(out, start)

    def take(self, index: Sequence[int] | np.ndarray) -> np.ndarray:
        """The rows ``index`` (any order) as a new uint8 array."""
        out = np.empty((len(index), *self.shape[1:]), np.uint8)
        for i, row in enumerate(index):
            self._read(out[i], int(row))
        return out

    def memmap(self) -> np.memmap:
        """The whole file as a read-only uint8 memory map."""
        return np.memmap(self.file, dtype=np.uint8, mode="r", offset=self.offset, shape=self.shape)

    def close(self) -> None:
        self.file.close()


def thumbnail_store(
    paths: Sequence[Path], size: int, decode: Decode, key: Any, cache: Cache | None = None, quiet: bool = True
) -> Thumbnails:
    """Every photo's :func:`decode_thumbnail`, stored once as uint8 rows in the cache (namespace ``album-thumbnails``).

    ``key`` identifies the photos (e.g. :func:`~vispriv.plugins.album.photos.folder_fingerprint`
    of ``paths``, which covers their order); the entry is keyed by it, ``size``, ``decode`` and
    :data:`THUMBNAIL_FORMAT`. Photos are decoded one at a time and written sequentially, so
    building the file needs memory for one photo.
    """
    from tqdm import tqdm

    shape = (len(paths), size, size, 3)

    def write(fh: IO[bytes]) -> None:
        np.lib.format.write_array_header_1_0(fh, {"descr": np.lib.format.dtype_to_descr(np.dtype(np.uint8)),
                                                  "fortran_order": False, "shape": shape})
        for path in tqdm(paths, desc=f"thumbnails ({decode}, {size} px)", disable=quiet, leave=False):
            fh.write(decode_thumbnail(path, size, decode).tobytes())

    cache = cache if cache is not None else Cache(None)
    store = Thumbnails(cache.big_file("album-thumbnails", (key, size, decode, THUMBNAIL_FORMAT), ".npy", write))
    if store.shape != shape:
        store.close()
        raise ValueError(f"album-thumbnails entry holds {store.shape}, expected {shape}")
    return store


class _TrainRows(torch.utils.data.Dataset):
    """(uint8 thumbnail, cell) of the training photos, read from the store one row per item."""

    def __init__(self, store: Thumbnails, index: np.ndarray, cells: np.ndarray) -> None:
        self.store, self.index, self.cells = store, np.asarray(index), torch.as_tensor(cells, dtype=torch.long)

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.from_numpy(self.store.take([self.index[i]])[0]), self.cells[i]


def train_features(
    paths: list[Path], train: np.ndarray, cells: np.ndarray, n_places: int, settings: NetworkSettings, quiet: bool = True,
    cache: Cache | None = None, key: Any = None,
) -> np.ndarray:
    """Train on ``paths[train]`` (labels ``cells``) and return every photo's (N, width) features.

    The thumbnails come from :func:`thumbnail_store` (``key`` identifies the photos for its
    cache entry; without one the paths are the key) and are read batch by batch.
    """
    torch.manual_seed(derive_seed(settings.seed, "album-photo-network"))
    store = thumbnail_store(paths, settings.input_size, settings.decode, [str(p) for p in paths] if key is None else key,
                            cache, quiet)
    try:
        data = _TrainRows(store, train, cells)
        sampler = torch.utils.data.RandomSampler(data, replacement=True, num_samples=settings.steps * settings.batch_size)
        loader = torch.utils.data.DataLoader(data, batch_size=settings.batch_size, sampler=sampler, num_workers=0)
        module = PhotoModule(settings.width, n_places, settings.lr)
        for name in ("lightning.pytorch", "lightning.fabric", "lightning"):
            logging.getLogger(name).setLevel(logging.ERROR)
        trainer = L.Trainer(
            max_steps=settings.steps, max_epochs=1, accelerator=settings.accelerator, devices=1, logger=False,
            enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=not quiet, num_sanity_val_steps=0,
        )
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*does not have many workers.*")
            warnings.filterwarnings("ignore", message=".*GPU available but not used.*")
            trainer.fit(module, loader)
        return extract_features(module.net.cpu().eval(), store)
    finally:
        store.close()


def extract_features(net: PhotoNet, store: Thumbnails, chunk: int = 64) -> np.ndarray:
    """(N, width) pooled features of every stored thumbnail, ``chunk`` rows at a time (one reused uint8 buffer)."""
    out = np.empty((len(store), net.head.in_features), np.float32)
    buffer = np.empty((chunk, *store.shape[1:]), np.uint8)
    with torch.no_grad():
        for start in range(0, len(store), chunk):
            rows = store.read_into(buffer[: min(chunk, len(store) - start)], start)
            out[start : start + len(rows)] = net.body(as_input(torch.from_numpy(rows))).numpy()
            _return_free_heap()
    return out


def _return_free_heap() -> None:
    """glibc ``malloc_trim(0)``: hand freed heap pages back to the OS (no-op elsewhere).

    Without it the resident size creeps up by a few KiB per photo over the feature pass
    (chunks of different-sized torch buffers fragment glibc's heap; measured flat with it or
    with ``MALLOC_MMAP_THRESHOLD_=65536``): at 750k photos that would be gigabytes.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Any:
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
