"""The imprint attack (Fowl et al., ICLR 2022): exact recovery from an average, a shared bin's mixture,
DPHE's published average with real Paillier keys, and an honest model refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vispriv.harness import CellContext, Images
from vispriv.harness.alignment import align
from vispriv.harness.errors import InputError
from vispriv.plugins.attacks.imprint import Imprint
from vispriv.plugins.defenses.dphe import Dphe
from vispriv.plugins.federated.deep.dataset import DeepFederatedImages
from vispriv.plugins.federated.deep.imprint import find_block, imprint_model, read_bins
from vispriv.plugins.federated.deep.imprint_dataset import ImprintedDeepFederatedImages
from vispriv.plugins.federated.deep.local import LocalWork, client_update
from vispriv.plugins.federated.deep.models import build_model
from vispriv.plugins.federated.deep.payloads import (
    DeepFederatedPublic,
    DeepPublishedAverage,
    flatten,
    state_of,
    to_tensor,
)
from vispriv.plugins.metrics.image_quality import per_image_quality
from vispriv.plugins.metrics.recognisable import FaithfulShare

#: t_1 < ... < t_5 on the mean brightness: bins (0.1, 0.3], (0.3, 0.5], (0.5, 0.7], (0.7, 0.9], (0.9, inf).
THRESHOLDS = [0.1, 0.3, 0.5, 0.7, 0.9]


def _images(brightness: list[float], seed: int = 0) -> np.ndarray:
    """8x8 grey images (N, H, W, 1) with exactly the given mean brightness (a pattern of zero mean on top)."""
    rng = np.random.default_rng(seed)
    out = []
    for b in brightness:
        pattern = rng.uniform(-0.08, 0.08, (8, 8, 1))
        out.append(b + pattern - pattern.mean())
    return np.asarray(out, np.float32)


def _public(model: torch.nn.Module, bins: int) -> DeepFederatedPublic:
    return DeepFederatedPublic(
        arch="lenet", width=16, n_classes=3, image_shape=(1, 8, 8), mean=[0.5], std=[0.5], state=state_of(model),
        work={"mode": "fedsgd", "steps": 1, "lr": 0.1, "batchnorm": "eval"},
        public_images=_images([0.5, 0.5]), public_labels=np.zeros(2, np.int64), imprint={"bins": bins, "statistic": "brightness"},
    )


def _hand_model() -> torch.nn.Module:
    """DLG's LeNet behind an imprint block whose thresholds are THRESHOLDS exactly."""
    model = imprint_model(build_model("lenet", 3, 1, 8, seed=0, mean=[0.5], std=[0.5]), to_tensor(_images([0.5, 0.6])),
                         len(THRESHOLDS), "brightness", 0)
    with torch.no_grad():
        find_block(model).measure.bias.copy_(-torch.tensor(THRESHOLDS))
    return model


def _two_user_average(model: torch.nn.Module, images: np.ndarray, labels: list[int]) -> DeepPublishedAverage:
    """Users 0 and 1 hold two images each; the release is the plain mean of their FedSGD gradients."""
    updates = [
        flatten(client_update(model, to_tensor(images[2 * n : 2 * n + 2]), torch.tensor(labels[2 * n : 2 * n + 2]), LocalWork()))
        for n in range(2)
    ]
    ids = [[f"u{n}-i{k}" for k in range(2)] for n in range(2)]
    return DeepPublishedAverage(protocol={"batch_size": 2}, target_ids=ids, average=np.mean(updates, axis=0))


def _psnr(truth: np.ndarray, estimate: Images) -> dict[str, float]:
    ids = [f"u{n}-i{k}" for n in range(2) for k in range(2)]
    matched = align(Images(truth, ids, sets=["all"] * 4), estimate)
    return {str(r["id"]): float(r["psnr"]) for r in per_image_quality(Images(truth, ids), matched, ("psnr",))}


def test_one_image_per_bin_is_recovered_exactly_from_a_two_user_average():
    """Brightness 0.2, 0.4, 0.6, 0.8: one image in each of the first four bins, so the average of
    the two users' gradients gives every image back as (dW_i - dW_i+1) / (db_i - db_i+1)."""
    model = _hand_model()
    images = _images([0.4, 0.8, 0.2, 0.6])
    release = _two_user_average(model, images, [0, 1, 2, 0])
    result = Imprint().attack(release, _public(model, len(THRESHOLDS)), CellContext(seed=0, quiet=True))
    psnr = _psnr(images, result.estimate["images"])
    assert min(psnr.values()) >= 40, psnr  # float precision: 126 to 158 dB when written
    assert result.metrics["bins_read_share"] == 1.0


