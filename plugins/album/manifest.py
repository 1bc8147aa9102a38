"""The real-data path: a CSV manifest of geotagged photos -> image features + coordinates.

The manifest has a header with the columns ``path``, ``lat``, ``lon`` and optionally
``album`` (a user album id, for the correlated "Albums" collections of section 5).
Relative paths are resolved against the manifest's folder.

Documented skips (counted in :class:`Manifest.skipped`, never silent): rows whose image
cannot be read and rows with impossible coordinates (non-numeric, NaN, latitude outside
[-90, 90], longitude outside [-180, 180]). A manifest without the required columns, or
with no usable row, is an :class:`~vispriv.harness.errors.InputError`.

The paper's features come from VGG-16; no pretrained network can be downloaded here, so
each photo is described by handcrafted features: a 16x16 grey thumbnail and an 8-bin
histogram per colour channel (280 numbers). They are a weak stand-in, named as such in
docs/album.md; any per-photo feature vector would do.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from vispriv.harness.errors import InputError
from vispriv.plugins.album.partition import valid_coordinates

THUMB = 16
BINS = 8


@dataclass
class Manifest:
    """Usable rows of a manifest: features (N, 280), coordinates, album ids, skip counts."""

    features: np.ndarray
    lat: np.ndarray
    lon: np.ndarray
    albums: list[str]
    skipped: dict[str, int] = field(default_factory=dict)


def image_features(path: Path) -> np.ndarray:
    """Handcrafted features of one image file (grey thumbnail + colour histograms)."""
    with Image.open(path) as img:
        rgb = np.asarray(img.convert("RGB"), dtype=np.float32) / 255.0
        thumb = np.asarray(img.convert("L").resize((THUMB, THUMB), Image.BILINEAR), dtype=np.float32) / 255.0
    hist = [np.histogram(rgb[..., c], bins=BINS, range=(0.0, 1.0))[0] / rgb[..., c].size for c in range(3)]
    return np.concatenate([thumb.reshape(-1), *hist]).astype(np.float32)


def read_manifest(path: str | Path) -> Manifest:
    """Read a manifest, skipping (and counting) unreadable images and impossible coordinates."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"manifest {path} does not exist; expected a CSV with columns path, lat, lon")
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        missing = {"path", "lat", "lon"} - set(reader.fieldnames or [])
        if missing:
            raise InputError(f"manifest {path} lacks columns {sorted(missing)}; required: path, lat, lon (album optional)")
        rows = list(reader)
    feats, lats, lons, albums = [], [], [], []
    skipped = {"bad_coordinates": 0, "unreadable_image": 0}
    for row in rows:
        try:
            lat, lon = float(row["lat"]), float(row["lon"])
        except (TypeError, ValueError):
            skipped["bad_coordinates"] += 1
            continue
        if not valid_coordinates(np.array([lat]), np.array([lon]))[0]:
            skipped["bad_coordinates"] += 1
            continue
        image_path = Path(row["path"])
        if not image_path.is_absolute():
            image_path = path.parent / image_path
        try:
            feats.append(image_features(image_path))
        except (OSError, UnidentifiedImageError, ValueError):
            skipped["unreadable_image"] += 1
            continue
        lats.append(lat)
        lons.append(lon)
        albums.append(row.get("album") or "")
    if not feats:
        raise InputError(f"manifest {path} has no usable row ({skipped})")
    return Manifest(np.stack(feats), np.array(lats), np.array(lons), albums, skipped)
