"""Models, local work, label recovery, pruning, DP-SGD and the set alignment, each against a hand or brute-force case."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from vispriv.harness import Images, Labels
from vispriv.harness.alignment import align
from vispriv.plugins.defenses.dp_sgd import dp_epsilon, private_gradient
from vispriv.plugins.defenses.gradient_pruning import prune_smallest
from vispriv.plugins.federated.deep.labels import counts_to_labels, recover_labels
from vispriv.plugins.federated.deep.local import LocalWork, as_gradient, client_update, trainable
from vispriv.plugins.federated.deep.models import build_model


def test_lenet_is_dlgs_lenet_with_uniform_half_weights():
    model = build_model("lenet", 10, 3, 32, seed=1)
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size, c.stride) for c in convs] == [(12, (5, 5), (2, 2)), (12, (5, 5), (2, 2)), (12, (5, 5), (1, 1))]
    assert any(isinstance(m, torch.nn.Sigmoid) for m in model.modules())
    values = torch.cat([p.reshape(-1) for p in model.parameters()])
    assert values.min() >= -0.5 and values.max() <= 0.5 and values.std() > 0.25  # uniform on [-0.5, 0.5]: std 0.289
    same = build_model("lenet", 10, 3, 32, seed=1)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), same.parameters()))


def test_resnet18_has_torchvisions_parameter_names_and_count():
    model = build_model("resnet18", 10, 3, 32, cifar_stem=False).net
    names = dict(model.named_parameters())
    assert names["conv1.weight"].shape == (64, 3, 7, 7)
    assert "layer4.1.bn2.weight" in names and "layer2.0.downsample.0.weight" in names
    # torchvision's resnet18(num_classes=10) has 11,181,642 parameters.
    assert sum(p.numel() for p in model.parameters()) == 11_181_642


def test_convnet_width_scales_and_classifies_32px():
    model = build_model("convnet", 7, 3, 32, width=4)
    assert model(torch.rand(2, 3, 32, 32)).shape == (2, 7)
    with pytest.raises(ValueError, match="27x27"):
        build_model("convnet", 7, 3, 16)


def _batch(b: int, size: int = 8, classes: int = 5, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(b, 3, size, size, generator=g), torch.randint(0, classes, (b,), generator=g)


def test_fedavg_one_step_is_minus_lr_times_the_fedsgd_gradient_and_two_steps_unroll_sgd():
    x, y = _batch(3)
    model = build_model("lenet", 5, 3, 8, seed=0)
    grad = client_update(model, x, y, LocalWork("fedsgd"))
    one = client_update(model, x, y, LocalWork("fedavg", steps=1, lr=0.05))
    for g, u in zip(grad, one):
        torch.testing.assert_close(u, -0.05 * g)
    two = client_update(model, x, y, LocalWork("fedavg", steps=2, lr=0.05))
    copy = build_model("lenet", 5, 3, 8, seed=0)
    before = [p.detach().clone() for p in copy.parameters()]
    opt = torch.optim.SGD(copy.parameters(), lr=0.05)
    for _ in range(2):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(copy(x), y).backward()
        opt.step()
    for u, p, b in zip(two, copy.parameters(), before):
        torch.testing.assert_close(u, p.detach() - b, rtol=1e-5, atol=1e-6)
    scaled = as_gradient(two, LocalWork("fedavg", steps=2, lr=0.05))
    assert all(torch.allclose(s, -t / 0.1) for s, t in zip(scaled, two))


@pytest.mark.parametrize("arch", ["lenet", "convnet"])
def test_idlg_reads_a_single_label_from_the_last_layer(arch):
    size = 8 if arch == "lenet" else 27
    for seed in range(6):
        x, y = _batch(1, size, classes=6, seed=seed)
        model = build_model(arch, 6, 3, size, width=2, seed=seed)
        grad = dict(zip(trainable(model), client_update(model, x, y, LocalWork())))
        assert recover_labels(model, grad, 1).tolist() == y.tolist()


def test_count_aware_labels_of_a_batch():
    assert counts_to_labels(np.array([2.6, 0.2, 1.3, -0.4]), 4).tolist() == [0, 0, 0, 2]
    x, y = _batch(8, 8, classes=5, seed=3)
    model = build_model("lenet", 5, 3, 8, seed=3)
    grad = dict(zip(trainable(model), client_update(model, x, y, LocalWork())))
    public = torch.rand(32, 3, 8, 8, generator=torch.Generator().manual_seed(9))
    got = recover_labels(model, grad, 8, public)
    agree = int(np.minimum(np.bincount(got, minlength=5), np.bincount(y.numpy(), minlength=5)).sum())
    assert agree >= 7, (got.tolist(), sorted(y.tolist()))


def test_pruning_zeroes_exactly_the_smallest_magnitudes():
    u = np.array([0.5, -0.1, 0.3, -2.0, 0.05], np.float32)
    assert prune_smallest(u, 0.4).tolist() == pytest.approx([0.5, 0.0, 0.3, -2.0, 0.0])
    assert prune_smallest(u, 0.0).tolist() == pytest.approx(u.tolist())


def test_dp_sgd_step_is_clipped_sum_plus_noise_over_b():
    x, y = _batch(2, 8, 5, seed=1)
    model = build_model("lenet", 5, 3, 8, seed=1)
    model.eval()
    params = {k: p.detach() for k, p in trainable(model).items()}
    per = []
    for i in range(2):
        g = client_update(model, x[i : i + 1], y[i : i + 1], LocalWork())
        norm = torch.sqrt(sum((t**2).sum() for t in g))
        per.append([t * min(1.0, 0.01 / float(norm)) for t in g])
    expected = [(a + b) / 2 for a, b in zip(*per)]
    got = private_gradient(model, params, x, y, clip=0.01, sigma=0.0, generator=torch.Generator())
    for e, k in zip(expected, params):
        torch.testing.assert_close(got[k], e, rtol=1e-4, atol=1e-7)
    noisy = private_gradient(model, params, x, y, clip=0.01, sigma=1.0, generator=torch.Generator().manual_seed(0))
    residual = torch.cat([(noisy[k] - got[k]).reshape(-1) for k in params])
    assert residual.std().item() == pytest.approx(1.0 * 0.01 / 2, rel=0.05)  # N(0, sigma^2 C^2) / B


def test_dp_sgd_leaves_an_example_inside_the_clipping_norm_as_it_is():
    """Abadi et al. Algorithm 1: g / max(1, ||g|| / C) -- an example already inside the norm is not scaled up to C."""
    x, y = _batch(2, 8, 5, seed=1)
    model = build_model("lenet", 5, 3, 8, seed=1)
    model.eval()
    params = {k: p.detach() for k, p in trainable(model).items()}
    per = [client_update(model, x[i : i + 1], y[i : i + 1], LocalWork()) for i in range(2)]
    norms = [float(torch.sqrt(sum((t**2).sum() for t in g))) for g in per]
    clip = (norms[0] + norms[1]) / 2  # between the two norms: one example is clipped, the other kept whole
    assert min(norms) < clip < max(norms) and abs(norms[0] - norms[1]) > 0.1 * clip
    expected = [(a * min(1.0, clip / norms[0]) + b * min(1.0, clip / norms[1])) / 2 for a, b in zip(*per)]
    got = private_gradient(model, params, x, y, clip=clip, sigma=0.0, generator=torch.Generator())
    for e, k in zip(expected, params):
        torch.testing.assert_close(got[k], e, rtol=1e-4, atol=1e-7)


def test_inverting_gradients_objective_adds_the_tv_term_on_the_normalised_image():
    """Inverting Gradients eq. 4: 1 - cos(grad W', grad W) + alpha TV(x'), TV over the normalisation's std (0.5 here)."""
    from vispriv.plugins.federated.deep.adaptive import DefenseKnowledge
    from vispriv.plugins.federated.deep.inversion import InversionSettings, _candidate_loss, total_variation
    from vispriv.plugins.federated.deep.local import autograd_gradient

    model = build_model("lenet", 5, 3, 8, seed=0)
    model.eval()
    x = torch.zeros(1, 3, 8, 8)
    x[..., 4:] = 1.0  # one vertical edge: rows differ nowhere, columns at 3 x 8 of 3 x 8 x 7 places
    assert float(total_variation(x)) == pytest.approx(1 / 7)
    target = client_update(model, x, torch.tensor([2]), LocalWork())
    settings = InversionSettings("inverting-gradients", tv=0.35)
    loss = _candidate_loss(model, target, LocalWork(), np.array([2]), settings, "cpu", DefenseKnowledge(),
                           autograd_gradient(True))
    params = {k: p.detach().requires_grad_(True) for k, p in trainable(model).items()}
    # the image's own update: cosine distance 0; plus 0.35 x (1/7) / 0.5 = 0.1
    assert float(loss(params, x, None, None).detach()) == pytest.approx(0.1, abs=1e-5)


