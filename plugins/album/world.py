"""The SIMULATED world: per-photo feature vectors around place prototypes.

No geotagged photo collection ships with any installed package and nothing may be
downloaded, so the default data of this scenario is simulated (every report labels it
so). It mimics the structure section 5 relies on:

* ``n_places`` cells grouped into ``n_regions`` regions; a cell's prototype is its
  region's centre plus a smaller cell offset, so one photo usually tells the region but
  not the cell, and a collection narrows it down (the "intersection of sets" of the
  introduction);
* an informative photo is ``prototype + noise``; a share ``neutral_share`` of photos is
  location-neutral (drawn around the global mean, carrying no place information);
* user albums (section 5, "Albums") are correlated: all informative photos of one album
  share an album-level offset (one photographer, similar environs), and more of their
  photos are neutral.

The default parameters were calibrated (docs/album.md) so that a linear classifier
trained on them lands near the paper's Table 1 with 512 cells: single-photo top-1 about
0.2 and R-16 top-1 about 0.97.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class WorldParams:
    """Parameters of the simulated world (defaults: the calibrated 512-cell world)."""

    n_places: int = 512
    dim: int = 64
    n_regions: int = 32
    region_scale: float = 0.3
    cell_scale: float = 0.23
    noise: float = 1.0
    neutral_share: float = 0.3
    album_offset: float = 1.0
    album_neutral_share: float = 0.6


class SimWorld:
    """Place prototypes of one simulated world, drawn once from ``seed``."""

    def __init__(self, params: WorldParams, seed: int) -> None:
        self.params = params
        rng = np.random.default_rng(seed)
        p = params
        regions = rng.normal(0.0, p.region_scale, (p.n_regions, p.dim))
        region_of = np.arange(p.n_places) * p.n_regions // p.n_places
        self.prototypes = regions[region_of] + rng.normal(0.0, p.cell_scale, (p.n_places, p.dim))

    def photos(
        self,
        places: np.ndarray,
        rng: np.random.Generator,
        neutral_share: float | None = None,
        offset: np.ndarray | None = None,
    ) -> np.ndarray:
        """Features of one photo per entry of ``places`` (float32, shape (len(places), dim))."""
        p = self.params
        share = p.neutral_share if neutral_share is None else neutral_share
        places = np.asarray(places, dtype=np.int64)
        informative = rng.random(len(places)) >= share
        centre = np.where(informative[:, None], self.prototypes[places], 0.0)
        if offset is not None:
            centre = centre + informative[:, None] * offset[None, :]
        return (centre + rng.normal(0.0, p.noise, (len(places), p.dim))).astype(np.float32)

    def training_set(self, per_place: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``per_place`` photos of every place (equal counts, as the adaptive cells of section 5)."""
        places = np.repeat(np.arange(self.params.n_places), per_place)
        rng.shuffle(places)
        return self.photos(places, rng), places

    def album(self, place: int, size: int, rng: np.random.Generator) -> np.ndarray:
        """A correlated user album: shared offset, more neutral photos (section 5, "Albums")."""
        offset = rng.normal(0.0, self.params.album_offset, self.params.dim)
        return self.photos(np.full(size, place), rng, self.params.album_neutral_share, offset)
