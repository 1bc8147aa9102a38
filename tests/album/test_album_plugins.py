"""The album-sharing plugins end to end on a tiny simulated world and a tiny manifest."""

import json

import numpy as np
import pytest
from PIL import Image

from vispriv.harness import Cache, CellContext, Labels, Rankings
from vispriv.harness.errors import ConfigError, InputError
from vispriv.plugins.album.dataset import AlbumWorld
from vispriv.plugins.album.partition import assign, partition
from vispriv.plugins.album.payloads import Albums, KeptAlbums
from vispriv.plugins.attacks.proxy_geolocator import ProxyGeolocator
from vispriv.plugins.defenses.album_pruning import AlbumPruning, NoPruning
from vispriv.plugins.metrics.album import ProtectedK
from vispriv.plugins.metrics.classification import TopKAccuracy

TINY = dict(n_places=16, dim=16, train_per_place=40, epochs=3, n_albums=6)


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    root = tmp_path_factory.mktemp("album")
    return CellContext(seed=0, cache=Cache(root / "cache"), artifact_dir=root / "art", quiet=True)


@pytest.fixture(scope="module")
def scene(ctx):
    return AlbumWorld(AlbumWorld.Config(collection="R-8", **TINY)).load(ctx)


def _run(defense, scene, ctx, ks=(1, 5)):
    protected = defense.protect(scene.private, scene.public, ctx)
    result = ProxyGeolocator().attack(protected.release, scene.public, ctx)
    truth, est = protected.truth["place"], result.estimate["place"]
    scores = TopKAccuracy(TopKAccuracy.Config(ks=ks)).score(truth, est, ctx)
    scores.update(ProtectedK().score(truth, est, ctx))
    return protected, result, scores


def test_dataset_shapes_and_shared_world(scene, ctx):
    albums = scene.private
    assert isinstance(albums, Albums) and albums.simulated and len(albums) == 6
    assert np.all(np.diff(albums.offsets) == 8)
    other = AlbumWorld(AlbumWorld.Config(collection="albums", **TINY)).load(ctx)
    np.testing.assert_array_equal(other.public.adversary_weight, scene.public.adversary_weight)
    assert np.all(np.diff(other.private.offsets) >= 16)
    assert not np.allclose(scene.public.proxy_weight, scene.public.adversary_weight)


def test_none_releases_whole_albums_without_places(scene, ctx):
    protected, result, scores = _run(NoPruning(), scene, ctx)
    release = protected.release
    assert isinstance(release, KeptAlbums)
    assert not hasattr(release, "places") and not hasattr(release, "keep")
    np.testing.assert_array_equal(release.features, scene.private.features)
    assert protected.utility["kept_fraction"] == 1.0
    # hand check of eq. (1): the estimate is the sum of the adversary's log-probabilities
    S = scene.public.log_probs(scene.private.album(0), "adversary").sum(axis=0)
    np.testing.assert_allclose(result.estimate["place"].scores[0], S)
    # top-k by sorting, independently of the metric's rank counting (ties do not occur with float sums)
    truth, est = protected.truth["place"], result.estimate["place"]
    assert list(truth.ids) == list(est.ids)
    order = np.argsort(-est.scores, axis=1)
    for k in (1, 5):
        expected = np.mean([t in row[:k] for t, row in zip(truth.labels, order)])
        assert scores[f"top{k}_accuracy"] == pytest.approx(expected)


@pytest.mark.parametrize("mode,k", [("greedy", 2), ("top1-exact", 1), ("milp-topk", 2)])
def test_topk_guarantee_holds_for_the_white_box_attacker(scene, ctx, mode, k):
    defense = AlbumPruning(AlbumPruning.Config(mode=mode, k=k, scores_from="adversary"))
    protected, _, scores = _run(defense, scene, ctx)
    assert scores[f"top{1 if k == 1 else 5}_accuracy"] <= (0.0 if k == 1 else 1.0)
    assert scores["protected_k"] >= k
    assert protected.utility["kept_fraction"] < 1.0


def test_milp_deletes_no_more_than_greedy(scene, ctx):
    kept = {}
    for mode in ("greedy", "milp-topk"):
        protected = AlbumPruning(AlbumPruning.Config(mode=mode, k=3, scores_from="adversary")).protect(scene.private, scene.public, ctx)
        kept[mode] = np.diff(protected.release.offsets)
    assert np.all(kept["milp-topk"] >= kept["greedy"])


@pytest.mark.parametrize("mode", ["greedy-budget", "milp-budget"])
def test_budget_never_exceeded(scene, ctx, mode):
    protected = AlbumPruning(AlbumPruning.Config(mode=mode, budget=0.25)).protect(scene.private, scene.public, ctx)
    deleted = np.diff(scene.private.offsets) - np.diff(protected.release.offsets)
    assert np.all(deleted <= 2) and np.all(deleted >= 0)


