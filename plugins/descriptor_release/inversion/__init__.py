"""Direct image inversion: a U-Net that reconstructs images from sparse features.

LDP-Feat (ICCV 2023) sections 6.1 and 6.3 (after Pittaluga et al., ref [30]): descriptors (raw,
recovered, lifted-subspace parameters or stacked LDP-Feat candidate sets) are placed at
their keypoint pixels of an otherwise empty feature map, and a U-Net trained on public
images turns that map back into a picture.

Modules: :mod:`.config` (training config), :mod:`.featuremap` (sparse maps),
:mod:`.unet` (the network), :mod:`.module` (Lightning module, loss),
:mod:`.data` (augmented training samples), :mod:`.train` (train-or-load with the
content-addressed checkpoint cache, reconstruction).
"""

from typing import Any

from vispriv.plugins.descriptor_release.inversion.config import InversionConfig
from vispriv.plugins.descriptor_release.inversion.featuremap import SparseFeatures

#: Loaded on first use (PEP 562): they import torch and Lightning, which listing plugins must not.
_TRAINING = ("TrainedInverter", "load_checkpoint", "reconstruct", "train_or_load")

__all__ = ["InversionConfig", "SparseFeatures", *_TRAINING]


def __getattr__(name: str) -> Any:
    if name in _TRAINING:
        from vispriv.plugins.descriptor_release.inversion import train

        return getattr(train, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
