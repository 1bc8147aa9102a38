"""The inversion library: sparse maps, the U-Net, training, the checkpoint cache, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from vispriv.harness import Cache, CellContext, Images
from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release.inversion import (
    InversionConfig,
    SparseFeatures,
    load_checkpoint,
    reconstruct,
    train_or_load,
)
from vispriv.plugins.descriptor_release.inversion.featuremap import flat_pixel_index, scatter_to_map
from vispriv.plugins.descriptor_release.inversion.unet import SparseUNet

TINY = dict(crop=32, depth=2, width=8, max_width=16, projection=8, batch_size=4, flip=False)


def ctx_for(tmp_path, seed=0):
    return CellContext(seed=seed, cache=Cache(tmp_path / "cache"), artifact_dir=tmp_path / "art", quiet=True)


def blob_images(n=4, size=32, seed=0):
    """Smooth random grey images (sums of Gaussian blobs) in [0, 1]."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:size, :size]
    out = np.zeros((n, size, size, 1), np.float32)
    for i in range(n):
        for _ in range(4):
            cy, cx = rng.uniform(0, size, 2)
            s = rng.uniform(3, 8)
            out[i, :, :, 0] += rng.uniform(-1, 1) * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * s * s))
    out -= out.min(axis=(1, 2, 3), keepdims=True)
    out /= out.max(axis=(1, 2, 3), keepdims=True)
    return out


def grid_features(images, step=2, channels=4):
    """Keypoints on a grid; each feature encodes the pixel value there (a learnable 'descriptor')."""
    n, h, w, _ = images.shape
    ys, xs = np.mgrid[0:h:step, 0:w:step]
    kp, feats, index = [], [], []
    for i in range(n):
        v = images[i, ys.ravel(), xs.ravel(), 0]
        kp.append(np.stack([xs.ravel() + 0.5, ys.ravel() + 0.5], 1))
        feats.append(np.stack([v, 1 - v, v**2, np.ones_like(v)][:channels], 1) / 8)
        index.append(np.full(len(v), i))
    return SparseFeatures(np.concatenate(kp), np.concatenate(feats), np.concatenate(index), [str(i) for i in range(n)], (h, w))


def test_scatter_averages_duplicates_and_marks_occupancy():
    values = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    index = torch.from_numpy(flat_pixel_index(np.array([0, 0, 1]), np.array([1, 1, 0]), np.array([2, 2, 3]), 2, 4))
    m = scatter_to_map(values, index, 2, 2, 4)
    assert m.shape == (2, 3, 2, 4)
    assert torch.allclose(m[0, :, 1, 2], torch.tensor([2.0, 3.0, 1.0]))
    assert torch.allclose(m[1, :, 0, 3], torch.tensor([5.0, 6.0, 1.0]))
    assert float(m.sum()) == pytest.approx(2 + 3 + 1 + 5 + 6 + 1)


def test_splat_paints_a_disc_inside_its_own_image_and_averages_overlaps():
    """Radius 1 = the centre and its 4 neighbours; pixels off the image are dropped, not
    wrapped onto the next row or image; where two discs meet the values average."""
    values = torch.tensor([[2.0], [4.0]])
    # image 0: keypoint at (row 1, col 1); image 1: keypoint at the corner (0, 0)
    index = torch.from_numpy(flat_pixel_index(np.array([0, 1]), np.array([1, 0]), np.array([1, 0]), 3, 3))
    m = scatter_to_map(values, index, 2, 3, 3, radius=1)
    plus = torch.tensor([[0, 1, 0], [1, 1, 1], [0, 1, 0]], dtype=torch.float32)
    assert torch.equal(m[0, 0], 2 * plus) and torch.equal(m[0, 1], plus)
    corner = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]], dtype=torch.float32)
    assert torch.equal(m[1, 0], 4 * corner) and torch.equal(m[1, 1], corner)
    both = torch.from_numpy(flat_pixel_index(np.array([0, 0]), np.array([1, 1]), np.array([0, 2]), 3, 3))
    m = scatter_to_map(values, both, 1, 3, 3, radius=1)
    assert float(m[0, 0, 1, 1]) == pytest.approx(3.0)  # both discs cover the centre
    assert float(m[0, 0, 1, 0]) == pytest.approx(2.0) and float(m[0, 0, 1, 2]) == pytest.approx(4.0)


