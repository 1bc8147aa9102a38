"""Dataset ``scene-trees``: MegaDepth-style image trees split by SCENE (ldp-feat.md section 6.1).

Layout: ``<root>/<scene>/.../*.jpg`` at any depth, e.g. MegaDepth's
``MegaDepth_v1/0001/dense0/imgs/*.jpg``; the scene is the first folder under ``root``
(images directly in ``root`` form the scene ``.``). Section 6.1 trains the inversion U-Net on
MegaDepth and tests it on other images; photos of one scene are near-duplicates, so a split
by file would put the same building in training and test. The split is fixed and
documented: a scene goes wholly to ``test`` (the private images) when the hash of its name
falls below ``test_fraction``, else wholly to ``lifting`` or ``public`` (the attacker's
training images for the inversion networks) by the next hash digit -- exactly
:func:`~vispriv.harness.data.image_folder.split_files` applied to scene folders, so adding
scenes never moves an existing scene. Discovery, decoding and skips are ``image-folder``'s.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from vispriv.harness import CellContext, FolderPath, Scene
from vispriv.harness.data.image_folder import split_files
from vispriv.plugins.descriptor_release.datasets import ImageFolder
from vispriv.plugins.descriptor_release.hpatches import require_root


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


class SceneTrees(ImageFolder):
    """A tree of scenes (MegaDepth-style), split by scene so that no scene is in two splits."""

    class Config(ImageFolder.Config):
        root: FolderPath = Field("", description="<root>/<scene>/.../*.jpg, e.g. MegaDepth_v1/; required")

    name = "scene-trees"
    version = "1.0"

    def load(self, ctx: CellContext) -> Scene:
        require_root(self.name, self.config.root, "a tree of scene folders (e.g. MegaDepth_v1/)")
        return super().load(ctx)

    def split(self, files: list[Path], root: Path) -> dict[str, list[Path]]:
        return split_by_scene(files, root, self.config.test_fraction)
