"""File-mapped arrays (vispriv.harness.mapped): written a row at a time, read in place, released
from the process's resident memory and read back unchanged; Images keeps them without a copy."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from vispriv.harness import Cache, CellContext, Images
from vispriv.harness.errors import InputError
from vispriv.harness.mapped import map_npy, release_pages, write_npy


def _mapped(items: list[np.ndarray]) -> np.ndarray:
    with tempfile.TemporaryFile() as fh:
        write_npy(fh, (len(items), *items[0].shape), np.float32, iter(items))
        return map_npy(fh)


def test_an_npy_written_item_by_item_maps_back_read_only():
    items = [np.full((3, 4), i / 10, np.float64) for i in range(5)]
    mapped = _mapped(items)
    assert mapped.shape == (5, 3, 4) and mapped.dtype == np.float32
    assert np.array_equal(mapped, np.stack(items).astype(np.float32))
    with pytest.raises(ValueError, match="read-only"):
        mapped[0, 0, 0] = 1.0


def test_write_npy_refuses_a_wrong_shape_or_count():
    with tempfile.TemporaryFile() as fh, pytest.raises(ValueError, match=r"item 1 has shape \(2,\); expected \(3,\)"):
        write_npy(fh, (2, 3), np.float32, [np.zeros(3), np.zeros(2)])
    with tempfile.TemporaryFile() as fh, pytest.raises(ValueError, match="2 items written; the header says 3"):
        write_npy(fh, (3, 3), np.float32, [np.zeros(3), np.zeros(3)])


def _resident_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_released_pages_leave_resident_memory_and_read_back_the_same():
    items = [np.full((1024, 1024), i / 64, np.float32) for i in range(64)]  # 256 MiB
    mapped = _mapped(items)
    expected = [float(v) for v in items[7][:2, 0]]
    del items
    before = _resident_mib()
    assert float(mapped.sum(dtype=np.float64)) == pytest.approx(sum(i / 64 for i in range(64)) * 1024 * 1024)
    touched = _resident_mib()
    assert touched - before > 200  # every page read is resident
    assert release_pages(np.asarray(mapped)[3:])  # through a view: the mapping under it
    assert _resident_mib() - before < 16
    assert [float(v) for v in mapped[7, :2, 0]] == expected


def test_an_array_in_memory_is_not_released():
    assert release_pages(np.zeros((4, 4))) is False
    assert release_pages(np.zeros((4, 4))[1:]) is False


def test_images_keep_a_read_only_array_in_range_and_copy_any_other():
    mapped = _mapped([np.full((4, 4, 3), 0.5, np.float32), np.zeros((4, 4, 3), np.float32)])
    assert np.shares_memory(Images(mapped).images, mapped)  # a mapping stays a mapping
    writable = np.full((2, 4, 4, 3), 0.5, np.float32)
    assert not np.shares_memory(Images(writable).images, writable)  # its maker may still write it
    slightly_out = np.full((1, 4, 4, 3), 1.0 + 1e-7, np.float32)
    slightly_out.setflags(write=False)
    clipped = Images(slightly_out).images
    assert not np.shares_memory(clipped, slightly_out) and float(clipped.max()) == 1.0
    far_out = np.full((1, 4, 4, 3), 1.5, np.float32)
    far_out.setflags(write=False)
    with pytest.raises(InputError, match=r"got \[1.5, 1.5\]"):
        Images(far_out)


TINY_ROOM = {"width": 48, "height": 36, "focal": 40.0, "supersample": 1, "n_references": 3, "n_queries": 2,
             "n_dictionary_views": 2, "texels_per_metre": 20.0}


def test_localisation_lifting_photos_are_one_mapped_file_equal_to_the_photos(tmp_path):
    from vispriv.plugins.descriptor_release.localisation.dataset import Localisation
    from vispriv.plugins.descriptor_release.localisation.map import load_photo

    dataset = Localisation(Localisation.Config(scene=TINY_ROOM))
    cache = Cache(tmp_path / "cache")
    ctx = CellContext(seed=0, cache=cache, quiet=True)
    bench = dataset.benchmark(ctx)
    lifting = dataset._lifting(bench, cache)
    extra = sorted((bench.images_dir / "dictionary").iterdir())
    assert lifting.ids == [v.name for v in bench.references] + [f"dictionary/{p.name}" for p in extra]
    photos = [load_photo(bench.image_path(v), None)[0] for v in bench.references] + [load_photo(p, None)[0] for p in extra]
    assert np.array_equal(lifting.images, np.stack(photos).astype(np.float32))  # the photos the stack held before
    assert release_pages(lifting.images)  # file-mapped
    hits = cache.hits
    again = dataset._lifting(bench, cache)
    assert cache.hits == hits + 1 and np.array_equal(again.images, lifting.images)
    without_cache = dataset._lifting(bench, Cache(None))  # a temporary file, the same photos
    assert np.array_equal(without_cache.images, lifting.images)


def test_localisation_lifting_photos_of_different_sizes_are_square_resized(tmp_path, monkeypatch):
    import vispriv.plugins.descriptor_release.localisation.dataset as module
    from vispriv.harness.data.bundled import square_resize

    dataset = module.Localisation(module.Localisation.Config(scene=TINY_ROOM, lifting_size=32))
    cache = Cache(tmp_path / "cache")
    bench = dataset.benchmark(CellContext(seed=0, cache=cache, quiet=True))
    original = module.load_photo

    def first_cropped(path, max_side):  # type: ignore[no-untyped-def]
        image, scale = original(path, max_side)
        return (image[:30, :40] if path == bench.image_path(bench.references[0]) else image), scale

    monkeypatch.setattr(module, "load_photo", first_cropped)
    lifting = dataset._lifting(bench, cache)
    assert lifting.images.shape == (5, 32, 32, 3)
    first = original(bench.image_path(bench.references[0]), None)[0][:30, :40]
    assert np.array_equal(lifting.images[0], square_resize(first, 32).astype(np.float32))