def test_splat_gradient_is_the_same_bits_on_every_call_and_thread_count():
    # The splat repeats each keypoint's vector on ~29 pixels; its backward sums those gradients.
    # Advanced indexing summed them with parallel atomic adds (a new order on every call with
    # two threads); index_select's backward sums in index order, as one thread does.
    g = torch.Generator().manual_seed(0)
    values = torch.rand(600, 8, generator=g, requires_grad=True)
    index = torch.randint(0, 2 * 48 * 48, (600,), generator=g)
    weight = torch.rand(2, 9, 48, 48, generator=g)

    def grad_bits(threads: int) -> bytes:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            values.grad = None
            (scatter_to_map(values, index, 2, 48, 48, radius=3) * weight).sum().backward()
            return values.grad.numpy().tobytes()
        finally:
            torch.set_num_threads(before)

    one = grad_bits(1)
    assert {grad_bits(2) for _ in range(30)} == {one}


def test_unet_shape_range_and_projection_is_bias_free():
    net = SparseUNet(16, 1, depth=3, width=8, projection=4).eval()
    assert net.project.bias is None
    out = net(torch.rand(30, 16), torch.randint(0, 2 * 20 * 27, (30,)), 2, 20, 27)
    assert out.shape == (2, 1, 20, 27)
    assert float(out.detach().min()) >= 0 and float(out.detach().max()) <= 1


def test_unet_rejects_wrong_channels_and_images_smaller_than_stride():
    net = SparseUNet(16, 1, depth=3, width=8)
    with pytest.raises(InputError, match="trained on 16"):
        net(torch.rand(5, 32), torch.zeros(5, dtype=torch.long), 1, 16, 16)
    with pytest.raises(InputError, match="smaller than the network stride 8"):
        net(torch.rand(5, 16), torch.zeros(5, dtype=torch.long), 1, 4, 16)


def test_config_validates():
    with pytest.raises(ValidationError, match="multiple of the network stride"):
        InversionConfig(crop=40, depth=4)
    with pytest.raises(ValidationError, match="keep_min"):
        InversionConfig(keep_min=0.9, keep_max=0.5)
    with pytest.raises(ValidationError):
        InversionConfig(unknown=1)


def test_training_is_cached_and_second_call_loads_the_same_weights(tmp_path):
    imgs = blob_images()
    sets = [(Images(imgs), grid_features(imgs))]
    cfg = InversionConfig(steps=3, **TINY)
    ctx = ctx_for(tmp_path)
    first = train_or_load(sets, cfg, ctx)
    second = train_or_load(sets, cfg, ctx)
    assert first.info["trained"] == 1.0 and first.info["train_images_seen"] == 12
    assert first.info["train_images_per_second"] > 0
    assert second.info["trained"] == 0.0 and ctx.cache.hits == 1
    for a, b in zip(first.net.state_dict().values(), second.net.state_dict().values()):
        assert torch.equal(a, b)
    # another cell (another ctx seed) shares the network: section 6.1 trains it once
    assert train_or_load(sets, cfg, ctx_for(tmp_path, seed=5)).info["trained"] == 0.0
    assert train_or_load(sets, cfg.model_copy(update={"seed": 1}), ctx).info["trained"] == 1.0
    # other training data -> another entry
    other = train_or_load([(Images(imgs[:3]), grid_features(imgs[:3]))], cfg, ctx)
    assert other.info["trained"] == 1.0


def test_network_stopped_by_the_time_cap_warns_and_is_not_cached(tmp_path):
    imgs = blob_images(2)
    sets = [(Images(imgs), grid_features(imgs))]
    ctx = ctx_for(tmp_path)
    capped = InversionConfig(steps=100_000, max_minutes=1e-4, **TINY)
    with pytest.warns(UserWarning, match="max_minutes.*not cached"):
        first = train_or_load(sets, capped, ctx)
    assert first.info["train_capped"] == 1.0 and first.info["train_steps"] < 100_000
    with pytest.warns(UserWarning, match="not cached"):
        again = train_or_load(sets, capped, ctx)
    assert again.info["trained"] == 1.0 and ctx.cache.hits == 0


