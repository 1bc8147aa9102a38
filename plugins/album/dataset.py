"""Dataset plugin ``album-world``: albums (private) and the two classifiers (public)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from vispriv.harness import CellContext, Dataset, PluginConfig, Scene
from vispriv.harness.errors import ConfigError
from vispriv.plugins.album.data import (
    Collections,
    collection_size,
    manifest_collections,
    simulated_collections,
    split_manifest,
    train_pair,
    training_halves,
)
from vispriv.plugins.album.manifest import Manifest, read_manifest
from vispriv.plugins.album.payloads import Albums, GeoModels
from vispriv.plugins.album.world import SimWorld, WorldParams

SCENARIO = "album-sharing"


class AlbumWorld(Dataset):
    """Albums of photos with true places, plus the proxy and adversary classifiers.

    ``source: simulated`` (default) is the SIMULATED world of :mod:`vispriv.plugins.album.world`;
    ``source: manifest`` reads a CSV of geotagged photos (:mod:`vispriv.plugins.album.manifest`).
    The world and both classifiers depend on ``world_seed`` only (not on the cell seed),
    so every collection type of a sweep shares them (and the cache entry).
    """

    class Config(PluginConfig):
        source: Literal["simulated", "manifest"] = "simulated"
        manifest: str | None = None
        n_places: int = Field(512, ge=2)
        dim: int = Field(64, ge=2, description="feature size of the simulated world")
        collection: str = "R-16"
        n_albums: int = Field(64, ge=1)
        train_per_place: int = Field(400, ge=4, description="simulated training photos per cell (both halves)")
        epochs: int = Field(8, ge=1)
        test_fraction: float = Field(0.1, gt=0, lt=1)
        world_seed: int = 0

        @field_validator("collection")
        @classmethod
        def _known(cls, value: str) -> str:
            collection_size(value)
            return value

    name = "album-world"
    version = "1.0"
    scenario = SCENARIO
    produces = (Albums,)

    def provenance(self) -> str:
        if self.config.source == "simulated":
            return "SIMULATED world (plugins/album/world.py): per-photo features drawn around location prototypes, not real photos"
        return ""

    def real_photos(self, ctx: CellContext) -> tuple[Manifest, object]:
        """The geotagged photos of the real-data path and a fingerprint of their source (for the cache key)."""
        manifest = read_manifest(self.config.manifest)
        stat = Path(self.config.manifest).stat()
        return manifest, [stat.st_size, stat.st_mtime_ns]

    def load(self, ctx: CellContext) -> Scene:
        cfg = self.config
        if cfg.source == "manifest" and not cfg.manifest:
            raise ConfigError("album-world with source: manifest needs manifest: <path to CSV with path, lat, lon>")
        world_key = cfg.model_dump(exclude={"collection", "n_albums"})
        simulated = cfg.source == "simulated"
        if simulated:
            world = SimWorld(WorldParams(n_places=cfg.n_places, dim=cfg.dim), cfg.world_seed)

            x, y = world.training_set(cfg.train_per_place, np.random.default_rng([cfg.world_seed, 1]))

            def compute() -> dict[str, np.ndarray]:
                return train_pair(x, y, cfg.n_places, cfg.world_seed, cfg.epochs)

            bounds = np.zeros((0, 4))
        else:
            manifest, world_key["manifest_file"] = self.real_photos(ctx)
            if any(manifest.skipped.values()):
                warnings.warn(f"{self.name} skipped manifest rows: {manifest.skipped}", stacklevel=2)
            if ctx.artifact_dir is not None:
                ctx.artifact("manifest_skips.json").write_text(json.dumps(manifest.skipped))
            split = split_manifest(manifest, cfg.n_places, cfg.test_fraction, np.random.default_rng(cfg.world_seed))

            x, y = split.train_features, split.train_cells

            def compute() -> dict[str, np.ndarray]:
                return train_pair(x, y, cfg.n_places, cfg.world_seed, cfg.epochs)

            bounds = split.bounds
        weights = ctx.cache.arrays("album-classifiers", (self.name, self.version, world_key), compute)
        own = training_halves(len(x), cfg.world_seed)[1]
        models = GeoModels(**weights, simulated=simulated, cell_bounds=bounds, adversary_photos=x[own], adversary_places=y[own])
        rng = ctx.rng("album-collections", cfg.collection)
        if simulated:
            cols: Collections = simulated_collections(world, cfg.collection, cfg.n_albums, rng)
        else:
            cols = manifest_collections(split, cfg.collection, cfg.n_albums, rng)
        sizes = [len(a) for a in cols.albums]
        private = Albums(
            features=np.concatenate(cols.albums),
            offsets=np.concatenate([[0], np.cumsum(sizes)]),
            places=np.array(cols.places),
            ids=[f"{cfg.collection}-{i}" for i in range(len(sizes))],
            n_places=cfg.n_places,
            kind=cfg.collection,
            simulated=simulated,
        )
        return Scene(private=private, public=models)
