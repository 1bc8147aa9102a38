"""Data sources of the federated deep-gradient-inversion scenario (plugins/federated/deep/sources.py).

CIFAR fixtures are written in the datasets' native python layout (pickled dicts with bytes
keys, uint8 (N, 3072) channel-planar rows, the same file names) with a few images each and
known pixel values, so every read is checked exactly.
"""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest

from vispriv.harness.data.bundled import BUNDLED_SOURCES, square_resize, to_rgb_float
from vispriv.harness.errors import InputError
from vispriv.plugins.federated.deep.sources import (
    ColourImages,
    load_bundled_digits,
    load_bundled_faces,
    load_bundled_photos,
    load_cifar,
    load_colour_folder,
)

CIFAR10_NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
PER_BATCH = 3
N_TEST = 4
#: A marked pixel: image 1 of data_batch_2, row 3, column 17, blue channel.
MARK = dict(batch=2, image=1, row=3, col=17, channel=2, value=251)


def _dump(path: Path, obj: dict) -> None:
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=2)


def _rows(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)


def _expected(rows: np.ndarray) -> np.ndarray:
    """Channel-planar rows as (N, 32, 32, 3) floats, plane by plane (independent of the reader)."""
    planes = [rows[:, c * 1024 : (c + 1) * 1024].reshape(len(rows), 32, 32) for c in range(3)]
    return np.stack(planes, axis=-1).astype(np.float64) / 255.0


def write_cifar10(folder: Path, seed: int = 0) -> dict:
    """A CIFAR-10 folder in the shipped layout; returns the rows and labels written."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    written: dict = {"train_rows": [], "train_labels": []}
    for b in range(1, 6):
        rows = _rows(rng, PER_BATCH)
        if b == MARK["batch"]:
            rows[MARK["image"], MARK["channel"] * 1024 + MARK["row"] * 32 + MARK["col"]] = MARK["value"]
        labels = [int(v) for v in rng.integers(0, 10, PER_BATCH)]
        _dump(folder / f"data_batch_{b}", {
            b"batch_label": f"training batch {b} of 5".encode(),
            b"labels": labels,
            b"data": rows,
            b"filenames": [f"img_{b}_{i}.png".encode() for i in range(PER_BATCH)],
        })
        written["train_rows"].append(rows)
        written["train_labels"] += labels
    rows = _rows(rng, N_TEST)
    labels = [9, 0, 4, 1]
    _dump(folder / "test_batch", {b"batch_label": b"testing batch 1 of 1", b"labels": labels, b"data": rows,
                                  b"filenames": [b"t.png"] * N_TEST})
    _dump(folder / "batches.meta", {b"label_names": [n.encode() for n in CIFAR10_NAMES],
                                    b"num_cases_per_batch": PER_BATCH, b"num_vis": 3072})
    written["train_rows"] = np.concatenate(written["train_rows"])
    written["test_rows"], written["test_labels"] = rows, labels
    return written


def write_cifar100(folder: Path, seed: int = 1) -> dict:
    """A CIFAR-100 folder in the shipped layout (train, test, meta)."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    written: dict = {}
    for split, n in (("train", 5), ("test", 3)):
        rows = _rows(rng, n)
        fine = [int(v) for v in rng.integers(0, 100, n)]
        coarse = [f % 20 for f in fine]
        _dump(folder / split, {b"filenames": [b"x.png"] * n, b"batch_label": split.encode(),
                               b"fine_labels": fine, b"coarse_labels": coarse, b"data": rows})
        written[split] = (rows, fine, coarse)
    _dump(folder / "meta", {b"fine_label_names": [f"fine_{i}".encode() for i in range(100)],
                            b"coarse_label_names": [f"coarse_{i}".encode() for i in range(20)]})
    return written


