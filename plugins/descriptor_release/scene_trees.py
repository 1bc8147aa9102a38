"""Dataset ``scene-trees``: MegaDepth-style image trees split by SCENE, with the paper's three data roles.

LDP-Feat (Pittaluga & Zhuang, ICCV 2023), section 6.1, uses three disjoint sets of photos:

* **training scenes** -- MegaDepth, on which the attacker trains the inversion U-Net;
* **public database photos** -- Places365 photos clustered into the defender's database
  (affine lifting's W, LDP-Feat's dictionary K);
* **test photos** -- 10 holiday photos from Flickr, the private images.

They map onto the scene as follows (``DescriptorPublic``: ``lifting`` = the photos the
defender's database is built from, ``public`` = the attacker's photos, which train the
inversion networks and build the clustering / nearest attacks' database Z):

* ``root`` only (the default): the scenes of ``root`` fill test, lifting and public;
* ``root`` + ``test_root``: test = every photo under ``test_root``; the scenes of ``root``
  fill lifting and public;
* ``root`` + ``database_root``: lifting = every photo under ``database_root``; the scenes of
  ``root`` fill test and public;
* ``root`` + ``test_root`` + ``database_root``: test = ``test_root``, lifting =
  ``database_root``, public = every scene of ``root`` (the paper's protocol).

Layout of ``root``: ``<root>/<scene>/.../*.jpg`` at any depth, e.g. MegaDepth's
``MegaDepth_v1/0001/dense0/imgs/*.jpg``; the scene is the first folder under ``root``
(images directly in ``root`` form the scene ``.``). Photos of one scene are near-duplicates,
so a split by file would put the same building in training and test. Where ``root`` fills
more than one split the split is fixed and documented: a scene goes wholly to ``test`` when
the hash of its name falls below ``test_fraction``, else wholly to ``lifting`` or ``public``
by the next hash digit -- :func:`~vispriv.harness.data.image_folder.split_files` applied to
scene folders, so adding scenes never moves an existing scene (with ``test_root`` set, no
scene of ``root`` goes to test; with ``database_root`` set, the lifting scenes join public).
``database_root`` and ``test_root`` are read recursively too (a Places365 copy's
``<category>/*.jpg`` or a flat folder); the three roots must not overlap.

Difference from the paper: vispriv's attacker has one image set, so the clustering attack's
database Z is built from the training scenes (the paper builds it from 60,000 other Places365
photos; ``hpatches``' ``public_root`` halves one folder between W and Z instead).

``limit`` caps the images of each split, sampled **scene-balanced**: scenes are visited in a
fixed order (a hash of ``sample_seed`` and the scene name) and one image is taken from each
in turn (round-robin; each scene's images in a seeded random order), so the test split of a
MegaDepth copy covers as many scenes as ``limit`` allows rather than the first scene or two
of the sorted paths. Adding scenes keeps the relative order of the old ones. Decoding and
skips are ``image-folder``'s.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import Field

from vispriv.harness import CellContext, FolderPath, Images, Scene
from vispriv.harness.data.image_folder import list_images, load_image_folder, split_files
from vispriv.harness.errors import ConfigError, InputError
from vispriv.harness.hashing import derive_seed, stable_hash
from vispriv.plugins.descriptor_release.datasets import ImageFolder
from vispriv.plugins.descriptor_release.hpatches import require_root
from vispriv.plugins.descriptor_release.payloads import DescriptorPublic

SPLITS = ("test", "lifting", "public")


def scene_of(path: Path, root: Path) -> Path:
    """The scene folder of an image: the first folder under ``root`` (``root`` itself at depth 0)."""
    rel = path.relative_to(root)
    return root / rel.parts[0] if len(rel.parts) > 1 else root / "."


def split_by_scene(files: list[Path], root: Path, test_fraction: float) -> dict[str, list[Path]]:
    """Files into test / lifting / public, every scene wholly in one split (hash of the scene name)."""
    scenes = sorted({scene_of(p, root) for p in files})
    where = {scene: name for name, members in split_files(scenes, root, test_fraction).items() for scene in members}
    out: dict[str, list[Path]] = {"test": [], "lifting": [], "public": []}
    for p in files:
        out[where[scene_of(p, root)]].append(p)
    return out


def scene_balanced(files: list[Path], root: Path, seed: int) -> list[Path]:
    """``files`` reordered round-robin across scenes: one image of every scene, then a second of each, ...

    Scenes are visited in the order of ``stable_hash(seed, scene name)``; each scene's images
    in a random order seeded by ``seed`` and the scene name. Taking the first N of the result
    samples N images from min(N, #scenes) scenes, as evenly as the scenes' sizes allow.
    """
    groups: dict[Path, list[Path]] = {}
    for p in files:
        groups.setdefault(scene_of(p, root), []).append(p)
    order = sorted(groups, key=lambda s: stable_hash(seed, str(s.relative_to(root))))
    queues = []
    for scene in order:
        members = sorted(groups[scene])
        rng = np.random.default_rng(derive_seed(seed, "scene-order", str(scene.relative_to(root))))
        queues.append([members[i] for i in rng.permutation(len(members))])
    return [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]


def _scene_names(files: list[Path], root: Path) -> list[str]:
    return sorted({str(scene_of(p, root).relative_to(root)) for p in files})


class SceneTrees(ImageFolder):
    """A tree of scenes (MegaDepth-style) split by scene, optionally with separate test and database roots."""

    class Config(ImageFolder.Config):
        root: FolderPath = Field(
            "", description="training scenes: <root>/<scene>/.../*.jpg, e.g. MegaDepth_v1/ (the attacker's "
            "images; also the test and database photos unless test_root / database_root are set); required"
        )
        database_root: FolderPath = Field(
            "", description="public database photos the defender's database (W, K) is built from, e.g. a "
            "Places365 subset (read recursively); empty = scenes of root"
        )
        test_root: FolderPath = Field(
            "", description="test photos, the private images (read recursively); empty = scenes of root"
        )
        limit: int | None = Field(
            None, ge=1, description="at most this many images per split, sampled scene-balanced (round-robin across scenes)"
        )
        sample_seed: int = Field(0, description="seed of the scene-balanced sampling under limit")

    name = "scene-trees"
    version = "1.1"
    description = "MegaDepth-style scene trees split by scene; separate test_root / database_root for the paper's three roles"

    def load(self, ctx: CellContext) -> Scene:
        cfg = self.config
        require_root(self.name, cfg.root, "a tree of scene folders (e.g. MegaDepth_v1/)")
        roots = {"root": cfg.root, "database_root": cfg.database_root, "test_root": cfg.test_root}
        paths = {key: Path(value).expanduser() for key, value in roots.items() if value}
        _check_disjoint(paths)
        root = paths["root"]
        files = _images(root, "root")
        from_root = [s for s, key in (("test", "test_root"), ("lifting", "database_root")) if key not in paths] + ["public"]
        splits = self.split(files, root)
        if "database_root" in paths:
            splits["public"] += splits.pop("lifting")
        if "test_root" in paths:
            splits.pop("test")
        empty = [s for s in from_root if not splits.get(s)]
        if empty:
            raise InputError(_too_few_scenes(root, files, from_root, splits))
        out: dict[str, Images] = {}
        for split in SPLITS:
            if split in splits:
                out[split] = self._read(root, splits[split], split)
        for split, key in (("test", "test_root"), ("lifting", "database_root")):
            if key in paths:
                out[split] = self._read(paths[key], _images(paths[key], key), split)
        return Scene(private=out["test"], public=DescriptorPublic(out["lifting"], out["public"], cfg.sift))

    def split(self, files: list[Path], root: Path) -> dict[str, list[Path]]:
        """Scenes of ``root`` into test / lifting / public (no test scene when ``test_root`` is set)."""
        fraction = 0.0 if self.config.test_root else self.config.test_fraction
        return split_by_scene(files, root, fraction)

    def _read(self, root: Path, files: list[Path], split: str) -> Images:
        cfg = self.config
        if cfg.limit is not None:
            files = scene_balanced(files, root, derive_seed(cfg.sample_seed, split))
        return load_image_folder(root, cfg.size, cfg.limit, files)


def _images(folder: Path, key: str) -> list[Path]:
    files = list_images(folder)
    if not files:
        raise InputError(f"scene-trees {key} {str(folder)!r} holds no .jpg/.jpeg/.png file")
    return files


def _check_disjoint(paths: dict[str, Path]) -> None:
    """The roles' folders must not be one another or nested (a test photo would train the attacker)."""
    resolved = {key: p.resolve() for key, p in paths.items()}
    keys = list(resolved)
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            if resolved[a].is_relative_to(resolved[b]) or resolved[b].is_relative_to(resolved[a]):
                raise ConfigError(
                    f"scene-trees {a} {str(paths[a])!r} and {b} {str(paths[b])!r} overlap; "
                    "the three roles (root, database_root, test_root) must be disjoint folders"
                )


def _too_few_scenes(root: Path, files: list[Path], needed: list[str], splits: dict[str, list[Path]]) -> str:
    """The one-line error when the split by scene leaves a split of ``root`` empty."""
    names = _scene_names(files, root)
    shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
    got = ", ".join(f"{s} {len(_scene_names(splits[s], root)) if splits[s] else 0}" for s in needed)
    hint = [] if "test" not in needed else ["test_root"]
    hint += [] if "lifting" not in needed else ["database_root"]
    alternative = f", or give {' / '.join(hint)} so that root fills fewer splits" if hint else ""
    return (
        f"scene tree {str(root)!r} has {len(names)} scene(s) ({shown}): too few scenes -- each scene goes wholly "
        f"to one split and {' / '.join(needed)} each need at least 1 scene ({len(needed)} in all); "
        f"the split by scene gave {got}. Add scenes{alternative}"
    )
