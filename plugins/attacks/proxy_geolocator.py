"""Attack ``proxy-geolocator``: rank places by summed per-photo log-probabilities.

Section 2, eq. (1): with photos conditionally independent given the place and a uniform
prior, the collection's score of place j is ``S^j = sum_i log P(c_j | X_i)``. The
adversary uses its own classifier (``GeoModels.adversary_*``); ``model: proxy`` lets a
study attack with the defender's proxy instead (the white-box check of section 5).
An album with every photo deleted carries no information: its ranking is a uniformly
random order of the places (a seeded guess, so ties never favour any place).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from vispriv.harness import Attack, AttackResult, CellContext, PluginConfig, Rankings
from vispriv.harness.errors import InputError
from vispriv.plugins.album.payloads import GeoModels, KeptAlbums


class ProxyGeolocator(Attack):
    """Summed log-probability geolocation of each released album (eq. 1)."""

    class Config(PluginConfig):
        model: Literal["adversary", "proxy"] = "adversary"

    name = "proxy-geolocator"
    version = "1.0"
    scenario = "album-sharing"
    consumes = (KeptAlbums,)
    produces = (Rankings,)

    def attack(self, release: KeptAlbums, public, ctx: CellContext) -> AttackResult:
        if not isinstance(public, GeoModels):
            raise InputError(f"proxy-geolocator needs the public GeoModels of album-world; got {type(public).__name__}")
        rng = ctx.rng("empty-album-guess")
        scores = np.zeros((len(release), public.n_places))
        photo = public.log_probs(release.features, self.config.model) if len(release.features) else None
        sizes = np.diff(release.offsets)
        for a in range(len(release)):
            if sizes[a] == 0:
                scores[a] = rng.permutation(public.n_places)
            else:
                scores[a] = photo[release.offsets[a] : release.offsets[a + 1]].sum(axis=0)
        return AttackResult(
            estimate={"place": Rankings(scores, ids=list(release.ids))},
            metrics={"photos_per_album": float(sizes.mean()) if len(sizes) else 0.0, "empty_albums": float(np.mean(sizes == 0))},
        )
