"""Dataset ``face-folders``: face photos in LFW's or CelebA's native layout for the federated scenario.

Layouts:

* ``lfw`` -- ``<root>/<Person_Name>/<Person_Name>_0001.jpg`` (the ``lfw/`` or ``lfw-deepfunneled/``
  folder of the LFW release): the label is the person. Photos in subfolders of a person's
  folder count for that person. A root one level too high (``<root>/lfw/<Person_Name>/``)
  is a config error that names the folder probably meant.
* ``celeba`` -- a flat folder ``<root>/img_align_celeba/000001.jpg`` (subfolders are read
  too) with ``<root>/identity_CelebA.txt`` (lines ``000001.jpg 2880``): the label is the
  identity. A root above the one holding both says which subfolder does.

A class is an identity with at least ``min_images`` readable photos (sklearn's
``fetch_lfw_people(min_faces_per_person=...)`` convention); classes are numbered in sorted
name order. Photos are read grey, centre-cropped to ``crop_fraction`` of their side (LFW's
250 px frames hold the face in the centre) and resized to ``size`` x ``size``: the features
are the pixels, as for every source of the scenario (DPHE (ICCV 2017) section 3.2; a leaked feature
vector is an image). Users are formed by ``split``: ``by-class`` deals whole identities
round-robin (users by identity: each user holds only their own people), ``iid`` at random.
The test split takes ``test_fraction`` of every identity but never its last photo
(:func:`~vispriv.plugins.federated.data.split_users`): an identity of two photos has one in
test and one in training; with ``min_images: 1`` an identity of one photo is in training
only (a warning names them).

Documented skips, counted in ``face_skips.json`` and a warning (never silent): empty person
folders (``empty_person_folder``), files that cannot be decoded (``unreadable_image``),
CelebA files without an identity line (``no_identity``) and identities below ``min_images``
(``too_few_images``, in identities). Fewer than two usable identities is one :class:`InputError` line.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field

from vispriv.harness import CellContext, FolderPath
from vispriv.harness.data.image_folder import IMAGE_SUFFIXES, read_image
from vispriv.harness.errors import ConfigError, InputError
from vispriv.plugins.federated.data import LabelledImages
from vispriv.plugins.federated.datasets import FederatedImages, FederatedImagesConfig

CELEBA_IMAGES = "img_align_celeba"
CELEBA_IDENTITIES = "identity_CelebA.txt"


def grey_face(path: Path, size: int, crop_fraction: float) -> np.ndarray:
    """One photo as a grey (size, size) array in [0, 1], centre-cropped to ``crop_fraction``."""
    from skimage.transform import resize

    rgb = read_image(path)
    grey = rgb @ np.array([0.2125, 0.7154, 0.0721], np.float32)
    h, w = grey.shape
    side = max(1, int(round(min(h, w) * crop_fraction)))
    top, left = (h - side) // 2, (w - side) // 2
    return resize(grey[top : top + side, left : left + side], (size, size), anti_aliasing=side > size).astype(np.float64)


def _photos(folder: Path, recursive: bool) -> list[Path]:
    found = folder.rglob("*") if recursive else folder.iterdir()
    return sorted(p for p in found if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def lfw_files(root: Path, skipped: dict[str, int]) -> dict[str, list[Path]]:
    """Person name -> photo files at any depth under the person folder (empty person folders counted in ``skipped``).

    A root one level too high (``<root>/lfw/<Person_Name>/*.jpg``: no photo directly in any
    first-level folder, and one of them holds several folders of photos) is a
    :class:`ConfigError` naming the folder that was probably meant.
    """
    folders = sorted(p for p in root.iterdir() if p.is_dir())
    if folders and not any(_photos(f, recursive=False) for f in folders):
        deeper = {f: sum(1 for sub in f.iterdir() if sub.is_dir() and _photos(sub, recursive=True)) for f in folders}
        best = max(deeper, key=lambda f: deeper[f])
        if deeper[best] >= 2:
            raise ConfigError(
                f"face-folders root {str(root)!r}: found no images directly under identity folders; "
                f"did you mean {str(best)!r}? (lfw layout: <root>/<Person_Name>/*.jpg)"
            )
    people: dict[str, list[Path]] = {}
    for folder in folders:
        files = _photos(folder, recursive=True)
        if not files:
            skipped["empty_person_folder"] += 1
            continue
        people[folder.name] = files
    return people


def celeba_files(root: Path, skipped: dict[str, int]) -> dict[str, list[Path]]:
    """Identity -> photo files, from ``identity_CelebA.txt`` and the flat image folder."""
    images, table = root / CELEBA_IMAGES, root / CELEBA_IDENTITIES
    if not images.is_dir() or not table.is_file():
        meant = [p for p in sorted(root.iterdir()) if p.is_dir() and (p / CELEBA_IMAGES).is_dir() and (p / CELEBA_IDENTITIES).is_file()]
        hint = f"; did you mean {str(meant[0])!r}?" if meant else ""
        raise InputError(f"celeba root {str(root)!r} needs {CELEBA_IMAGES}/ and {CELEBA_IDENTITIES}{hint}")
    identity: dict[str, str] = {}
    for number, line in enumerate(table.read_text().splitlines(), 1):
        parts = line.split()
        if len(parts) != 2:
            if parts:
                raise InputError(f"{table}:{number}: expected '<file> <identity>'; got {line.strip()!r}")
            continue
        identity[parts[0]] = parts[1]
    people: dict[str, list[Path]] = {}
    for path in _photos(images, recursive=True):
        if path.name not in identity:
            skipped["no_identity"] += 1
            continue
        people.setdefault(identity[path.name], []).append(path)
    return people


def load_faces(
    root: str | Path, layout: str, size: int, min_images: int, crop_fraction: float
) -> tuple[LabelledImages, dict[str, int]]:
    """Labelled grey faces of every identity with >= ``min_images`` readable photos, and the skip counts."""
    if not str(root):
        raise ConfigError("dataset face-folders needs root: the path of the LFW folder or the CelebA root")
    root = Path(root).expanduser()
    if not root.is_dir():
        raise ConfigError(f"face-folders root {str(root)!r} is not a directory")
    skipped = {"empty_person_folder": 0, "unreadable_image": 0, "no_identity": 0, "too_few_images": 0}
    people = lfw_files(root, skipped) if layout == "lfw" else celeba_files(root, skipped)
    images, labels, names = [], [], []
    for name in sorted(people):
        faces = []
        for path in people[name]:
            try:
                faces.append(grey_face(path, size, crop_fraction))
            except Exception:  # noqa: BLE001 -- any decoder failure means "unreadable"
                skipped["unreadable_image"] += 1
        if len(faces) < min_images:
            skipped["too_few_images"] += 1
            continue
        images += faces
        labels += [len(names)] * len(faces)
        names.append(name)
    if len(names) < 2:
        raise InputError(
            f"face-folders {str(root)!r} has {len(names)} identities with >= {min_images} readable photos; need 2 (skipped: {skipped})"
        )
    return LabelledImages(np.stack(images), np.asarray(labels, np.int64), names), skipped


class FaceFoldersConfig(FederatedImagesConfig):
    source: Literal["face-folders"] = "face-folders"
    root: FolderPath = Field("", description="the LFW folder (<root>/<Person_Name>/*.jpg) or the CelebA root; required")
    layout: Literal["lfw", "celeba"] = "lfw"
    min_images: int = Field(2, ge=1, description="identities with fewer readable photos are left out")
    crop_fraction: float = Field(0.5, gt=0.0, le=1.0, description="centre crop (share of the side) before resizing")


class FaceFolders(FederatedImages):
    """Face photos in LFW's person folders or CelebA's flat folder + identity file, one class per identity."""

    name = "face-folders"
    version = "1.0"
    Config = FaceFoldersConfig

    def labelled_images(self, ctx: CellContext) -> LabelledImages:
        cfg: FaceFoldersConfig = self.config
        faces, skipped = load_faces(cfg.root, cfg.layout, cfg.size, cfg.min_images, cfg.crop_fraction)
        if any(skipped.values()):
            warnings.warn(f"face-folders skipped: {skipped}", stacklevel=2)
        if ctx.artifact_dir is not None:
            ctx.artifact("face_skips.json").write_text(json.dumps(skipped))
        return faces