def test_dp_epsilon_falls_with_noise_and_grows_with_rounds():
    eps = [dp_epsilon(s, 10, 1e-5) for s in (0.5, 1.0, 2.0)]
    assert eps[0] > eps[1] > eps[2] > 0
    assert dp_epsilon(1.0, 100, 1e-5) > dp_epsilon(1.0, 10, 1e-5)
    assert dp_epsilon(0.0, 10, 1e-5) == float("inf")


def test_alignment_is_the_brute_force_best_assignment():
    rng = np.random.default_rng(0)
    truth = rng.random((5, 4, 4, 3)).astype(np.float32)
    est = np.clip(truth[[3, 0, 4, 1, 2]] + rng.normal(0, 0.3, truth.shape), 0, 1).astype(np.float32)
    ids = [f"i{k}" for k in range(5)]
    aligned = align(Images(truth, ids, sets=["s"] * 5), Images(est, ids, sets=["s"] * 5))
    best = min(itertools.permutations(range(5)), key=lambda p: sum(((est[i] - truth[p[i]]) ** 2).mean() for i in range(5)))
    assert aligned.ids == [ids[j] for j in best]
    ordered = Images(est, ids)
    assert align(Images(truth, ids), ordered) is ordered  # no sets: unchanged
    labels = align(Labels(np.array([1, 2, 2]), ["a", "b", "c"]), Labels(np.array([2, 1, 0]), ["a", "b", "c"], sets=["s"] * 3))
    assert sum(labels.labels[i] == {"a": 1, "b": 2, "c": 2}[id_] for i, id_ in enumerate(labels.ids)) == 2