@pytest.fixture
def cifar10(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    return folder, write_cifar10(folder)


@pytest.fixture
def cifar100(tmp_path):
    folder = tmp_path / "cifar-100-python"
    return folder, write_cifar100(folder)


def _raises(match: str, fn, *args, **kw) -> str:
    with pytest.raises(InputError, match=match) as err:
        fn(*args, **kw)
    text = str(err.value)
    assert "\n" not in text
    return text


# --------------------------------------------------------------------------- CIFAR-10


def test_cifar10_train_read_exactly(cifar10):
    folder, w = cifar10
    out = load_cifar(folder)
    assert isinstance(out, ColourImages)
    assert out.images.shape == (5 * PER_BATCH, 32, 32, 3)
    assert out.images.dtype == np.float32 and out.labels.dtype == np.int64
    np.testing.assert_allclose(out.images, _expected(w["train_rows"]), atol=1e-7)
    assert out.labels.tolist() == w["train_labels"]
    assert out.class_names == CIFAR10_NAMES
    assert out.provenance == ""
    # The marked pixel, by hand: row 3, column 17, blue, of image 1 of the second batch.
    i = (MARK["batch"] - 1) * PER_BATCH + MARK["image"]
    assert out.images[i, MARK["row"], MARK["col"], MARK["channel"]] == np.float32(MARK["value"] / 255.0)
    r = w["train_rows"][i]
    assert out.images[i, 0, 0].tolist() == pytest.approx([r[0] / 255, r[1024] / 255, r[2048] / 255])
    assert out.images[i, 1, 0, 0] == pytest.approx(r[32] / 255)  # row-major: index 32 is row 1, column 0


def test_cifar10_test_split_and_parent_folder(cifar10):
    folder, w = cifar10
    out = load_cifar(folder.parent, split="test")
    assert out.images.shape == (N_TEST, 32, 32, 3)
    np.testing.assert_allclose(out.images, _expected(w["test_rows"]), atol=1e-7)
    assert out.labels.tolist() == [9, 0, 4, 1]
    assert out.class_names[9] == "truck"


def test_cifar10_coarse_is_an_error(cifar10):
    folder, _ = cifar10
    _raises(r"batches\.meta.*CIFAR-10", load_cifar, folder, coarse=True)


def test_cifar10_missing_batch(cifar10):
    folder, _ = cifar10
    (folder / "data_batch_3").unlink()
    _raises("data_batch_3", load_cifar, folder)
    assert load_cifar(folder, split="test").images.shape[0] == N_TEST  # the test split does not need it


def test_cifar10_missing_meta(cifar10):
    folder, _ = cifar10
    (folder / "batches.meta").unlink()
    _raises(r"batches\.meta", load_cifar, folder, split="test")


def test_cifar10_truncated_pickle(cifar10):
    folder, _ = cifar10
    path = folder / "data_batch_2"
    path.write_bytes(path.read_bytes()[:1000])
    _raises("data_batch_2.*unpickled", load_cifar, folder)


class _RunsCode:
    """A pickle payload that would call a function on load (here a harmless one that leaves a mark)."""

    def __init__(self, mark: Path) -> None:
        self.mark = mark

    def __reduce__(self):
        return (Path.touch, (self.mark,))


def test_cifar_pickle_naming_any_other_global_is_refused_not_run(cifar10, tmp_path):
    folder, _ = cifar10
    mark = tmp_path / "ran"
    with open(folder / "data_batch_3", "wb") as f:
        pickle.dump({b"data": _RunsCode(mark), b"labels": [0]}, f)
    text = _raises("data_batch_3.*not allowed", load_cifar, folder)
    assert "pathlib" in text and not mark.exists()


def test_cifar10_wrong_array_size(cifar10):
    folder, _ = cifar10
    _dump(folder / "data_batch_4", {b"labels": [0, 1, 2], b"data": np.zeros((3, 3071), np.uint8)})
    text = _raises("data_batch_4", load_cifar, folder)
    assert "3072" in text and "(3, 3071)" in text


def test_cifar10_flat_data_is_a_size_error(cifar10):
    folder, _ = cifar10
    _dump(folder / "test_batch", {b"labels": [0, 1], b"data": np.zeros(2 * 3072, np.uint8)})
    _raises("test_batch.*3072", load_cifar, folder, split="test")


def test_cifar10_label_count_mismatch(cifar10):
    folder, _ = cifar10
    _dump(folder / "test_batch", {b"labels": [0, 1, 2], b"data": np.zeros((4, 3072), np.uint8)})
    text = _raises("test_batch", load_cifar, folder, split="test")
    assert "3 labels" in text and "4 images" in text


def test_cifar10_label_out_of_range(cifar10):
    folder, _ = cifar10
    _dump(folder / "test_batch", {b"labels": [0, 10], b"data": np.zeros((2, 3072), np.uint8)})
    _raises("test_batch.*10 classes", load_cifar, folder, split="test")


def test_cifar10_missing_key(cifar10):
    folder, _ = cifar10
    _dump(folder / "test_batch", {b"labels": [0]})
    _raises("test_batch.*b'data'", load_cifar, folder, split="test")


# --------------------------------------------------------------------------- CIFAR-100


def test_cifar100_fine_and_coarse(cifar100):
    folder, w = cifar100
    rows, fine, coarse = w["train"]
    out_fine = load_cifar(folder)
    assert out_fine.images.shape == (5, 32, 32, 3)
    np.testing.assert_allclose(out_fine.images, _expected(rows), atol=1e-7)
    assert out_fine.labels.tolist() == fine
    assert len(out_fine.class_names) == 100 and out_fine.class_names[42] == "fine_42"
    out_coarse = load_cifar(folder.parent, coarse=True)  # found from the parent folder
    assert out_coarse.labels.tolist() == coarse
    assert len(out_coarse.class_names) == 20 and out_coarse.class_names[7] == "coarse_7"
    np.testing.assert_array_equal(out_coarse.images, out_fine.images)
    assert fine != coarse  # the fixture tells fine from coarse apart

    rows_t, fine_t, _ = w["test"]
    test = load_cifar(folder, split="test")
    np.testing.assert_allclose(test.images, _expected(rows_t), atol=1e-7)
    assert test.labels.tolist() == fine_t


def test_cifar100_missing_meta(cifar100):
    folder, _ = cifar100
    (folder / "meta").unlink()
    _raises(r"lacks meta", load_cifar, folder)


def test_cifar100_coarse_count_mismatch(cifar100):
    folder, _ = cifar100
    _dump(folder / "test", {b"fine_labels": [1, 2], b"coarse_labels": [1], b"data": np.zeros((2, 3072), np.uint8)})
    assert load_cifar(folder, split="test").labels.tolist() == [1, 2]
    text = _raises("test", load_cifar, folder, split="test", coarse=True)
    assert "1 coarse_labels for 2 images" in text


def test_not_a_cifar_folder(tmp_path):
    (tmp_path / "readme.txt").write_text("hi")
    text = _raises("not a CIFAR folder", load_cifar, tmp_path)
    for name in ("cifar-10-batches-py", "data_batch_1", "batches.meta", "cifar-100-python", "meta"):
        assert name in text
    _raises("not a directory", load_cifar, tmp_path / "nowhere")


def test_parent_with_both_cifars_is_ambiguous(tmp_path):
    write_cifar10(tmp_path / "cifar-10-batches-py")
    write_cifar100(tmp_path / "cifar-100-python")
    _raises("both", load_cifar, tmp_path)


# --------------------------------------------------------------------------- bundled faces


def test_bundled_faces():
    from skimage.data import lfw_subset

    out = load_bundled_faces()
    assert out.images.shape == (200, 32, 32, 1) and out.images.dtype == np.float32
    assert out.images.min() >= 0.0 and out.images.max() <= 1.0
    assert out.images.min() < 0.05 and out.images.max() > 0.95
    assert out.labels.dtype == np.int64 and np.bincount(out.labels).tolist() == [100, 100]
    assert out.class_names == ["non-face", "face"]
    assert out.labels[:100].tolist() == [1] * 100  # the first 100 of lfw_subset are the faces
    # Faces are detailed; the non-faces are mostly flat background crops.
    detail = np.abs(np.diff(out.images, axis=2)).mean(axis=(1, 2, 3))
    assert detail[out.labels == 1].mean() > 2 * detail[out.labels == 0].mean()
    assert out.provenance
    np.testing.assert_array_equal(load_bundled_faces().images, out.images)
    # At the native size the images are the bundled ones, in their order.
    native = load_bundled_faces(size=25)
    np.testing.assert_allclose(native.images[..., 0], lfw_subset(), atol=1e-6)
    assert load_bundled_faces(size=16).images.shape == (200, 16, 16, 1)


def test_bundled_digits():
    """scikit-learn's digits, counts / 16, enlarged: at the native size the file's blocks exactly;
    enlarged, the 4x4 block means of the 32x32 image follow the 8x8 pixels (bilinear blends neighbours)."""
    from sklearn.datasets import load_digits

    raw = load_digits()
    out = load_bundled_digits()
    assert out.images.shape == (1797, 32, 32, 1) and out.images.dtype == np.float32
    assert out.images.min() >= 0.0 and out.images.max() <= 1.0
    np.testing.assert_array_equal(out.labels, raw.target)
    assert out.class_names == [str(d) for d in range(10)]
    assert "digits" in out.provenance and "32x32" in out.provenance
    np.testing.assert_allclose(load_bundled_digits(size=8).images[..., 0], raw.images / 16.0, atol=1e-6)
    blocks = out.images[..., 0].reshape(1797, 8, 4, 8, 4).mean(axis=(2, 4))
    assert np.corrcoef(blocks.ravel(), raw.images.ravel())[0, 1] > 0.95


# --------------------------------------------------------------------------- bundled photos


@pytest.fixture(scope="module")
def photos():
    return load_bundled_photos()


def test_bundled_photos(photos):
    out = photos
    n = len(out.class_names)
    assert n >= 10
    assert out.images.shape == (16 * n, 32, 32, 3) and out.images.dtype == np.float32
    assert out.images.min() >= 0.0 and out.images.max() <= 1.0
    assert np.bincount(out.labels).tolist() == [16] * n
    assert set(out.class_names) <= set(BUNDLED_SOURCES)
    # Colour photos only; grey ones (camera, moon, ...) and the stereo pair's second view are left out.
    assert {"astronaut", "chelsea", "coffee"} <= set(out.class_names)
    assert not {"camera", "moon", "coins", "page", "motorcycle_right"} & set(out.class_names)
    for c in range(n):
        crops = out.images[out.labels == c]
        assert np.abs(crops - crops[..., :1]).max() > 0.05  # colour, not grey replicated
    # Distinct and not flat.
    flat = out.images.reshape(len(out.images), -1)
    assert len(np.unique(flat, axis=0)) == len(flat)
    assert out.images.std(axis=(1, 2, 3)).min() > 0.02
    assert "bundled photos" in out.provenance and "one class per photo" in out.provenance


def test_bundled_photos_positions_and_determinism(photos):
    # 16 crops tile the photo resized to 4 x 32 px: the first is its top-left, the last its bottom-right.
    i = photos.class_names.index("astronaut")
    resized = np.clip(square_resize(to_rgb_float(BUNDLED_SOURCES["astronaut"]()), 128), 0, 1)
    crops = photos.images[photos.labels == i]
    np.testing.assert_allclose(crops[0], resized[:32, :32], atol=1e-6)
    np.testing.assert_allclose(crops[5], resized[32:64, 32:64], atol=1e-6)
    np.testing.assert_allclose(crops[-1], resized[96:, 96:], atol=1e-6)
    again = load_bundled_photos()
    np.testing.assert_array_equal(again.images, photos.images)
    assert again.class_names == photos.class_names


def test_bundled_photos_non_square_count():
    out = load_bundled_photos(size=16, per_photo=5)
    n = len(out.class_names)
    assert out.images.shape == (5 * n, 16, 16, 3)
    assert np.bincount(out.labels).tolist() == [5] * n
    flat = out.images.reshape(len(out.images), -1)
    assert len(np.unique(flat, axis=0)) == len(flat)


# --------------------------------------------------------------------------- colour folder


def _png(path: Path, arr: np.ndarray, mode: str) -> None:
    from PIL import Image

    Image.fromarray(arr, mode=mode).save(path)


def test_colour_folder(tmp_path):
    from PIL import Image

    (tmp_path / "cats").mkdir()
    (tmp_path / "dogs").mkdir()
    _png(tmp_path / "cats" / "grey.png", np.full((20, 30), 128, np.uint8), "L")
    rgba = np.zeros((16, 16, 4), np.uint8)
    rgba[..., :3] = (200, 10, 50)
    rgba[..., 3] = 0  # fully transparent: the colour is kept, alpha dropped (not composited)
    _png(tmp_path / "cats" / "rgba.png", rgba, "RGBA")
    halves = np.zeros((16, 16, 3), np.uint8)
    halves[:8] = (255, 0, 0)  # top red
    halves[8:] = (0, 0, 255)  # bottom blue
    _png(tmp_path / "dogs" / "halves.png", halves, "RGB")
    Image.new("CMYK", (12, 12), (0, 255, 255, 0)).save(tmp_path / "dogs" / "cmyk.jpg")  # red in CMYK
    (tmp_path / "dogs" / "broken.png").write_bytes(b"not a png at all")
    (tmp_path / "dogs" / "notes.txt").write_text("not an image: ignored")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = load_colour_folder(tmp_path, size=8)
    assert len(caught) == 1
    msg = str(caught[0].message)
    assert "skipped 1 unreadable" in msg and "broken.png" in msg and "notes.txt" not in msg

    assert out.class_names == ["cats", "dogs"]
    assert out.labels.tolist() == [0, 0, 1, 1]  # cats/grey, cats/rgba, dogs/cmyk, dogs/halves
    assert out.images.shape == (4, 8, 8, 3) and out.images.dtype == np.float32
    assert out.images.min() >= 0.0 and out.images.max() <= 1.0
    assert out.provenance == ""
    np.testing.assert_allclose(out.images[0], 128 / 255, atol=1e-6)  # grey replicated to RGB
    np.testing.assert_allclose(out.images[1], np.broadcast_to(np.array([200, 10, 50]) / 255, (8, 8, 3)), atol=1e-6)
    np.testing.assert_allclose(out.images[2], np.broadcast_to([1.0, 0.0, 0.0], (8, 8, 3)), atol=0.05)
    np.testing.assert_allclose(out.images[3, 0, 0], [1, 0, 0], atol=1e-6)  # top stays on top
    np.testing.assert_allclose(out.images[3, 7, 7], [0, 0, 1], atol=1e-6)


def test_colour_folder_clutter_and_errors(tmp_path):
    for name in ("a", "b", "BACKGROUND_Google"):
        (tmp_path / name).mkdir()
        _png(tmp_path / name / "x.png", np.full((4, 4, 3), 9, np.uint8), "RGB")
    with pytest.warns(UserWarning, match="BACKGROUND_Google"):
        out = load_colour_folder(tmp_path, size=4)
    assert out.class_names == ["a", "b"] and len(out.images) == 2

    one = tmp_path / "one"
    (one / "only").mkdir(parents=True)
    _raises("at least 2 class", load_colour_folder, one, 8)
    _raises("not a directory", load_colour_folder, tmp_path / "nowhere", 8)
    empty = tmp_path / "empty"
    (empty / "p").mkdir(parents=True)
    (empty / "q").mkdir()
    (empty / "q" / "bad.jpg").write_bytes(b"")
    with pytest.warns(UserWarning, match=r"skipped 1 .*bad\.jpg \(empty file\)"):
        _raises("no readable images", load_colour_folder, empty, 8)
