"""album-photos: a folder of JPEGs with EXIF GPS and capture times, handcrafted or Lightning-trained features."""

import json
from datetime import datetime

import numpy as np
import pytest
from dataset_layouts import PLACES, write_geotagged_photos

from vispriv.harness import Cache, CellContext
from vispriv.harness.errors import InputError
from vispriv.plugins.album.data import split_indices
from vispriv.plugins.album.partition import partition
from vispriv.plugins.album.photos import AlbumPhotos, album_ids, scan_photos

TINY = dict(n_places=4, collection="R-3", n_albums=5, epochs=20, test_fraction=0.25)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return write_geotagged_photos(tmp_path_factory.mktemp("photos") / "flickr")


@pytest.fixture
def ctx(tmp_path):
    return CellContext(seed=0, cache=Cache(tmp_path / "cache"), artifact_dir=tmp_path / "art", quiet=True)


def test_exif_gps_is_read_and_photos_without_gps_or_unreadable_are_counted(root):
    records = scan_photos(root)
    assert records.skipped == {"no_gps": 1, "bad_coordinates": 0, "unreadable_image": 1}
    assert len(records.paths) == 4 * 16
    first = records.paths.index(root / "u1" / "000.jpg")
    # Sydney: south and east; the GPS IFD stores degrees/minutes/seconds with N/S, E/W references.
    assert records.lat[first] == pytest.approx(PLACES[1][0], abs=0.05) and records.lon[first] == pytest.approx(PLACES[1][1], abs=0.05)
    assert records.times[first] == datetime(2024, 5, 1, 10) and records.owners[first] == "u1"


def test_albums_are_owner_sessions_split_by_capture_time_gaps():
    t = [datetime(2024, 1, 1, 10), datetime(2024, 1, 1, 20), datetime(2024, 1, 3, 9), None, datetime(2024, 1, 1, 11)]
    assert album_ids(["a", "a", "a", "a", "b"], t, 24.0) == ["a#0", "a#0", "a#1", "a#untimed", "b#0"]
    assert album_ids(["a", "a", "a", "a", "b"], t, 5.0) == ["a#0", "a#1", "a#2", "a#untimed", "b#0"]


def test_places_are_the_equal_count_cells_of_the_training_photos(root, ctx):
    with pytest.warns(UserWarning, match=r"album-photos skipped manifest rows: \{'no_gps': 1, 'bad_coordinates': 0, 'unreadable_image': 1\}"):
        scene = AlbumPhotos(AlbumPhotos.Config(root=str(root), **TINY)).load(ctx)
    records = scan_photos(root)
    _, train = split_indices(len(records.paths), 0.25, np.random.default_rng(0))
    np.testing.assert_array_equal(scene.public.cell_bounds, partition(records.lat[train], records.lon[train], 4))
    assert json.loads((ctx.artifact_dir / "manifest_skips.json").read_text())["no_gps"] == 1
    assert not scene.private.simulated and np.all(np.diff(scene.private.offsets) == 3)
    with pytest.warns(UserWarning, match="skipped manifest rows"):
        albums = AlbumPhotos(AlbumPhotos.Config(root=str(root), **{**TINY, "collection": "albums"})).load(ctx)
    assert len(albums.private) == 5 and np.all(np.diff(albums.private.offsets) >= 2)


def test_network_features_are_trained_with_lightning(root, ctx):
    cfg = AlbumPhotos.Config(root=str(root), features="network", network_steps=15, network_width=8, network_input=32,
                             accelerator="cpu", **TINY)
    manifest, _ = AlbumPhotos(cfg).real_photos(ctx)
    assert manifest.features.shape == (64, 8) and np.all(np.isfinite(manifest.features))
    assert np.std(manifest.features, axis=0).max() > 0
    again, _ = AlbumPhotos(cfg).real_photos(CellContext(seed=5, cache=Cache(None), quiet=True))
    np.testing.assert_allclose(again.features, manifest.features, atol=1e-5)  # seeded by world_seed, not the cell
    with pytest.warns(UserWarning, match="skipped manifest rows"):
        scene = AlbumPhotos(cfg).load(ctx)
    assert scene.private.features.shape[1] == 8


def test_a_folder_without_geotagged_photos_is_one_line(tmp_path):
    (tmp_path / "x").mkdir()
    with pytest.raises(InputError, match=r"^no JPEG with EXIF GPS under '.*x' \(skipped: \{'no_gps': 0, 'bad_coordinates': 0, 'unreadable_image': 0\}\)$"):
        scan_photos(tmp_path / "x")
