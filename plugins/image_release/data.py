"""Dataset ``sample-images``: a few real photos bundled with scikit-image, made small."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from vispriv.harness import CellContext, Dataset, Images, PluginConfig, Scene

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
