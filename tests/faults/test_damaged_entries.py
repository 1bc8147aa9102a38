"""Every kind of cache entry, damaged four ways: one warning naming the file, recomputed, the same value.

Kinds (each through the plugin code that reads it): SIFT features and a k-means dictionary
(``.npz``: also how album features, album classifiers and patch databases are stored), a
serialised faiss HNSW index (``.npz`` holding the index bytes), an inversion network
(Lightning checkpoint, ``.ckpt``), a JSON entry and a file too large for memory
(:meth:`Cache.big_file`: album thumbnails, hashed in chunks). Damages: truncated to half, zeroed,
random bytes of the same length, and a valid entry of another key copied over it (payload
and checksum file, or the payload alone). The CLI-level cases are in ``test_cli_faults.py``.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from vispriv.harness import Cache, CellContext, Images
from vispriv.harness.cache_io import STALE_TMP_S, sum_path
from vispriv.plugins.descriptor_release.config import SiftConfig
from vispriv.plugins.descriptor_release.dictionary import build_dictionary
from vispriv.plugins.descriptor_release.inversion import InversionConfig, SparseFeatures, train_or_load
from vispriv.plugins.descriptor_release.ldp import Quantiser, QuantiserConfig
from vispriv.plugins.descriptor_release.sift import extract_features

DAMAGES = ["truncate", "zero", "random", "other-key", "other-payload"]


def _images(seed: int, n: int = 2, size: int = 40) -> Images:
    """Smooth random grey images with corners enough for SIFT."""
    rng = np.random.default_rng(seed)
    small = rng.random((n, size // 8, size // 8, 1))
    return Images(np.kron(small, np.ones((1, 8, 8, 1))).astype(np.float32), ids=[f"{seed}-{i}" for i in range(n)])


def _sparse(images: Images) -> SparseFeatures:
    n, h, w, _ = images.images.shape
    ys, xs = np.mgrid[0:h:2, 0:w:2]
    kp, feats, index = [], [], []
    for i in range(n):
        v = images.images[i, ys.ravel(), xs.ravel(), 0]
        kp.append(np.stack([xs.ravel() + 0.5, ys.ravel() + 0.5], 1))
        feats.append(np.stack([v, 1 - v, v**2, np.ones_like(v)], 1) / 8)
        index.append(np.full(len(v), i))
    return SparseFeatures(np.concatenate(kp), np.concatenate(feats), np.concatenate(index), list(images.ids), (h, w))


SIFT = SiftConfig(max_keypoints=32)
NET = InversionConfig(steps=2, crop=32, depth=2, width=8, max_width=16, projection=8, batch_size=4, flip=False)


def _dictionary_rows(seed: int) -> np.ndarray:
    rows = np.abs(np.random.default_rng(seed).normal(size=(256, 128))).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@dataclass
class Kind:
    """How to compute an entry of this kind (``variant`` picks the key) and compare two values."""

    namespace: str
    suffix: str
    compute: Callable[[Cache, int], object]
    same: Callable[[object, object], bool]


def _arrays_equal(a, b) -> bool:  # type: ignore[no-untyped-def]
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def _sift(cache: Cache, variant: int):  # type: ignore[no-untyped-def]
    f = extract_features(_images(variant), SIFT, cache)
    return [f.keypoints, f.descriptors, f.image_index]


def _dictionary(cache: Cache, variant: int):  # type: ignore[no-untyped-def]
    return [build_dictionary(_images(10 + variant, n=3, size=64), 16 + variant, SIFT, seed=0, augment=0, niter=2,
                             cache=cache)]


def _faiss(cache: Cache, variant: int):  # type: ignore[no-untyped-def]
    q = Quantiser(_dictionary_rows(variant), QuantiserConfig(kind="hnsw", hnsw_m=8, ef_construction=16), cache=cache)
    return [q.assign(_dictionary_rows(99)[:64])]


def _network(cache: Cache, variant: int):  # type: ignore[no-untyped-def]
    images = _images(20 + variant, n=2, size=32)
    ctx = CellContext(seed=0, cache=cache, quiet=True)
    trained = train_or_load([(images, _sparse(images))], NET, ctx)
    return [v.detach().numpy() for v in trained.net.state_dict().values()]


def _json(cache: Cache, variant: int):  # type: ignore[no-untyped-def]
    return cache.json("summary", {"variant": variant}, lambda: {"variant": variant, "values": [0.5, variant, None]})


def _big_file(cache: Cache, variant: int):  # type: ignore[no-untyped-def]
    def write(fh) -> None:  # type: ignore[no-untyped-def]
        fh.write(np.arange(3000 + variant, dtype=np.int32).tobytes())

    with cache.big_file("big", {"variant": variant}, ".bin", write) as fh:
        return [np.frombuffer(fh.read(), np.int32)]


KINDS = {
    "sift-npz": Kind("sift", ".npz", _sift, _arrays_equal),
    "dictionary-npz": Kind("dictionary", ".npz", _dictionary, _arrays_equal),
    "faiss-index": Kind("ldp-quantiser", ".npz", _faiss, _arrays_equal),
    "torch-checkpoint": Kind("inversion-net", ".ckpt", _network, _arrays_equal),
    "json": Kind("summary", ".json", _json, lambda a, b: a == b),
    "big-file": Kind("big", ".bin", _big_file, _arrays_equal),
}


def _entries(root: Path, kind: Kind) -> set[Path]:
    return set((root / kind.namespace).glob(f"*{kind.suffix}"))


def _damage(target: Path, other: Path, how: str) -> None:
    data = target.read_bytes()
    if how == "truncate":
        target.write_bytes(data[: len(data) // 2])
    elif how == "zero":
        target.write_bytes(bytes(len(data)))
    elif how == "random":
        target.write_bytes(np.random.default_rng(0).integers(0, 256, len(data), dtype=np.uint8).tobytes())
    elif how == "other-key":
        shutil.copy(other, target)
        shutil.copy(sum_path(other), sum_path(target))
    else:
        shutil.copy(other, target)


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("name", list(KINDS))
def test_damaged_entry_is_one_warning_and_recomputed_to_the_same_value(name, how, tmp_path, capfd):
    kind = KINDS[name]
    torch.manual_seed(0)
    root = tmp_path / "cache"
    clean = kind.compute(Cache(root), 0)
    (target,) = _entries(root, kind)
    kind.compute(Cache(root), 1)
    (other,) = _entries(root, kind) - {target}
    capfd.readouterr()

    _damage(target, other, how)
    cache = Cache(root)
    again = kind.compute(cache, 0)
    warnings = [line for line in capfd.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and f"cache entry {target} " in warnings[0] and "recomputing" in warnings[0], warnings
    assert kind.same(again, clean)
    assert cache.misses >= 1

    # the recomputed entry was stored again and now reads back silently
    reread = Cache(root)
    assert kind.same(kind.compute(reread, 0), clean)
    assert reread.hits >= 1 and reread.misses == 0
    assert not [line for line in capfd.readouterr().err.splitlines() if line.startswith("warning:")]


def test_a_killed_writers_temporary_file_is_removed_once_stale(tmp_path):
    """Left by an earlier process's killed writer; swept by this process's first write to the folder."""
    cache = Cache(tmp_path)
    (tmp_path / "ns").mkdir()
    stale, fresh = tmp_path / "ns" / ".tmp-stale.npz", tmp_path / "ns" / ".tmp-fresh.npz"
    stale.write_bytes(b"half an entry")
    fresh.write_bytes(b"a write in progress")
    old = time.time() - STALE_TMP_S - 10
    os.utime(stale, (old, old))
    cache.json("ns", 2, lambda: 2)
    assert not stale.exists() and fresh.exists()