def test_keep_rank_photo_is_kept(scene, ctx):
    defense = AlbumPruning(AlbumPruning.Config(mode="milp-topk", k=1, keep_rank=8, scores_from="adversary"))
    protected = defense.protect(scene.private, scene.public, ctx)
    for a in range(len(scene.private)):
        S = scene.public.log_probs(scene.private.album(a), "adversary")
        kept_photo = scene.private.album(a)[np.argsort(-S[:, scene.private.places[a]], kind="stable")[7]]
        assert np.any(np.all(protected.release.album(a) == kept_photo, axis=1))


def test_empty_album_is_a_random_guess(ctx):
    release = KeptAlbums(np.zeros((0, 16), np.float32), np.zeros(2, np.int64), ["a"])
    models = AlbumWorld(AlbumWorld.Config(**TINY)).load(ctx).public
    scores = ProxyGeolocator().attack(release, models, ctx).estimate["place"].scores
    assert sorted(scores[0]) == list(range(16))


def test_protected_k_metric_by_hand(ctx):
    est = Rankings(np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 1.0]]), ids=["x", "y"])
    truth = Labels(np.array([1, 1]), ids=["x", "y"])
    assert ProtectedK().score(truth, est, ctx)["protected_k"] == 1.0


def test_bad_configs(scene, ctx):
    with pytest.raises(ConfigError, match="k=16"):
        AlbumPruning(AlbumPruning.Config(k=16)).protect(scene.private, scene.public, ctx)
    with pytest.raises(InputError, match="top1-exact"):
        AlbumPruning(AlbumPruning.Config(mode="top1-exact", k=2)).protect(scene.private, scene.public, ctx)
    single = AlbumWorld(AlbumWorld.Config(collection="single", **TINY)).load(ctx)
    with pytest.raises(InputError, match="at least 2 photos"):
        AlbumPruning().protect(single.private, single.public, ctx)
    with pytest.raises(Exception, match="collection"):
        AlbumWorld.Config(collection="R-x")


def test_partition_has_equal_counts_and_tiles():
    rng = np.random.default_rng(0)
    lat, lon = np.clip(rng.normal(40, 20, 512), -90, 90), rng.uniform(-180, 180, 512)
    bounds = partition(lat, lon, 8)
    assert np.all(np.bincount(assign(bounds, lat, lon), minlength=8) == 64)
    grid = np.array([[la, lo] for la in (-90, 0, 45, 90) for lo in (-180, 0, 179.9, 180)])
    assert len(assign(bounds, grid[:, 0], grid[:, 1])) == len(grid)
    with pytest.raises(InputError, match="latitude"):
        partition(np.array([91.0]), np.array([0.0]), 1)


def test_manifest_path_with_skips(tmp_path, ctx):
    rng = np.random.default_rng(0)
    lines = ["path,lat,lon,album"]
    for i in range(96):
        cell = i % 4
        colour = np.zeros((12, 12, 3), np.uint8)
        colour[..., cell % 3] = 60 * (cell + 1)
        colour = np.clip(colour + rng.integers(0, 40, colour.shape), 0, 255).astype(np.uint8)
        Image.fromarray(colour).save(tmp_path / f"{i}.png")
        lat, lon = (-45 if cell < 2 else 45) + rng.normal(0, 5), (-90 if cell % 2 else 90) + rng.normal(0, 5)
        lines.append(f"{i}.png,{lat},{lon},u{i % 8}")
    lines += ["missing.png,10,10,", "0.png,95,10,", "0.png,abc,10,"]
    (tmp_path / "broken.png").write_text("not an image")
    lines.append("broken.png,0,0,")
    (tmp_path / "m.csv").write_text("\n".join(lines))
    cfg = AlbumWorld.Config(source="manifest", manifest=str(tmp_path / "m.csv"), n_places=4, collection="R-3", n_albums=5, epochs=20, test_fraction=0.25)
    with pytest.warns(UserWarning, match="skipped manifest rows"):
        scene = AlbumWorld(cfg).load(ctx)
    assert not scene.private.simulated and len(scene.public.cell_bounds) == 4
    assert np.all(np.diff(scene.private.offsets) == 3)
    skips = json.loads((ctx.artifact_dir / "manifest_skips.json").read_text())
    assert skips == {"bad_coordinates": 2, "unreadable_image": 2}
    _, _, scores = _run(NoPruning(), scene, ctx, ks=(1,))
    assert scores["top1_accuracy"] >= 0.6  # the colours separate the four cells
    with pytest.raises(InputError, match="lacks columns"):
        (tmp_path / "bad.csv").write_text("file,lat\nx,1\n")
        AlbumWorld(AlbumWorld.Config(source="manifest", manifest=str(tmp_path / "bad.csv"))).load(ctx)
