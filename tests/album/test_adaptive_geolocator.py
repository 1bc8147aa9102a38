"""adaptive-geolocator: an attacker that knows the pruning protocol beats the paper's one.

A hand-built world (12 places, the identity as linear classifier, no training) keeps
these tests fast and their outcomes fixed; one test goes through ``album-world``. Its
classifier never saw the attacker's photos, so the attacks here run with
``held_out: false`` (no re-trained stand-in); one test checks the held-out split itself.
"""

import numpy as np
import pytest

from vispriv.harness import Cache, CellContext
from vispriv.plugins.album import adaptive
from vispriv.plugins.album.data import training_halves
from vispriv.plugins.album.dataset import AlbumWorld
from vispriv.plugins.album.payloads import Albums, GeoModels, KeptAlbums
from vispriv.plugins.album.protocol import PROTOCOL_KEYS, public_protocol
from vispriv.plugins.album.world import SimWorld, WorldParams
from vispriv.plugins.attacks.adaptive_geolocator import AdaptiveGeolocator
from vispriv.plugins.attacks.proxy_geolocator import ProxyGeolocator
from vispriv.plugins.defenses.album_pruning import AlbumPruning, NoPruning
from vispriv.plugins.metrics.classification import TopKAccuracy

M, SIZE = 12, 8


