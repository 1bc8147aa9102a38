"""Datasets ``sample-images`` (a few real photos bundled with scikit-image, made small) and
``image-folder`` (the user's own photos)."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from vispriv.harness import CellContext, Dataset, FolderPath, Images, PluginConfig, Scene

#: Photos shipped inside scikit-image (no download): private and public halves.
PRIVATE_NAMES = ("astronaut", "coffee", "chelsea", "camera")
PUBLIC_NAMES = ("rocket", "immunohistochemistry", "hubble_deep_field", "coins")


def load_photo(name: str, size: int) -> np.ndarray:
    """One scikit-image photo as float32 RGB in [0, 1], resized to ``size`` x ``size``."""
    from skimage import data as skdata
    from skimage.color import gray2rgb, rgba2rgb
    from skimage.transform import resize

    img = getattr(skdata, name)()
    if img.ndim == 2:
        img = gray2rgb(img)
    elif img.shape[-1] == 4:
        img = rgba2rgb(img)
    img = img.astype(np.float32) / (255.0 if img.dtype == np.uint8 or img.max() > 1 else 1.0)
    return resize(img, (size, size), anti_aliasing=True).astype(np.float32)


class SampleImages(Dataset):
    """Four private and four public scikit-image photos at ``size`` pixels."""

    class Config(PluginConfig):
        size: int = Field(32, ge=8, le=512)
        n_private: int = Field(4, ge=1, le=len(PRIVATE_NAMES))

    name = "sample-images"
    version = "1.0"
    scenario = "image-release"
    produces = (Images,)

    def load(self, ctx: CellContext) -> Scene:
        size = self.config.size
        names = PRIVATE_NAMES[: self.config.n_private]
        private = Images(np.stack([load_photo(n, size) for n in names]), ids=list(names))
        public = Images(np.stack([load_photo(n, size) for n in PUBLIC_NAMES]), ids=list(PUBLIC_NAMES))
        return Scene(private=private, public=public)


class PhotoFolder(Dataset):
    """Your own photos: every JPEG/PNG under ``root`` (recursive) is a private image.

    Files are read, centre-cropped to a square and resized to ``size`` as by the
    descriptor-release ``image-folder`` (:func:`~vispriv.harness.data.image_folder.load_image_folder`);
    unreadable files are skipped with one ``warning:`` line naming them. Image release has
    no public knowledge, so the scene's public part is empty.
    """

    class Config(PluginConfig):
        root: FolderPath
        size: int = Field(64, ge=8, le=1024)
        #: At most this many images (the first by relative path); ``None`` = all.
        limit: int | None = Field(None, ge=1)

    name = "image-folder"
    version = "1.0"
    scenario = "image-release"
    produces = (Images,)
    description = "your own folder of JPEG/PNG photos as the private images"

    def load(self, ctx: CellContext) -> Scene:
        from vispriv.harness.data.image_folder import load_image_folder

        return Scene(private=load_image_folder(self.config.root, self.config.size, self.config.limit))
