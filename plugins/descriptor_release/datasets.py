"""Dataset plugins of the descriptor-release scenario (LDP-Feat (ICCV 2023) section 6.1).

Both yield ``Scene(private=Images, public=DescriptorPublic(lifting, public, sift))``: the
private test images, and two image sets disjoint from them and from each other -- the
defender's lifting-database images and the attacker's public images. SIFT is extracted by
the defense (``none`` / ``affine-lifting``), with the ``sift`` setting carried in the scene
so that every party's descriptors are comparable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from vispriv.harness import CellContext, Dataset, FolderPath, Images, PluginConfig, Scene
from vispriv.harness.data.bundled import crop_source_size, grid_crops
from vispriv.harness.data.image_folder import list_images, load_image_splits, split_files
from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release.config import SiftConfig
from vispriv.plugins.descriptor_release.payloads import DescriptorPublic
from vispriv.plugins.descriptor_release.splits import BUNDLED_SPLITS, load_split

SCENARIO = "descriptor-release"


def scene_public(public: object) -> DescriptorPublic:
    """The scene's public knowledge as :class:`DescriptorPublic`, or a one-line InputError."""
    if not isinstance(public, DescriptorPublic):
        raise InputError(
            f"descriptor-release plugins need the scene's public knowledge as DescriptorPublic "
            f"(datasets bundled-images or image-folder); got {type(public).__name__}"
        )
    return public


class BundledImages(Dataset):
    """Natural photos shipped in scikit-image / scikit-learn / matplotlib, fixed split (people in test)."""

    class Config(PluginConfig):
        size: int = Field(128, ge=32, le=1024)
        sift: SiftConfig = SiftConfig()
        #: Private images as ``test_grid`` x ``test_grid`` half-overlapping crops of each test
        #: photo (taken at ``size * (test_grid + 1) / 2`` px): more samples, so that gaps
        #: between attacks can be told from the standard error (1 = the whole photos).
        test_grid: int = Field(1, ge=1, le=8)
        #: Crops half-overlapping (``half``, as many crops as possible; neighbours share pixels,
        #: so the effective sample size is smaller than the crop count) or disjoint (``full``,
        #: independent crops: honest standard errors). The photo is sized to fit the grid.
        test_stride: Literal["half", "full"] = "half"
        #: Side of the lifting and public photos. ``None`` = the side the test photos are
        #: cropped from, so every party sees the same pixel scale (a keypoint's scale and the
        #: inversion network's receptive field then mean the same thing in training and test).
        public_size: int | None = Field(None, ge=32, le=4096)

    name = "bundled-images"
    version = "1.0"
    scenario = SCENARIO
    produces = (Images,)
    description = (
        f"bundled photos: test={len(BUNDLED_SPLITS['test'])} (people/faces), "
        f"lifting={len(BUNDLED_SPLITS['lifting'])}, public={len(BUNDLED_SPLITS['public'])}"
    )

    def load(self, ctx: CellContext) -> Scene:
        cfg = self.config
        size, grid, full = cfg.size, cfg.test_grid, cfg.test_stride == "full"
        source = crop_source_size(size, grid, disjoint=full)
        side = cfg.public_size or source
        public = DescriptorPublic(load_split("lifting", side), load_split("public", side), cfg.sift)
        private = grid_crops(load_split("test", source), size, grid, disjoint=full)
        return Scene(private=private, public=public)


class ImageFolder(Dataset):
    """Any folder of JPEG/PNG files, split by a hash of each file's path into test / lifting / public."""

    class Config(PluginConfig):
        root: FolderPath
        size: int = Field(128, ge=32, le=1024)
        test_fraction: float = Field(0.2, gt=0.0, lt=1.0)
        limit: int | None = Field(None, ge=1)
        sift: SiftConfig = SiftConfig()

    name = "image-folder"
    version = "1.0"
    scenario = SCENARIO
    produces = (Images,)

    def split(self, files: list[Path], root: Path) -> dict[str, list[Path]]:
        """Files into ``test`` / ``lifting`` / ``public`` (here: by a hash of each file's path)."""
        return split_files(files, root, self.config.test_fraction)

    def load(self, ctx: CellContext) -> Scene:
        cfg = self.config
        root = Path(cfg.root).expanduser()
        files = list_images(root)
        if not files:
            raise InputError(f"image folder {str(root)!r} holds no .jpg/.jpeg/.png file")
        splits = self.split(files, root)
        empty = [name for name, paths in splits.items() if not paths]
        if empty:
            raise InputError(f"image folder {str(root)!r} has {len(files)} images: too few to fill splits {empty}")
        load = load_image_splits(root, cfg.size, splits, cfg.limit)
        return Scene(private=load["test"], public=DescriptorPublic(load["lifting"], load["public"], cfg.sift))
