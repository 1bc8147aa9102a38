"""The zero-download deep features: scikit-learn's digits through a small CNN vispriv trains itself.

DPHE (ICCV 2017) trains its linear classifiers on features of a network trained elsewhere
(section 3.2: ResNet-152 on ImageNet). Here the network is a two-convolution CNN trained for
``EPOCHS`` epochs on the even-indexed digits (899 images, its own "ImageNet"); the features
are its 32-d penultimate layer (before its ReLU) on the odd-indexed digits (898 images), which the federated
task splits among users, so no image is both in the network's training and the federated data.

Labels are the 10 classes, or 14 binary attributes derived from them (one per digit, and
even, at least 5, prime, closed loop (0, 6, 8, 9)): a multi-label task of the shape of
section 3.3's face attributes, SIMULATED from class labels.
"""

from __future__ import annotations

import functools

import numpy as np

from vispriv.plugins.federated.data import LabelledImages

EPOCHS = 150
#: Attribute names of ``attributes`` labelling, in column order.
ATTRIBUTES = [f"is_{d}" for d in range(10)] + ["even", "at_least_5", "prime", "closed_loop"]
PROVENANCE = {
    "classes": "features of scikit-learn's digits from a small CNN vispriv trains on the other half of them",
    "attributes": "features of scikit-learn's digits from a small CNN vispriv trains on the other half of them; "
    "SIMULATED attributes derived from the digit classes",
}


def digit_attributes(classes: np.ndarray) -> np.ndarray:
    """(N, 14) 0/1 attributes of digit classes, in the order of :data:`ATTRIBUTES`."""
    one_hot = np.eye(10, dtype=np.int64)[classes]
    derived = np.stack(
        [classes % 2 == 0, classes >= 5, np.isin(classes, (2, 3, 5, 7)), np.isin(classes, (0, 6, 8, 9))], axis=1
    )
    return np.hstack([one_hot, derived.astype(np.int64)])


def _network():  # type: ignore[no-untyped-def]
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
        nn.Linear(128, 32), nn.ReLU(),
        nn.Linear(32, 10),
    )


@functools.lru_cache(maxsize=1)
def digit_features() -> tuple[np.ndarray, np.ndarray]:
    """(898, 32) features of the odd-indexed digits and their classes; the network sees only the even ones."""
    import torch
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = torch.tensor(digits.images / 16.0, dtype=torch.float32)[:, None]
    classes = torch.tensor(digits.target, dtype=torch.int64)
    train, held = slice(0, None, 2), slice(1, None, 2)
    torch.manual_seed(0)
    net = _network()
    optimiser = torch.optim.Adam(net.parameters(), lr=3e-3)
    for _ in range(EPOCHS):
        optimiser.zero_grad()
        torch.nn.functional.cross_entropy(net(images[train]), classes[train]).backward()
        optimiser.step()
    with torch.no_grad():
        features = net[:-2](images[held]).double().numpy()
    return features, digits.target[held].astype(np.int64)


def bundled_features(labels: str = "attributes") -> LabelledImages:
    """The bundled features as 1 x 32 strips with classes or the 14 derived attributes."""
    from vispriv.plugins.federated.features.dataset import as_strips
    from vispriv.plugins.federated.features.file import FeatureTable

    features, classes = digit_features()
    ids = [f"digit-{2 * i + 1}" for i in range(len(classes))]
    if labels == "classes":
        return as_strips(FeatureTable(ids, features, classes, [str(d) for d in range(10)]))
    return as_strips(FeatureTable(ids, features, digit_attributes(classes), ATTRIBUTES))
