"""Dataset ``album-photos``: a folder of geotagged JPEGs (EXIF GPS), the way photo-sharing sites store them.

Layout: ``<root>/<owner>/.../*.jpg`` (any depth). For each photo:

* **place** -- the EXIF GPS IFD (Pillow ``Image.getexif().get_ifd(IFD.GPSInfo)``: tags 1-4,
  degrees/minutes/seconds with N/S, E/W references). Places are the same adaptive equal-count
  cells of the training coordinates as the CSV path (:mod:`~vispriv.plugins.album.partition`,
  album pruning (AAAI 2020) section 5, "Datasets and Discretized Locations").
* **album** -- the owner (the first folder under ``root``; photos directly in ``root`` share
  one owner) and the EXIF capture time (``DateTimeOriginal``, else ``DateTime``): an owner's
  photos sorted by time start a new album after a gap of more than ``album_gap_hours``. The
  paper's albums are Flickr "user designated albums" (section 5); capture-time sessions per
  owner are our documented stand-in. Photos without a time form one album per owner folder.
* **features** -- ``handcrafted`` (default, CPU: the CSV path's thumbnail + colour
  histograms, :func:`~vispriv.plugins.album.manifest.image_features`) or ``network``: a
  small CNN trained from scratch with Lightning on the TRAINING photos only (the same split
  as :func:`~vispriv.plugins.album.data.split_manifest`) to classify their cell; its pooled
  penultimate activations are every photo's features. The paper uses an ImageNet VGG-16
  fine-tuned on 750k photos (section 5); nothing pretrained can be downloaded here, so the
  network starts from random weights (GPU when present: ``accelerator: auto``). Its input
  thumbnails (``network_decode``: ``draft``, Pillow's reduced-scale JPEG decoding, by default;
  ``full``, the full-size decode) are stored once as uint8 in the cache and streamed in
  batches (:mod:`~vispriv.plugins.album.photo_network`).

Documented skips, counted in ``manifest_skips.json`` and a warning (never silent): photos
without GPS (``no_gps``), with impossible coordinates (``bad_coordinates``) and files that
cannot be decoded (``unreadable_image``). A folder without any usable photo is one
:class:`InputError` line.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field

from vispriv.harness import CellContext, FolderPath
from vispriv.harness.data.image_folder import list_images
from vispriv.harness.errors import ConfigError, InputError
from vispriv.harness.hashing import stable_hash
from vispriv.plugins.album.data import split_indices
from vispriv.plugins.album.dataset import AlbumWorld
from vispriv.plugins.album.manifest import Manifest, image_features
from vispriv.plugins.album.partition import assign, partition, valid_coordinates

JPEG_SUFFIXES = (".jpg", ".jpeg")
GPS_LAT_REF, GPS_LAT, GPS_LON_REF, GPS_LON = 1, 2, 3, 4
DATETIME_ORIGINAL, DATETIME = 36867, 306


@dataclass
class PhotoRecords:
    """Usable photos of a folder: files, coordinates, capture times (None when absent), owners, skip counts."""

    paths: list[Path]
    lat: np.ndarray
    lon: np.ndarray
    times: list[datetime | None]
    owners: list[str]
    skipped: dict[str, int]


def _degrees(dms: object, ref: object) -> float:
    d, m, s = (float(v) for v in dms)  # type: ignore[union-attr]
    value = d + m / 60.0 + s / 3600.0
    return -value if str(ref).upper() in ("S", "W") else value


def read_exif(path: Path) -> tuple[tuple[float, float] | None, datetime | None]:
    """(lat, lon) from the GPS IFD (None without one) and the capture time of one JPEG."""
    from PIL import Image
    from PIL.ExifTags import IFD

    with Image.open(path) as img:
        img.load()  # decode: a corrupt file fails here, not later
        exif = img.getexif()
    gps = exif.get_ifd(IFD.GPSInfo)
    coords = None
    if all(tag in gps for tag in (GPS_LAT_REF, GPS_LAT, GPS_LON_REF, GPS_LON)):
        try:
            coords = (_degrees(gps[GPS_LAT], gps[GPS_LAT_REF]), _degrees(gps[GPS_LON], gps[GPS_LON_REF]))
        except (TypeError, ValueError, ZeroDivisionError):
            coords = (float("nan"), float("nan"))
    stamp = exif.get_ifd(IFD.Exif).get(DATETIME_ORIGINAL) or exif.get(DATETIME)
    try:
        when = datetime.strptime(str(stamp).strip("\x00 "), "%Y:%m:%d %H:%M:%S") if stamp else None
    except ValueError:
        when = None
    return coords, when


def scan_photos(root: str | Path) -> PhotoRecords:
    """Every JPEG under ``root`` with usable GPS, the others counted by reason."""
    root = Path(root).expanduser()
    files = [p for p in list_images(root) if p.suffix.lower() in JPEG_SUFFIXES]
    paths, lats, lons, times, owners = [], [], [], [], []
    skipped = {"no_gps": 0, "bad_coordinates": 0, "unreadable_image": 0}
    for path in files:
        try:
            coords, when = read_exif(path)
        except Exception:  # noqa: BLE001 -- any decoder failure means "unreadable"
            skipped["unreadable_image"] += 1
            continue
        if coords is None:
            skipped["no_gps"] += 1
            continue
        if not valid_coordinates(np.array([coords[0]]), np.array([coords[1]]))[0]:
            skipped["bad_coordinates"] += 1
            continue
        rel = path.relative_to(root)
        paths.append(path)
        lats.append(coords[0])
        lons.append(coords[1])
        times.append(when)
        owners.append(rel.parts[0] if len(rel.parts) > 1 else ".")
    if not paths:
        raise InputError(f"no JPEG with EXIF GPS under {str(root)!r} (skipped: {skipped})")
    return PhotoRecords(paths, np.array(lats), np.array(lons), times, owners, skipped)


def album_ids(owners: list[str], times: list[datetime | None], gap_hours: float) -> list[str]:
    """``owner#n``: an owner's photos in time order, a new album after a gap > ``gap_hours``."""
    out = [""] * len(owners)
    for owner in sorted(set(owners)):
        idx = [i for i, o in enumerate(owners) if o == owner]
        timed = sorted((i for i in idx if times[i] is not None), key=lambda i: times[i])  # type: ignore[arg-type, return-value]
        session, previous = 0, None
        for i in timed:
            if previous is not None and (times[i] - previous).total_seconds() > gap_hours * 3600:  # type: ignore[operator]
                session += 1
            out[i], previous = f"{owner}#{session}", times[i]
        for i in idx:
            if times[i] is None:
                out[i] = f"{owner}#untimed"
    return out


