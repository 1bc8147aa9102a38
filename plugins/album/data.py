"""Training the two classifiers and forming collections (section 5, "Preliminaries").

Both data sources end in the same place: two linear classifiers trained on disjoint
halves of the training photos (the defender's proxy and the adversary's model, as in
"Black-Box Protection") and a source of test collections:

* ``R-N`` -- N random test photos of one place (the paper's random collections);
* ``single`` -- one photo (Table 1's first row);
* ``albums`` -- correlated user albums (simulated: :meth:`SimWorld.album`; manifest: the
  ``album`` column, restricted to the album's majority cell).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from vispriv.harness.errors import ConfigError, InputError
from vispriv.plugins.album.manifest import Manifest
from vispriv.plugins.album.partition import assign, partition
from vispriv.plugins.album.world import SimWorld

ALBUM_SIZE_MIN, ALBUM_SIZE_MEAN, ALBUM_SIZE_MAX = 16, 33, 250


def collection_size(kind: str) -> int | None:
    """Photos per collection for ``single`` / ``R-N``; ``None`` for ``albums``."""
    if kind == "single":
        return 1
    if kind == "albums":
        return None
    match = re.fullmatch(r"R-(\d+)", kind)
    if not match or int(match.group(1)) < 1:
        raise ConfigError(f"collection {kind!r} unknown; allowed: single, R-<n> (e.g. R-16), albums")
    return int(match.group(1))


def training_halves(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the (proxy, adversary) halves of ``n`` training photos (disjoint, random)."""
    order = np.random.default_rng(seed).permutation(n)
    return order[: n // 2], order[n // 2 :]


def train_pair(features: np.ndarray, places: np.ndarray, n_places: int, seed: int, epochs: int) -> dict[str, np.ndarray]:
    """Proxy and adversary classifiers on two disjoint random halves of the training photos."""
    from vispriv.plugins.album.classifier import train_classifier
    halves = training_halves(len(features), seed)
    out = {}
    for name, idx, s in zip(("proxy", "adversary"), halves, (seed, seed + 1)):
        w, b = train_classifier(features[idx], places[idx], n_places, s, epochs=epochs)
        out[f"{name}_weight"], out[f"{name}_bias"] = w, b
    return out


def album_size(rng: np.random.Generator) -> int:
    """A user-album size: 16 plus a geometric tail, mean about 33, at most 250 (section 5)."""
    return int(min(ALBUM_SIZE_MIN + rng.geometric(1.0 / (ALBUM_SIZE_MEAN - ALBUM_SIZE_MIN + 1)) - 1, ALBUM_SIZE_MAX))


@dataclass
class Collections:
    """Per-album features and true places."""

    albums: list[np.ndarray]
    places: list[int]


def simulated_collections(world: SimWorld, kind: str, n: int, rng: np.random.Generator) -> Collections:
    size = collection_size(kind)
    places = rng.integers(0, world.params.n_places, n)
    if size is None:
        albums = [world.album(int(p), album_size(rng), rng) for p in places]
    else:
        albums = [world.photos(np.full(size, p), rng) for p in places]
    return Collections(albums, [int(p) for p in places])


@dataclass
class ManifestWorld:
    """A manifest split into training photos (with cells) and a test pool."""

    bounds: np.ndarray
    train_features: np.ndarray
    train_cells: np.ndarray
    test_features: np.ndarray
    test_cells: np.ndarray
    test_albums: list[str]
    mean: np.ndarray
    std: np.ndarray


def split_indices(n: int, test_fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The random (test, train) split of ``n`` photos used by :func:`split_manifest`."""
    order = rng.permutation(n)
    n_test = int(round(test_fraction * n))
    return order[:n_test], order[n_test:]


def split_manifest(manifest: Manifest, n_places: int, test_fraction: float, rng: np.random.Generator) -> ManifestWorld:
    """Random train/test split, cells from the training coordinates only, standardised features."""
    test, train = split_indices(len(manifest.features), test_fraction, rng)
    if len(train) < 2 * n_places:
        raise InputError(f"{len(train)} training photos cannot fill {n_places} cells for two classifiers; need >= {2 * n_places}")
    bounds = partition(manifest.lat[train], manifest.lon[train], n_places)
    mean = manifest.features[train].mean(axis=0)
    std = manifest.features[train].std(axis=0) + 1e-6
    norm = (manifest.features - mean) / std
    return ManifestWorld(
        bounds,
        norm[train].astype(np.float32),
        assign(bounds, manifest.lat[train], manifest.lon[train]),
        norm[test].astype(np.float32),
        assign(bounds, manifest.lat[test], manifest.lon[test]),
        [manifest.albums[i] for i in test],
        mean,
        std,
    )


def manifest_collections(world: ManifestWorld, kind: str, n: int, rng: np.random.Generator) -> Collections:
    """Collections from the test split; cells with too few test photos are not sampled."""
    size = collection_size(kind)
    if size is None:
        groups: dict[str, list[int]] = {}
        for i, album in enumerate(world.test_albums):
            if album:
                groups.setdefault(album, []).append(i)
        usable = []
        for _album, idx in sorted(groups.items()):
            cells = world.test_cells[idx]
            majority = int(np.bincount(cells).argmax())
            members = [i for i in idx if world.test_cells[i] == majority]
            if len(members) >= 2:
                usable.append((members, majority))
        if not usable:
            raise InputError("collection 'albums' needs an 'album' column with albums of >= 2 test photos in one cell")
        pick = rng.permutation(len(usable))[:n]
        return Collections([world.test_features[usable[i][0]] for i in pick], [usable[i][1] for i in pick])
    counts = np.bincount(world.test_cells, minlength=len(world.bounds))
    cells = np.flatnonzero(counts >= size)
    if len(cells) == 0:
        raise InputError(f"no cell has {size} test photos for {kind} collections; use a smaller N or a larger manifest")
    chosen = rng.choice(cells, size=n, replace=True)
    albums = [world.test_features[rng.choice(np.flatnonzero(world.test_cells == c), size, replace=False)] for c in chosen]
    return Collections(albums, [int(c) for c in chosen])
