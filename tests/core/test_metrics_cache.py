"""Generic metrics against hand-computed values; the cache's atomicity and no-pickle rule."""

from __future__ import annotations

import numpy as np
import pytest

from vispriv.harness import Cache, CellContext, Images, Labels, Rankings
from vispriv.harness.errors import InputError
from vispriv.plugins.metrics.classification import Accuracy, TopKAccuracy
from vispriv.plugins.metrics.image_quality import MAE, PSNR, SSIM

CTX = CellContext()


def test_mae_and_psnr_by_hand():
    truth = Images(np.zeros((2, 4, 4, 1)))
    est = Images(np.full((2, 4, 4, 1), 0.1))
    assert MAE().score(truth, est, CTX)["mae"] == pytest.approx(0.1)
    # PSNR = 10 log10(1 / MSE) = 10 log10(1 / 0.01) = 20 dB
    assert PSNR().score(truth, est, CTX)["psnr"] == pytest.approx(20.0, abs=1e-4)
    exact = PSNR().score(truth, truth, CTX)
    assert exact["psnr"] == float("inf") and exact["psnr_exact_share"] == 1.0


def test_ssim_identical_is_one_and_noise_lowers_it():
    rng = np.random.default_rng(0)
    truth = Images(rng.random((3, 16, 16, 3)))
    assert SSIM().score(truth, truth, CTX)["ssim"] == pytest.approx(1.0)
    noisy = Images(np.clip(truth.images + rng.normal(0, 0.3, truth.images.shape), 0, 1))
    scored = SSIM().score(truth, noisy, CTX)
    assert scored["ssim"] < 0.8 and scored["ssim_se"] > 0


def test_metrics_align_by_id_and_reject_mismatch():
    truth = Images(np.stack([np.zeros((4, 4, 1)), np.ones((4, 4, 1))]), ids=["a", "b"])
    est = Images(np.ones((1, 4, 4, 1)), ids=["b"])
    assert MAE().score(truth, est, CTX)["mae"] == 0.0
    with pytest.raises(InputError, match="not in truth"):
        MAE().score(truth, Images(np.ones((1, 4, 4, 1)), ids=["z"]), CTX)


def test_accuracy_and_topk_by_hand():
    truth = Labels([0, 1, 2])
    assert Accuracy().score(truth, Labels([0, 1, 0]), CTX)["accuracy"] == pytest.approx(2 / 3)
    scores = Rankings([[0.9, 0.1, 0.0], [0.5, 0.4, 0.1], [0.3, 0.2, 0.1]])
    out = TopKAccuracy(TopKAccuracy.Config(ks=(1, 2))).score(truth, scores, CTX)
    assert out == {"top1_accuracy": pytest.approx(1 / 3), "top2_accuracy": pytest.approx(2 / 3)}
    with pytest.raises(InputError, match="needs 1 <= k <= 3"):
        TopKAccuracy(TopKAccuracy.Config(ks=(5,))).score(truth, scores, CTX)


def test_images_reject_nan_and_bad_shapes():
    with pytest.raises(InputError, match="NaN"):
        Images(np.full((1, 2, 2, 1), np.nan))
    with pytest.raises(InputError, match=r"\(N, H, W, C\)"):
        Images(np.zeros((1, 2, 2, 5)))


def test_cache_round_trip_hits_and_atomic_files(tmp_path):
    cache = Cache(tmp_path)
    calls = []

    def compute():
        calls.append(1)
        return {"x": np.arange(5)}

    a = cache.arrays("ns", {"k": 1}, compute)
    b = cache.arrays("ns", {"k": 1}, compute)
    assert len(calls) == 1 and np.array_equal(a["x"], b["x"]) and cache.hits == 1
    cache.arrays("ns", {"k": 2}, compute)
    assert len(calls) == 2
    files = list((tmp_path / "ns").iterdir())
    assert sorted(f.suffix for f in files if not f.name.startswith(".")) == [".npz", ".npz", ".sum", ".sum"]
    assert not [f for f in files if f.name.startswith(".tmp-")]


def test_cache_refuses_object_arrays_and_recovers_from_corruption(tmp_path):
    cache = Cache(tmp_path)
    with pytest.raises(ValueError, match="numeric arrays only"):
        cache.arrays("ns", "obj", lambda: {"x": np.array([{"a": 1}], dtype=object)})
    path = cache.path("ns", cache.key("ns", "bad"), ".npz")
    path.write_bytes(b"not an npz")
    assert cache.arrays("ns", "bad", lambda: {"y": np.ones(2)})["y"].sum() == 2


def test_disabled_cache_always_computes():
    cache = Cache(None)
    n = []
    cache.json("ns", 1, lambda: n.append(1))
    cache.json("ns", 1, lambda: n.append(1))
    assert len(n) == 2