def _photos(places: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return (np.eye(M)[places] + rng.normal(0.0, 1.0, (len(places), M))).astype(np.float32)


@pytest.fixture(scope="module")
def world():
    rng = np.random.default_rng(0)
    own = np.repeat(np.arange(M), 40)
    models = GeoModels(
        proxy_weight=(2.0 * np.eye(M) + rng.normal(0, 0.2, (M, M))).astype(np.float32),
        proxy_bias=np.zeros(M, np.float32),
        adversary_weight=(2.0 * np.eye(M)).astype(np.float32),
        adversary_bias=np.zeros(M, np.float32),
        simulated=True,
        adversary_photos=_photos(own, rng),
        adversary_places=own,
    )
    places = rng.integers(0, M, 40)
    features = np.concatenate([_photos(np.full(SIZE, p), rng) for p in places])
    albums = Albums(features, np.arange(41) * SIZE, places, [f"a{i}" for i in range(40)], M, kind="R-8", simulated=True)
    return albums, models


@pytest.fixture()
def ctx(tmp_path):
    return CellContext(seed=0, cache=Cache(tmp_path / "cache"), quiet=True)


def _accuracy(protected, result, ctx) -> dict[str, float]:
    return TopKAccuracy(TopKAccuracy.Config(ks=(1, 3, 5))).score(protected.truth["place"], result.estimate["place"], ctx)


def _attack(cfg: dict | None, protected, models, ctx):
    attack = AdaptiveGeolocator(AdaptiveGeolocator.Config(**{"held_out": False, **(cfg or {})}))
    return attack.attack(protected.release, models, ctx)


def test_release_carries_the_public_settings_only(world, ctx):
    albums, models = world
    protected = AlbumPruning(AlbumPruning.Config(mode="milp-topk", k=3, scores_from="adversary")).protect(albums, models, ctx)
    protocol = protected.release.protocol
    assert set(protocol) == {"defense", *PROTOCOL_KEYS}
    assert protocol["defense"] == "album-pruning" and protocol["mode"] == "milp-topk" and protocol["k"] == 3
    assert all(isinstance(v, (str, int, float, type(None))) for v in protocol.values())  # no mask, no score
    assert NoPruning().protect(albums, models, ctx).release.protocol == {"defense": "none"}
    assert public_protocol("none", None) == {"defense": "none"}


def test_rank_recalibration_by_hand():
    ranks = np.array([2, 2, 2, 3, 3, 0, -1])  # -1: an empty album, not counted
    order = adaptive.rank_order(ranks, 5)
    np.testing.assert_array_equal(order, [2, 3, 0, 1, 4])  # most frequent first, ties and unseen by rank
    scores = np.array([0.5, 3.0, 2.0, 1.0, -1.0])  # base ranks: place 1, 2, 3, 0, 4
    np.testing.assert_array_equal(adaptive.rerank(scores, order), [4.0, 3.0, 2.0, 5.0, 1.0])  # place 3 (base rank 2) first
    np.testing.assert_array_equal(adaptive.rerank(scores, np.arange(5)), [2.0, 5.0, 4.0, 3.0, 1.0])  # identity keeps the order
    assert adaptive.hit_rate(order, np.array([2, 3, 1]), ks=(1, 2)) == pytest.approx(1 / 3 + 2 / 3)
    # with the defense's margin theta: places beating c by theta per kept photo (2 photos, theta 0.6)
    summed = np.array([0.0, -1.0, -3.0])
    np.testing.assert_array_equal(adaptive.margin_ranks(summed, 2, 0.6), [0, 0, 2])
    np.testing.assert_array_equal(adaptive.margin_ranks(summed, 2, 0.0), [0, 1, 2])
    # preferring margin rank 2 puts place 2 first; places 0 and 1 share margin rank 0 and keep their order
    np.testing.assert_array_equal(adaptive.rerank(summed, np.array([2, 0, 1]), 2, 0.6), [2.0, 1.0, 3.0])


@pytest.mark.parametrize("k", [1, 3])
def test_adaptive_beats_the_paper_attacker_and_learns_rank_k_plus_1(world, ctx, k):
    albums, models = world
    protected = AlbumPruning(AlbumPruning.Config(mode="milp-topk", k=k, scores_from="adversary")).protect(albums, models, ctx)
    plain = _accuracy(protected, ProxyGeolocator().attack(protected.release, models, ctx), ctx)
    result = _attack({"model": "adversary"}, protected, models, ctx)
    adapted = _accuracy(protected, result, ctx)
    assert plain[f"top{k}_accuracy"] == 0.0  # the white-box guarantee holds for the paper's attacker
    assert result.metrics["adapted"] == 1.0 and result.metrics["reranked"] == 1.0
    assert result.metrics["first_base_rank"] == k + 1  # the truth sits just below the top-k
    assert adapted["top1_accuracy"] >= 0.5
    assert adapted[f"top{k}_accuracy"] > plain[f"top{k}_accuracy"] + 0.5


def test_attacker_that_ignores_the_settings_is_the_paper_attacker(world, ctx):
    albums, models = world
    protected = AlbumPruning(AlbumPruning.Config(mode="milp-topk", k=3, scores_from="adversary")).protect(albums, models, ctx)
    plain = ProxyGeolocator().attack(protected.release, models, ctx)
    ignoring = _attack({"adapt": "none"}, protected, models, ctx)
    np.testing.assert_array_equal(ignoring.estimate["place"].scores, plain.estimate["place"].scores)
    assert ignoring.metrics["adapted"] == 0.0
    # trained against the wrong k (1 instead of 3), it learns the wrong rank and loses its edge
    wrong = KeptAlbums(protected.release.features, protected.release.offsets, protected.release.ids, {**protected.release.protocol, "k": 1})
    misled = AdaptiveGeolocator(AdaptiveGeolocator.Config(model="adversary", held_out=False)).attack(wrong, models, ctx)
    right = _attack({"model": "adversary"}, protected, models, ctx)
    assert misled.metrics["first_base_rank"] == 2 and right.metrics["first_base_rank"] == 4
    assert _accuracy(protected, misled, ctx)["top1_accuracy"] < _accuracy(protected, right, ctx)["top1_accuracy"]


def test_unpruned_release_is_attacked_exactly_as_proxy_geolocator(world, ctx):
    albums, models = world
    protected = NoPruning().protect(albums, models, ctx)
    plain = ProxyGeolocator().attack(protected.release, models, ctx)
    result = _attack(None, protected, models, ctx)
    np.testing.assert_array_equal(result.estimate["place"].scores, plain.estimate["place"].scores)
    assert result.metrics["adapted"] == 0.0


def test_auto_never_scores_below_its_own_plain_order_and_is_cached(world, ctx):
    albums, models = world
    protected = AlbumPruning(AlbumPruning.Config(mode="greedy-budget", budget=0.25, scores_from="adversary")).protect(albums, models, ctx)
    first = _attack(None, protected, models, ctx)
    misses = ctx.cache.misses
    again = _attack(None, protected, models, ctx)
    assert ctx.cache.misses == misses and ctx.cache.hits >= 1
    np.testing.assert_array_equal(first.estimate["place"].scores, again.estimate["place"].scores)
    assert first.metrics["base_model"] in (0.0, 1.0)


def test_choice_keeps_the_plain_order_where_re_ranking_cannot_help(world):
    _, models = world
    rng = np.random.default_rng(1)
    own = adaptive.draw_albums(models.adversary_places, np.full(40, 16), M, rng)
    unpruned = adaptive.Pruned(own.photos, own.places, 1.0)  # albums as released by `none`
    candidates = {"adversary": (models.adversary_weight, models.adversary_bias), "proxy": (models.proxy_weight, models.proxy_bias)}
    choice = adaptive.choose(candidates, unpruned, models.adversary_photos, M)
    assert (choice.name, choice.learned) == ("adversary", False)  # ties go to the paper's attacker
    np.testing.assert_array_equal(choice.order, np.arange(M))
    assert choice.validation == pytest.approx(2.0)  # R-16 of this world: every truth is first on held-out albums


def test_held_out_stand_in_never_saw_the_album_photos(world, ctx, monkeypatch):
    from vispriv.plugins.album import classifier

    _, models = world
    seen = {}
    real = classifier.train_classifier

    def spy(features, places, n_places, seed, epochs=5, **kw):
        seen["features"] = features.copy()
        return real(features, places, n_places, seed, epochs=epochs, **kw)

    monkeypatch.setattr(classifier, "train_classifier", spy)
    attack = AdaptiveGeolocator(AdaptiveGeolocator.Config(epochs=1))
    sim = attack.simulation(models, ctx)
    assert len(seen["features"]) == len(sim.adversary_photos) == len(models.adversary_photos) // 2
    trained = {row.tobytes() for row in seen["features"]}
    assert not any(row.tobytes() in trained for row in sim.adversary_photos)  # albums come from the other half
    assert not np.array_equal(sim.adversary_weight, models.adversary_weight)
    np.testing.assert_array_equal(sim.proxy_weight, models.proxy_weight)
    again = attack.simulation(models, ctx)  # cached: not trained twice
    np.testing.assert_array_equal(again.adversary_weight, sim.adversary_weight)
    assert ctx.cache.hits >= 1


def test_refit_trains_the_lightning_classifier_on_kept_photos(world, ctx, monkeypatch):
    from vispriv.plugins.album import classifier

    albums, models = world
    protected = AlbumPruning(AlbumPruning.Config(mode="top1-exact", scores_from="adversary")).protect(albums, models, ctx)
    seen = {}
    real = classifier.train_classifier

    def spy(features, places, n_places, seed, epochs=5, **kw):
        seen["photos"], seen["epochs"] = len(features), epochs
        return real(features, places, n_places, seed, epochs=epochs, **kw)

    monkeypatch.setattr(classifier, "train_classifier", spy)
    result = _attack({"model": "refit", "n_train_albums": 64, "album_size": SIZE, "epochs": 2}, protected, models, ctx)
    assert result.metrics["base_model"] == 2.0 and seen["epochs"] == 2
    assert 0 < seen["photos"] < 32 * SIZE  # the kept photos of the first 32 albums: pruning deleted some
    assert result.metrics["own_kept_fraction"] < 1.0


def test_album_world_hands_the_adversary_its_own_half(tmp_path):
    ctx = CellContext(seed=0, cache=Cache(tmp_path / "cache"), quiet=True)
    cfg = AlbumWorld.Config(n_places=8, dim=8, train_per_place=10, epochs=1, n_albums=2, collection="R-4")
    models = AlbumWorld(cfg).load(ctx).public
    assert models.adversary_photos.shape == (40, 8) and len(models.adversary_places) == 40
    assert np.all(np.bincount(models.adversary_places, minlength=8) > 0)
    x, y = SimWorld(WorldParams(n_places=8, dim=8), 0).training_set(10, np.random.default_rng([0, 1]))
    own = training_halves(80, 0)[1]  # the half the adversary's classifier was trained on
    np.testing.assert_array_equal(models.adversary_photos, x[own])
    np.testing.assert_array_equal(models.adversary_places, y[own])


def test_protected_k_gives_standard_errors_and_per_album_hits(tmp_path):
    import csv

    from vispriv.harness import Labels, Rankings
    from vispriv.plugins.metrics.album import ProtectedK

    ctx = CellContext(seed=0, artifact_dir=tmp_path, quiet=True)
    scores = np.tile(-np.arange(10, dtype=float), (3, 1))  # place j has base rank j
    truth = Labels(np.array([0, 2, 7]), ids=["a", "b", "c"])
    out = ProtectedK().score(truth, Rankings(scores, ids=["a", "b", "c"]), ctx)
    assert out["protected_k"] == 3.0
    assert out["protected_k_se"] == pytest.approx(np.sqrt(13.0 / 3.0))
    assert out["top1_accuracy_se"] == pytest.approx(1 / 3) and out["top5_accuracy_se"] == pytest.approx(1 / 3)
    rows = list(csv.DictReader((tmp_path / "protected_k_per_image.csv").read_text().splitlines()))
    assert [(r["id"], r["protected_k"], r["top1_accuracy"], r["top5_accuracy"]) for r in rows] == [
        ("a", "0", "1", "1"),
        ("b", "2", "0", "1"),
        ("c", "7", "0", "0"),
    ]


def test_black_box_margin_is_learned_from_the_protocol(world, ctx):
    albums, models = world
    protected = AlbumPruning(AlbumPruning.Config(mode="milp-topk", k=2, theta=0.6)).protect(albums, models, ctx)
    plain = _accuracy(protected, ProxyGeolocator().attack(protected.release, models, ctx), ctx)
    result = _attack(None, protected, models, ctx)
    adapted = _accuracy(protected, result, ctx)
    # it ranks with the defender's public proxy and theta: the truth is the place beaten by exactly k places by theta per photo
    assert (result.metrics["base_model"], result.metrics["margin"], result.metrics["first_base_rank"]) == (1.0, 0.6, 3.0)
    assert plain["top1_accuracy"] == 0.0 and adapted["top1_accuracy"] >= 0.5


def test_attackers_caps_lower_the_release_limits_never_raise_them():
    release = {"mode": "milp-budget", "node_limit": 50, "deterministic_limit": None, "time_limit": 7.0}
    caps = adaptive.SolveCaps(node_limit=100, deterministic_limit=0.5, time_limit=3.0)
    assert caps.apply(release) == {"mode": "milp-budget", "node_limit": 50, "deterministic_limit": 0.5, "time_limit": 3.0}
    assert adaptive.SolveCaps(node_limit=100).apply({**release, "node_limit": None})["node_limit"] == 100
    assert adaptive.SolveCaps(node_limit=50).apply(release)["node_limit"] == 50  # a tie is the same limit
    assert isinstance(adaptive.SolveCaps(node_limit=100).apply({**release, "node_limit": 70.0})["node_limit"], int)
    assert adaptive.SolveCaps().apply(release) == release  # no cap: the release's limits as they are
    assert adaptive.SolveCaps(time_limit=9.0).apply(release)["time_limit"] == 7.0


def test_attackers_work_cap_stops_its_solves_and_says_so(world):
    """A work cap that binds leaves the album unproven (counted); heuristic modes are never counted."""
    _, models = world
    albums = adaptive.draw_albums(models.adversary_places, np.full(8, 10), M, np.random.default_rng(1))
    protocol = {"defense": "album-pruning", "mode": "milp-budget", "k": 1, "budget": 0.3, "formulation": "cpsat",
                "solver": "HIGHS", "time_limit": None, "node_limit": None, "deterministic_limit": None, "theta": 0.0,
                "scores_from": "adversary", "keep_rank": None}
    assert adaptive.prune_albums(albums, models, protocol, adaptive.SolveCaps()).unproven_fraction == 0.0
    stopped = adaptive.prune_albums(albums, models, protocol, adaptive.SolveCaps(deterministic_limit=1e-9))
    assert stopped.unproven_fraction == 1.0
    greedy = adaptive.prune_albums(albums, models, {**protocol, "mode": "greedy-budget"}, adaptive.SolveCaps(deterministic_limit=1e-9))
    assert greedy.unproven_fraction == 0.0


def test_attacker_reports_its_unproven_albums(world, ctx):
    albums, models = world
    protected = AlbumPruning(AlbumPruning.Config(mode="milp-budget", budget=0.25, formulation="cpsat", scores_from="adversary")).protect(
        albums, models, ctx
    )
    capped = _attack({"n_train_albums": 8, "solve_deterministic_limit": 1e-9}, protected, models, ctx)
    assert capped.metrics["own_unproven_share"] == 1.0
    assert _attack({"n_train_albums": 8}, protected, models, ctx).metrics["own_unproven_share"] == 0.0