def test_corrupt_cache_entry_is_retrained(tmp_path):
    imgs = blob_images(2)
    sets = [(Images(imgs), grid_features(imgs))]
    cfg = InversionConfig(steps=2, **TINY)
    ctx = ctx_for(tmp_path)
    first = train_or_load(sets, cfg, ctx)
    with open(first.info["checkpoint"], "wb") as fh:
        fh.write(b"not a checkpoint")
    again = train_or_load(sets, cfg, ctx)
    assert again.info["trained"] == 1.0
    assert load_checkpoint(again.info["checkpoint"]).in_channels == 4


def test_checkpoint_errors(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_checkpoint(tmp_path / "missing.ckpt")
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"\x00garbage" * 10)
    with pytest.raises(InputError, match="corrupt"):
        load_checkpoint(bad)
    imgs = blob_images(2)
    trained = train_or_load([(Images(imgs), grid_features(imgs))], InversionConfig(steps=1, **TINY), ctx_for(tmp_path))
    net = load_checkpoint(trained.info["checkpoint"])
    with pytest.raises(InputError, match="expects 4"):
        reconstruct(net, grid_features(imgs, channels=3))
    tiny = SparseFeatures(np.array([[1.0, 1.0]]), np.ones((1, 4)), np.zeros(1), ["0"], (3, 3))
    with pytest.raises(InputError, match="smaller than the network stride"):
        reconstruct(net, tiny)


def test_trained_network_beats_constant_image_on_its_training_images(tmp_path):
    imgs = blob_images(4, seed=1)
    feats = grid_features(imgs)
    cfg = InversionConfig(steps=100, lr=5e-3, keep_min=0.5, **TINY)
    trained = train_or_load([(Images(imgs), feats)], cfg, ctx_for(tmp_path))
    recon = reconstruct(trained.net, feats)
    assert recon.shape == imgs.shape
    net_mae = np.abs(recon - imgs).mean()
    best_constant_mae = np.abs(imgs - np.median(imgs)).mean()
    assert net_mae < 0.7 * best_constant_mae


def _weights_trained_beside(process_threads: int, cfg: InversionConfig, sets, tmp_path) -> bytes:
    """The trained network's weights (bytes) when the process runs ``process_threads`` torch threads."""
    before = torch.get_num_threads()
    torch.set_num_threads(process_threads)
    try:
        net = train_or_load(sets, cfg, ctx_for(tmp_path / f"p{process_threads}-t{cfg.threads}")).net
        assert torch.get_num_threads() == process_threads  # the training's count is restored afterwards
    finally:
        torch.set_num_threads(before)
    return b"".join(t.numpy().tobytes() for t in net.state_dict().values())


def test_network_trains_on_its_configured_thread_count_whatever_the_machine_runs(tmp_path):
    # A 2-core laptop (torch's default: 2 threads) and a 16-core server (16) train the same network:
    # the count is the config's (default 2), not the process's.
    imgs = blob_images(n=8, size=64)
    sets = [(Images(imgs), grid_features(imgs, step=1, channels=4))]
    cfg = InversionConfig(steps=3, **{**TINY, "crop": 64, "width": 32, "max_width": 64, "batch_size": 8})
    assert cfg.threads == 2
    pinned = {_weights_trained_beside(n, cfg, sets, tmp_path) for n in (1, 4)}
    assert len(pinned) == 1
    # ...and the count matters: one thread trains other bits than two on the same data
    one = cfg.model_copy(update={"threads": 1})
    assert _weights_trained_beside(2, one, sets, tmp_path) not in pinned


def test_a_network_that_trained_every_step_is_cached_whatever_its_cap(tmp_path):
    imgs = blob_images()
    sets = [(Images(imgs), grid_features(imgs))]
    ctx = ctx_for(tmp_path)
    assert train_or_load(sets, InversionConfig(steps=2, **TINY), ctx).info["trained"] == 1.0
    assert train_or_load(sets, InversionConfig(steps=2, max_minutes=60, **TINY), ctx).info["trained"] == 0.0
