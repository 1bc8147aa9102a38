"""album-photos network thumbnails: reduced-scale JPEG decoding and the uint8 thumbnail store."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import skimage.data
from dataset_layouts import write_geotagged_photos
from PIL import Image

from vispriv.harness import Cache, CellContext
from vispriv.harness.data.bundled import square_resize
from vispriv.harness.data.image_folder import read_image
from vispriv.plugins.album.photo_network import decode_thumbnail, thumbnail_store
from vispriv.plugins.album.photos import AlbumPhotos

#: Mean |draft - full| in [0, 1] units. Measured on these photos (skimage's, resized to 1024 px
#: on the long side, JPEG quality 90): 0.002-0.0105 at 32, 64 and 128 px; the largest where the
#: 1/8 DCT scale is exactly the target (no resampling left to do: 8x8 block means vs a Gaussian).
TOLERANCE = 0.015
ORIENTATION = 0x0112


def _jpeg(path: Path, image: np.ndarray, side: int = 1024, **kwargs) -> Path:
    h, w = image.shape[:2]
    f = side / max(h, w)
    Image.fromarray(image).resize((round(w * f), round(h * f)), Image.LANCZOS).save(path, quality=90, **kwargs)
    return path


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> list[Path]:
    folder = tmp_path_factory.mktemp("thumbs")
    return [_jpeg(folder / f"{name}.jpg", getattr(skimage.data, name)()) for name in ("astronaut", "chelsea", "coffee")]


def _full_float(path: Path, size: int) -> np.ndarray:
    return square_resize(read_image(path), size)


@pytest.mark.parametrize("size", [32, 64, 128])
def test_draft_decode_agrees_with_the_full_decode(photos, size):
    for path in photos:
        draft = decode_thumbnail(path, size)
        assert draft.dtype == np.uint8 and draft.shape == (size, size, 3)
        assert np.abs(draft / 255.0 - _full_float(path, size)).mean() < TOLERANCE, path.name
    # the bound means something: two different photos are an order of magnitude further apart
    assert np.abs(decode_thumbnail(photos[1], size) / 255.0 - _full_float(photos[2], size)).mean() > 5 * TOLERANCE


def test_full_decode_is_the_previous_reader_rounded_to_uint8(photos):
    np.testing.assert_allclose(decode_thumbnail(photos[1], 64, "full") / 255.0, _full_float(photos[1], 64), atol=0.5 / 255 + 1e-6)


def test_exif_orientation_is_not_applied_like_the_full_reader(tmp_path):
    """Both decodes use the stored pixel order (as read_image and the handcrafted features do)."""
    image = skimage.data.chelsea()  # 451 x 300: landscape, so a rotation would change the crop
    exif = Image.Exif()
    exif[ORIENTATION] = 6  # "rotate 90 CW to display"
    tagged = _jpeg(tmp_path / "tagged.jpg", image, exif=exif)
    plain = _jpeg(tmp_path / "plain.jpg", image)
    with Image.open(tagged) as im:
        assert im.getexif()[ORIENTATION] == 6
    for decode in ("draft", "full"):
        np.testing.assert_array_equal(decode_thumbnail(tagged, 64, decode), decode_thumbnail(plain, 64, decode))
    assert np.abs(decode_thumbnail(tagged, 64) / 255.0 - _full_float(tagged, 64)).mean() < TOLERANCE


def test_grey_jpegs_and_non_jpeg_files_decode_like_the_full_reader(tmp_path):
    grey = tmp_path / "grey.jpg"
    Image.fromarray(skimage.data.camera()).resize((1024, 1024), Image.LANCZOS).save(grey, quality=90)
    png = _jpeg(tmp_path / "really_a_png.jpg", skimage.data.coffee(), format="PNG")  # a .jpg that is a PNG
    for path in (grey, png):
        thumb = decode_thumbnail(path, 64)
        assert thumb.shape == (64, 64, 3) and thumb.dtype == np.uint8
        assert np.abs(thumb / 255.0 - _full_float(path, 64)).mean() < TOLERANCE, path.name
    assert np.all(decode_thumbnail(grey, 64)[..., 0] == decode_thumbnail(grey, 64)[..., 2])


def test_thumbnail_store_is_a_uint8_memmap_of_the_per_photo_decode(photos, tmp_path, capsys):
    cache = Cache(tmp_path / "cache")
    store = thumbnail_store(photos, 48, "draft", key="three-photos", cache=cache)
    rows = np.stack([decode_thumbnail(p, 48) for p in photos])
    mapped = store.memmap()
    assert isinstance(mapped, np.memmap) and mapped.dtype == np.uint8 and mapped.shape == (3, 48, 48, 3)
    np.testing.assert_array_equal(mapped, rows)
    np.testing.assert_array_equal(store.take([1, 2]), rows[1:])
    np.testing.assert_array_equal(store.take([2, 0]), rows[[2, 0]])
    del mapped
    store.close()
    (entry,) = (tmp_path / "cache" / "album-thumbnails").glob("*.npy")
    assert np.load(entry, mmap_mode="r").shape == (3, 48, 48, 3)  # a plain .npy file
    again = thumbnail_store(photos, 48, "draft", key="three-photos", cache=cache)
    assert cache.hits == 1
    np.testing.assert_array_equal(again.take([0, 1, 2]), rows)
    again.close()
    # other size / decode: other entries
    other = thumbnail_store(photos, 48, "full", key="three-photos", cache=cache)
    other.close()
    assert len(list((tmp_path / "cache" / "album-thumbnails").glob("*.npy"))) == 2
    # a damaged entry is found by its (chunked) checksum, reported and rewritten
    data = bytearray(entry.read_bytes())
    data[-1] ^= 0xFF
    entry.write_bytes(bytes(data))
    repaired = thumbnail_store(photos, 48, "draft", key="three-photos", cache=cache)
    assert "does not match its stored sha256" in capsys.readouterr().err
    np.testing.assert_array_equal(repaired.memmap(), rows)
    repaired.close()
    # no cache: a temporary file
    off = thumbnail_store(photos, 48, "draft", key="three-photos", cache=Cache(None))
    np.testing.assert_array_equal(off.memmap(), rows)
    off.close()


def test_network_decode_full_stays_reachable_and_is_cached_apart(tmp_path):
    root = write_geotagged_photos(tmp_path / "flickr", per_place=4)
    ctx = CellContext(seed=0, cache=Cache(tmp_path / "cache"), quiet=True)
    tiny = dict(root=str(root), features="network", network_steps=3, network_width=4, network_input=16, accelerator="cpu",
                n_places=4, collection="R-2", n_albums=2, test_fraction=0.25)
    feats = {d: AlbumPhotos(AlbumPhotos.Config(**tiny, network_decode=d)).real_photos(ctx)[0].features for d in ("draft", "full")}
    assert all(f.shape == (16, 4) and np.all(np.isfinite(f)) for f in feats.values())
    assert len(list((tmp_path / "cache" / "album-thumbnails").glob("*.npy"))) == 2
    assert len(list((tmp_path / "cache" / "album-photo-features").glob("*.npz"))) == 2