def test_inversion_unrolls_fedavg_steps_and_returns_the_best_iterate():
    from vispriv.plugins.federated.deep.inversion import InversionSettings, invert

    x, y = _batch(1, 8, 5, seed=4)
    model = build_model("lenet", 5, 3, 8, seed=4)
    work = LocalWork("fedavg", steps=3, lr=0.5)
    update = client_update(model, x, y, work)
    rec = invert(model, update, 1, (3, 8, 8), 5, InversionSettings("idlg", steps=6), seed=0, work=work)
    psnr = 10 * np.log10(1 / float(((rec.images - x) ** 2).mean()))
    assert rec.labels.tolist() == y.tolist()
    assert psnr > 30, psnr
    mismatched = invert(model, update, 1, (3, 8, 8), 5, InversionSettings("idlg", steps=6), seed=0, work=LocalWork("fedsgd"))
    assert 10 * np.log10(1 / float(((mismatched.images - x) ** 2).mean())) < psnr - 10  # the wrong protocol fails


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (runs on a GPU machine)")
def test_inversion_on_cuda_recovers_the_image_and_leaves_the_callers_model_on_the_cpu():
    from vispriv.plugins.federated.deep.inversion import InversionSettings, invert

    x, y = _batch(1, 8, 5, seed=4)
    model = build_model("lenet", 5, 3, 8, seed=4)
    update = client_update(model, x, y, LocalWork())
    rec = invert(model, update, 1, (3, 8, 8), 5, InversionSettings("idlg", steps=6), seed=0, device="cuda")
    assert rec.images.device.type == "cpu"
    assert all(p.device.type == "cpu" for p in model.parameters())
    assert rec.labels.tolist() == y.tolist()
    assert 10 * np.log10(1 / float(((rec.images - x) ** 2).mean())) > 30