def test_two_images_in_one_bin_come_out_as_their_mixture_not_separately():
    """Brightness 0.2 and 0.25 share the bin (0.1, 0.3]: neighbouring rows cannot split them, so
    that bin gives (c_a x_a + c_b x_b) / (c_a + c_b) with c = each image's own bias gradient."""
    model = _hand_model()
    images = _images([0.2, 0.6, 0.25, 0.8])
    labels = [0, 1, 2, 0]
    release = _two_user_average(model, images, labels)
    block = find_block(model)
    rows = [i for i, p in enumerate(model.parameters()) if p is block.measure.weight or p is block.measure.bias]
    update = torch.from_numpy(release.average)
    sizes = [p.numel() for p in model.parameters()]
    starts = np.cumsum([0, *sizes])
    dw = update[starts[rows[0]] : starts[rows[0] + 1]].reshape(len(THRESHOLDS), -1).double().numpy()
    db = update[starts[rows[1]] : starts[rows[1] + 1]].double().numpy()
    readout = read_bins(dw, db, block.measure.bias.detach().double().numpy())
    own = [client_update(model, to_tensor(images[[k]]), torch.tensor([labels[k]]), LocalWork()) for k in (0, 2)]
    c = np.array([float(u[rows[1]][0]) for u in own])  # each image's own gradient at bin 1's bias
    mixture = (c[0] * images[0].reshape(-1) + c[1] * images[2].reshape(-1)) / c.sum()
    np.testing.assert_allclose(readout.weights[0] / readout.biases[0], mixture, atol=1e-4)
    assert abs(readout.biases[1]) < 1e-9 * abs(readout.biases).max()  # (0.3, 0.5]: empty
    psnr = _psnr(images, Imprint().attack(release, _public(model, len(THRESHOLDS)), CellContext(seed=0, quiet=True))
                 .estimate["images"])
    assert psnr["u0-i1"] >= 40 and psnr["u1-i1"] >= 40  # 0.6 and 0.8 are alone in their bins
    pair = max(psnr["u0-i0"], psnr["u1-i0"])  # 0.2 and 0.25: one gets the mixture, the other the mean image
    assert pair < 30 and min(psnr["u0-i1"], psnr["u1-i1"]) - pair > 10


def test_dphe_published_average_gives_the_imprinted_images_to_the_aggregator(tmp_path):
    """Real Paillier keys (256 bits): the aggregator decrypts only the average of 3 users' updates,
    and the imprint reads single images out of it."""
    ctx = CellContext(seed=0, quiet=True, artifact_dir=tmp_path)
    config = ImprintedDeepFederatedImages.Config(source="digits", size=8, n_users=3, batch_size=2, test_images=4,
                                                 public_images=64, imprint_bins=128)
    scene = ImprintedDeepFederatedImages(config).load(ctx)
    protected = Dphe(Dphe.Config(key_bits=256, workers=1, rounds=1)).protect(scene.private, scene.public, ctx)
    assert isinstance(protected.release, DeepPublishedAverage)
    # the aggregator's release holds the average only: no user's own update without an insider observer
    assert protected.release.observer is None and protected.release.own_update.shape == (0,)
    result = Imprint().attack(protected.release, scene.public, ctx)
    truth = protected.truth["images"]
    estimate = result.estimate["images"]
    assert set(estimate.sets) == {"all"}
    share = FaithfulShare().score(truth, align(truth, estimate), ctx)["faithful_share"]
    assert share >= 0.5, share
    assert protected.utility["secure_sum_max_abs_error"] < 1e-6


def test_a_model_without_an_imprint_block_is_one_input_error():
    ctx = CellContext(seed=0, quiet=True)
    scene = DeepFederatedImages(DeepFederatedImages.Config(source="digits", size=8, n_users=1, test_images=2,
                                                           public_images=4)).load(ctx)
    release = DeepPublishedAverage(protocol={"batch_size": 1}, target_ids=[["u0-i0"]],
                                   average=np.zeros(sum(p.numel() for p in scene.public.model().parameters())))
    with pytest.raises(InputError, match="the global model has no imprint block") as error:
        Imprint().attack(release, scene.public, ctx)
    assert "\n" not in str(error.value)


def test_faithful_share_counts_images_at_30_db_and_above():
    truth = Images(np.full((3, 4, 4, 1), 0.5, np.float32), ["a", "b", "c"])
    # MSE 1e-2 -> 20 dB, 0.0316^2 -> 30.006 dB, 1e-4 -> 40 dB
    estimate = Images(np.stack([np.full((4, 4, 1), 0.5 + d, np.float32) for d in (0.1, 0.0316, 0.01)]), ["a", "b", "c"])
    scored = FaithfulShare().score(truth, estimate, CellContext(seed=0, quiet=True))
    assert scored == {"faithful_share": pytest.approx(2 / 3)}
    strict = FaithfulShare(FaithfulShare.Config(threshold_db=35)).score(truth, estimate, CellContext(seed=0, quiet=True))
    assert strict["faithful_share"] == pytest.approx(1 / 3)