def folder_fingerprint(paths: list[Path]) -> str:
    """Content key of a photo folder: every path with its size and modification time."""
    return stable_hash([[str(p), p.stat().st_size, p.stat().st_mtime_ns] for p in paths], length=16)


class AlbumPhotos(AlbumWorld):
    """Albums from a folder of geotagged JPEGs (EXIF GPS + capture time); classifiers as in ``album-world``.

    Everything after reading the photos (split, cells, the two classifiers, collections) is
    ``album-world``'s manifest path; ``manifest``, ``dim`` and ``train_per_place`` do not apply.
    """

    class Config(AlbumWorld.Config):
        source: Literal["photos"] = "photos"
        root: FolderPath = Field("", description="folder of JPEGs with EXIF GPS: <root>/<owner>/.../*.jpg; required")
        features: Literal["handcrafted", "network"] = Field(
            "handcrafted", description="handcrafted (CPU default) or a CNN trained from scratch on the training photos"
        )
        album_gap_hours: float = Field(24.0, gt=0, description="an owner's new album starts after this capture-time gap")
        network_steps: int = Field(300, ge=1, description="network: optimiser steps")
        network_width: int = Field(32, ge=4, le=512, description="network: channels = feature size")
        network_input: int = Field(64, ge=16, le=256, description="network: photos resized to this square side")
        network_decode: Literal["draft", "full"] = Field(
            "draft", description="network: draft (reduced-scale JPEG decode + bilinear resize, ~30-70x cheaper) or full "
            "(full-size decode + scikit-image anti-aliased resize, the reader before 2026-11-25)",
        )
        accelerator: str = Field("auto", description="Lightning accelerator for the network (auto: GPU when present)")

    name = "album-photos"
    version = "1.0"

    def real_photos(self, ctx: CellContext) -> tuple[Manifest, object]:
        cfg = self.config
        if not cfg.root:
            raise ConfigError("dataset album-photos needs root: the path of a folder of JPEGs with EXIF GPS")
        records = scan_photos(cfg.root)
        key = folder_fingerprint(records.paths)
        albums = album_ids(records.owners, records.times, cfg.album_gap_hours)
        if cfg.features == "handcrafted":
            feats = ctx.cache.arrays(
                "album-photo-features", (self.name, "handcrafted", key),
                lambda: {"features": np.stack([image_features(p) for p in records.paths])},
            )["features"]
        else:
            from vispriv.plugins.album.photo_network import NetworkSettings, train_features

            _, train = split_indices(len(records.paths), cfg.test_fraction, np.random.default_rng(cfg.world_seed))
            if len(train) < cfg.n_places:
                raise InputError(f"{len(train)} training photos cannot fill {cfg.n_places} cells to train the feature network")
            cells = assign(partition(records.lat[train], records.lon[train], cfg.n_places), records.lat[train], records.lon[train])
            settings = NetworkSettings(cfg.network_steps, cfg.network_width, cfg.network_input, cfg.world_seed, cfg.accelerator,
                                       decode=cfg.network_decode)
            feats = ctx.cache.arrays(
                "album-photo-features",
                (self.name, "network", key, settings.key(), cfg.n_places, cfg.test_fraction),
                lambda: {"features": train_features(records.paths, train, cells, cfg.n_places, settings, ctx.quiet,
                                                    cache=ctx.cache, key=key)},
            )["features"]
        manifest = Manifest(np.asarray(feats, np.float32), records.lat, records.lon, albums, records.skipped)
        return manifest, [key, cfg.features, cfg.album_gap_hours]
