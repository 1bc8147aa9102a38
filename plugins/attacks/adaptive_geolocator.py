"""Attack ``adaptive-geolocator``: eq. (1)'s geolocation, re-learned against the pruning it faces.

``proxy-geolocator`` is the paper's adversary (Yang et al., AAAI 2020, section 5): it
sums its own classifier's log-probabilities, trained on unpruned photos, and does not
know that photos were deleted. This attack knows the defense (Kerckhoffs; Carlini et al.
2019; Tramèr et al., NeurIPS 2020): it reads the defense's public settings from the
release (:attr:`KeptAlbums.protocol`: mode, k, budget, theta, scores_from, keep_rank, the
solver's; never a user's scores or deletion mask), builds ``n_train_albums`` albums from
its own labelled photos (:attr:`GeoModels.adversary_photos`), prunes them with the same
algorithm and settings (:func:`vispriv.plugins.album.protocol.prune`, the code the defense
runs; each solve's limits lowered to the attacker's own caps, work caps by default, so that
what it learns is the same on every machine; ``own_unproven_share`` counts its albums a cap
stopped), and learns from them (:mod:`vispriv.plugins.album.adaptive`) which base rank the
true place ends up at after pruning -- a top-k guarantee met with the fewest deletions
leaves it just below the top-k -- and re-ranks every released album by it.

``model: auto`` chooses the base model (the adversary's own, or the defender's proxy,
which is public and is what a black-box defense prunes with) and whether to re-rank at
all, on held-out albums of its own: it never settles for less than the plain order of
its own model scores there. ``model: adversary|proxy`` fixes the base model;
``model: refit`` re-trains a per-photo classifier on the photos pruning kept (the
project's Lightning classifier; it needs ``n_train_albums`` well above the number of
places to see every place). ``adapt: none`` ignores the protocol: the attack is then
exactly ``proxy-geolocator`` with the adversary's model (the control that the
adaptation, not anything else, makes the difference). A release whose protocol deletes
nothing (``none``, or no protocol) is attacked without adaptation too: pruned and
unpruned albums are then the same. What is learned is cached (``ctx.cache``, namespace
``album-adaptive``) on the protocol, the models, the released kept sizes and the
attack's settings and seed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import numpy as np
from pydantic import Field

from vispriv.harness import Attack, AttackResult, CellContext, PluginConfig, Rankings
from vispriv.harness.errors import InputError
from vispriv.harness.hashing import fingerprint
from vispriv.plugins.album import adaptive
from vispriv.plugins.album.data import training_halves
from vispriv.plugins.album.payloads import GeoModels, KeptAlbums, linear_log_probs
from vispriv.plugins.album.protocol import deletes

#: Seed of the split of the attacker's photos and of its held-out classifier.
HELD_OUT_SEED = 0
#: Base models in the order ``base_model`` (an attack metric) numbers them.
MODELS = ("adversary", "proxy", "refit")


class AdaptiveGeolocator(Attack):
    """Geolocation of each released album by an attacker who prunes albums of its own first."""

    class Config(PluginConfig):
        adapt: Literal["auto", "none"] = "auto"
        model: Literal["auto", "adversary", "proxy", "refit"] = "auto"
        n_train_albums: int = Field(128, ge=4, description="albums the attacker builds and prunes")
        album_size: int | None = Field(None, ge=2, description="size of its albums; default: matched to the release")
        solve_node_limit: int | None = Field(
            100_000, ge=1, description="cap on the branch-and-bound nodes per own album, the fast budget search's and HiGHS's (null: the release's)"
        )
        solve_deterministic_limit: float | None = Field(
            1.0, gt=0, description="cap on CP-SAT's deterministic seconds per own album (null: the release's)"
        )
        solve_time_limit: float | None = Field(
            None, gt=0, description="cap on the wall-clock seconds per own album (null: the release's; makes results load-dependent)"
        )
        held_out: bool = Field(True, description="simulate with a classifier that never saw the album photos (cross-fit)")
        epochs: int = Field(8, ge=1, description="epochs of the held-out and refit classifiers")

    name = "adaptive-geolocator"
    version = "1.1"
    scenario = "album-sharing"
    consumes = (KeptAlbums,)
    produces = (Rankings,)

    def _candidates(
        self, models: GeoModels, pruned: adaptive.Pruned, ctx: CellContext
    ) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], adaptive.Pruned]:
        """The base models to choose from and the pruned albums to choose on.

        ``refit`` trains on the first half of the attacker's pruned albums (their kept
        photos, labelled with the album's place) and is chosen on the other half.
        """
        cfg = self.config
        public = {"adversary": (models.adversary_weight, models.adversary_bias), "proxy": (models.proxy_weight, models.proxy_bias)}
        if cfg.model in public:
            return {cfg.model: public[cfg.model]}, pruned
        if cfg.model == "auto":
            return public, pruned
        from vispriv.plugins.album.classifier import train_classifier

        half = len(pruned.kept) // 2
        kept = np.concatenate(pruned.kept[:half])
        labels = np.concatenate([np.full(len(k), p) for k, p in zip(pruned.kept[:half], pruned.places[:half])])
        seed = ctx.child_seed("adaptive-refit")
        refit = train_classifier(models.adversary_photos[kept], labels, models.n_places, seed, epochs=cfg.epochs)
        rest = adaptive.Pruned(pruned.kept[half:], pruned.places[half:], pruned.kept_fraction)
        return {"refit": refit}, rest

    def simulation(self, models: GeoModels, ctx: CellContext) -> GeoModels:
        """The models and photos the attacker simulates the defense with.

        Its own classifier was trained on all of its photos, so on them it is more sure of
        the truth than on a user's album, and what it learns would not transfer. With
        ``held_out`` (default) it re-trains that classifier (the project's Lightning
        classifier, cached) on half of its photos and builds its albums from the other
        half, which the re-trained classifier never saw: it stands in for the adversary's
        model, in the defense's scores (``scores_from: adversary``) as in the ranks.
        """
        if not self.config.held_out:
            return models
        from vispriv.plugins.album.classifier import train_classifier

        train, albums = training_halves(len(models.adversary_photos), HELD_OUT_SEED)
        x, y = models.adversary_photos, models.adversary_places

        def compute() -> dict[str, np.ndarray]:
            w, b = train_classifier(x[train], y[train], models.n_places, HELD_OUT_SEED, epochs=self.config.epochs)
            return {"weight": w, "bias": b}

        key = (self.name, self.version, fingerprint(x, y), models.n_places, self.config.epochs, HELD_OUT_SEED)
        held = ctx.cache.arrays("album-adaptive-held-out", key, compute)
        return replace(
            models, adversary_weight=held["weight"], adversary_bias=held["bias"], adversary_photos=x[albums], adversary_places=y[albums]
        )

    def learn(self, release: KeptAlbums, models: GeoModels, ctx: CellContext) -> dict[str, np.ndarray]:
        """The learned rank order and base model for this release's protocol (cached).

        The rank order is learned in :meth:`simulation`; at attack time the base model
        ``adversary`` is the attacker's full classifier (``weight``/``bias`` returned here).
        """
        cfg, protocol = self.config, release.protocol
        caps = adaptive.SolveCaps(cfg.solve_node_limit, cfg.solve_deterministic_limit, cfg.solve_time_limit)
        full = models
        models = self.simulation(models, ctx)
        sizes = np.diff(release.offsets)
        kept_sizes = sizes[sizes > 0] if np.any(sizes > 0) else np.array([2])

        def compute() -> dict[str, np.ndarray]:
            rng = ctx.rng("adaptive-albums")
            n = cfg.n_train_albums
            if cfg.album_size is None:
                own_sizes, q = adaptive.matched_sizes(kept_sizes, n, models, protocol, caps, rng)
            else:
                own_sizes, q = np.full(n, cfg.album_size), 1.0
            albums = adaptive.draw_albums(models.adversary_places, own_sizes, models.n_places, rng)
            pruned = adaptive.prune_albums(albums, models, protocol, caps)
            candidates, evaluated = self._candidates(models, pruned, ctx)
            margins = tuple(sorted({0.0, float(protocol["theta"])}))
            choice = adaptive.choose(candidates, evaluated, models.adversary_photos, models.n_places, margins)
            weight, bias = candidates[choice.name]
            if choice.name == "adversary":
                weight, bias = full.adversary_weight, full.adversary_bias
            return {
                "order": choice.order,
                "weight": np.asarray(weight, np.float32),
                "bias": np.asarray(bias, np.float32),
                "model": np.array([MODELS.index(choice.name)]),
                "learned": np.array([choice.learned]),
                "margin": np.array([choice.margin]),
                "validation": np.array([choice.validation]),
                "kept_fraction": np.array([pruned.kept_fraction]),
                "unproven": np.array([pruned.unproven_fraction]),
                "size_factor": np.array([q]),
            }

        key = (
            self.name,
            self.version,
            cfg.model_dump(),
            protocol,
            fingerprint(full.adversary_weight, full.proxy_weight, full.adversary_photos),
            fingerprint(kept_sizes),
            ctx.seed,
        )
        return ctx.cache.arrays("album-adaptive", key, compute)

    def attack(self, release: KeptAlbums, public, ctx: CellContext) -> AttackResult:
        if not isinstance(public, GeoModels):
            raise InputError(f"adaptive-geolocator needs the public GeoModels of album-world; got {type(public).__name__}")
        adapt = self.config.adapt == "auto" and deletes(release.protocol)
        if adapt and len(public.adversary_photos) == 0:
            raise InputError("adaptive-geolocator needs the adversary's training photos (GeoModels.adversary_photos)")
        which = self.config.model if self.config.model in ("adversary", "proxy") else "adversary"
        metrics: dict[str, float] = {"adapted": float(adapt)}
        if adapt:
            learned = self.learn(release, public, ctx)
            weight, bias, order = learned["weight"], learned["bias"], learned["order"]
            margin = float(learned["margin"][0])
            metrics.update(
                own_kept_fraction=float(learned["kept_fraction"][0]),
                own_unproven_share=float(learned["unproven"][0]),
                own_size_factor=float(learned["size_factor"][0]),
                first_base_rank=float(order[0] + 1),
                own_validation=float(learned["validation"][0]),
                base_model=float(learned["model"][0]),
                reranked=float(learned["learned"][0]),
                margin=margin,
            )
        else:
            weight = public.proxy_weight if which == "proxy" else public.adversary_weight
            bias = public.proxy_bias if which == "proxy" else public.adversary_bias
            order, margin = None, 0.0
        rng = ctx.rng("empty-album-guess")
        scores = np.zeros((len(release), public.n_places))
        photo = linear_log_probs(release.features, weight, bias) if len(release.features) else None
        sizes = np.diff(release.offsets)
        for a in range(len(release)):
            if sizes[a] == 0:
                scores[a] = rng.permutation(public.n_places)
                continue
            summed = photo[release.offsets[a] : release.offsets[a + 1]].sum(axis=0)
            scores[a] = summed if order is None else adaptive.rerank(summed, order, int(sizes[a]), margin)
        metrics.update(photos_per_album=float(sizes.mean()) if len(sizes) else 0.0, empty_albums=float(np.mean(sizes == 0)))
        return AttackResult(estimate={"place": Rankings(scores, ids=list(release.ids))}, metrics=metrics)
