"""The defense-aware (adaptive) inversions: masked distances, DP-SGD's clipping, mask-aware labels, the two labelled variants."""

from __future__ import annotations

import math

import pytest
import torch

from vispriv.harness import CellContext
from vispriv.harness.labels import config_label
from vispriv.plugins.attacks.deep_inversion import Idlg
from vispriv.plugins.defenses.dp_sgd import private_gradient
from vispriv.plugins.defenses.gradient_pruning import GradientPruning, prune_smallest
from vispriv.plugins.federated.deep.adaptive import (
    DefenseKnowledge,
    averaged_noise_std,
    clipped_mean_gradient,
    defense_knowledge,
    simulate_known_update,
)
from vispriv.plugins.federated.deep.dataset import DeepFederatedImages
from vispriv.plugins.federated.deep.inversion import InversionSettings, cosine_distance, invert, l2_distance
from vispriv.plugins.federated.deep.labels import last_layer, recover_labels
from vispriv.plugins.federated.deep.local import LocalWork, apply_local_work, client_update, trainable
from vispriv.plugins.federated.deep.models import build_model
from vispriv.plugins.federated.deep.payloads import flatten, unflatten


def _case(seed: int, size: int = 8, classes: int = 5):
    g = torch.Generator().manual_seed(seed)
    x, y = torch.rand(1, 3, size, size, generator=g), torch.randint(0, classes, (1,), generator=g)
    return x, y, build_model("lenet", classes, 3, size, seed=seed)


def _psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    return 10 * math.log10(1 / max(1e-12, float(((a - b) ** 2).mean())))


def test_masked_l2_and_cosine_against_hand_values():
    s = [torch.tensor([1.0, 2.0]), torch.tensor([[3.0], [-1.0]])]
    t = [torch.tensor([0.0, 2.0]), torch.tensor([[1.0], [0.0]])]
    m = [torch.tensor([True, False]), torch.tensor([[True], [False]])]
    # whole: (1)^2 + 0 + (2)^2 + (-1)^2 = 6; sent entries (0 and the first of the second): 1 + 4 = 5
    assert float(l2_distance(s, t)) == pytest.approx(6.0)
    assert float(l2_distance(s, t, m)) == pytest.approx(5.0)
    # whole: dot = 0 + 4 + 3 + 0 = 7, |s| = sqrt(15), |t| = sqrt(5); sent: s = (1, 3), t = (0, 1): dot 3, |s| sqrt(10), |t| 1
    assert float(cosine_distance(s, t)) == pytest.approx(1 - 7 / math.sqrt(75))
    assert float(cosine_distance(s, t, m)) == pytest.approx(1 - 3 / math.sqrt(10))


@pytest.mark.parametrize("distance", [l2_distance, cosine_distance])
def test_an_unsent_entry_changes_nothing_and_a_sent_one_changes_the_loss(distance):
    x, y, model = _case(0)
    update = client_update(model, x, y, LocalWork())
    pruned = unflatten(prune_smallest(flatten(update), 0.9), model)
    sent = defense_knowledge({"prune": 0.9}, pruned).sent
    assert sent is not None
    simulated = client_update(model, torch.rand_like(x), y, LocalWork())
    base = float(distance(simulated, pruned, sent))
    unsent = [(i, j) for i, m in enumerate(sent) for j in torch.flatten(~m).nonzero()[:1].tolist()]
    sent_at = [(i, j) for i, m in enumerate(sent) for j in torch.flatten(m).nonzero()[:1].tolist()]
    for (i, (j,)), moved_should_change in [(unsent[0], False), (sent_at[0], True)]:
        moved = [s.clone() for s in simulated]
        moved[i].view(-1)[j] += 5.0
        changed = float(distance(moved, pruned, sent))
        assert (changed != pytest.approx(base, abs=1e-9)) == moved_should_change, (i, j, base, changed)


def test_knowledge_comes_from_the_protocol_and_adapt_none_knows_nothing():
    update = [torch.tensor([0.0, 1.0, 0.0, -2.0])]
    pruned = defense_knowledge({"prune": 0.5}, update)
    assert pruned.adaptive and pruned.matched_share() == 0.5 and pruned.clip is None
    assert defense_knowledge({"prune": 0.0}, update).sent is None  # nothing pruned: every entry is matched
    dp = defense_knowledge({"noise_multiplier": 0.1, "max_grad_norm": 2}, update)
    assert dp.clip == 2.0 and dp.sent is None
    assert not defense_knowledge({"prune": 0.5, "max_grad_norm": 2}, update, "none").adaptive
    assert not defense_knowledge({"lr": 0.1}, update).adaptive


def test_pruning_aware_inversion_beats_matching_the_pruned_zeros():
    x, y, model = _case(0)
    pruned = unflatten(prune_smallest(flatten(client_update(model, x, y, LocalWork())), 0.9), model)
    got = {}
    for adapt in ("auto", "none"):
        for method in ("dlg", "idlg"):
            rec = invert(model, pruned, 1, (3, 8, 8), 5, InversionSettings(method, steps=5), seed=0,
                         knowledge=defense_knowledge({"prune": 0.9}, pruned, adapt))
            got[adapt, method] = _psnr(rec.images, x)
    for method in ("dlg", "idlg"):
        assert got["auto", method] > 40 and got["none", method] < 15, got  # the mask matters, not luck: 30 dB apart


def test_clipping_aware_dlg_beats_the_careless_one_on_a_clipped_gradient():
    x, y, model = _case(1)
    params = {k: p.detach() for k, p in trainable(model).items()}
    clipped = private_gradient(model, params, x, y, 0.05, 0.0, torch.Generator())  # ||g|| is about 4: clipping active
    target = [clipped[k] for k in params]
    got = {}
    for adapt in ("auto", "none"):
        rec = invert(model, target, 1, (3, 8, 8), 5, InversionSettings("dlg", steps=5), seed=0,
                     knowledge=defense_knowledge({"max_grad_norm": 0.05, "noise_multiplier": 0.0}, target, adapt))
        got[adapt] = _psnr(rec.images, x)
    assert got["auto"] > 40 and got["none"] < 20, got


def test_the_simulated_clipping_is_dp_sgds_without_noise_per_example_and_per_local_step():
    g = torch.Generator().manual_seed(3)
    x, y = torch.rand(3, 3, 8, 8, generator=g), torch.tensor([0, 4, 2])
    model = build_model("lenet", 5, 3, 8, seed=3)
    params = {k: p.detach().requires_grad_(True) for k, p in trainable(model).items()}
    ours = clipped_mean_gradient(model, params, x, y, 0.3)
    theirs = private_gradient(model, params, x, y, 0.3, 0.0, torch.Generator())
    for a, k in zip(ours, params):
        torch.testing.assert_close(a, theirs[k], rtol=1e-5, atol=1e-7)
    norms = [float(torch.sqrt(sum((t**2).sum() for t in clipped_mean_gradient(model, params, x[i:i + 1], y[i:i + 1], 1e6))))
             for i in range(3)]
    assert min(norms) > 0.3  # every example is clipped here, so a batch-level clip would differ
    work = LocalWork("fedavg", steps=2, lr=0.5)
    simulated = simulate_known_update(model, params, x, y, work, DefenseKnowledge(clip=0.3))
    defended = apply_local_work(
        params, lambda cur: list(private_gradient(model, cur, x, y, 0.3, 0.0, torch.Generator()).values()), work
    )
    for a, b in zip(simulated, defended):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
    unclipped = simulate_known_update(model, params, x, y, work, DefenseKnowledge())
    assert not all(torch.allclose(a, b) for a, b in zip(simulated, unclipped))


def test_idlg_reads_the_label_from_the_sent_weights_when_no_bias_entry_was_sent():
    wrong_without_mask = 0
    for seed in range(6):
        x, y, model = _case(seed, classes=6)
        grad = dict(zip(trainable(model), client_update(model, x, y, LocalWork())))
        w_name, b_name = last_layer(grad)
        assert b_name is not None
        sent = {k: torch.ones_like(v, dtype=torch.bool) for k, v in grad.items()}
        sent[b_name][:] = False
        keep = grad[w_name].abs() >= grad[w_name].abs().quantile(0.8)
        sent[w_name] = keep
        pruned = {k: v * sent[k] for k, v in grad.items()}
        assert recover_labels(model, pruned, 1, sent=sent).tolist() == y.tolist()
        wrong_without_mask += recover_labels(model, pruned, 1).tolist() != y.tolist()
    assert wrong_without_mask >= 3  # the zeroed bias alone reads as "no class": the mask is what rescues it


def test_averaging_rounds_divides_the_noise_by_sqrt_r():
    assert averaged_noise_std(0.5, 2.0, 1) == pytest.approx(1.0)
    assert averaged_noise_std(0.5, 2.0, 4, rounds=16) == pytest.approx(1.0 / 4 / 4)
    draws = torch.randn(4000, 9, generator=torch.Generator().manual_seed(0)) * 0.5 * 2.0
    assert float(draws.mean(dim=1).std()) == pytest.approx(averaged_noise_std(0.5, 2.0, 1, rounds=9), rel=0.05)
    with pytest.raises(ValueError):
        averaged_noise_std(0.5, 2.0, 1, rounds=0)


def test_both_variants_are_labelled_apart_and_report_which_knowledge_they_used():
    scene = DeepFederatedImages(DeepFederatedImages.Config(size=8, n_users=2, batch_size=1, test_images=8,
                                                           public_images=8)).load(CellContext(seed=0))
    ctx = CellContext(seed=1, quiet=True)
    protected = GradientPruning(GradientPruning.Config(prune=0.9, rounds=1)).protect(scene.private, scene.public, ctx)
    got = {}
    for adapt in ("auto", "none"):
        config = Idlg.Config(steps=1, adapt=adapt)
        result = Idlg(config).attack(protected.release, scene.public, ctx)
        got[config_label("idlg", config)] = result
    assert set(got) == {"idlg(steps=1)", "idlg(adapt=none,steps=1)"}  # the default (adaptive) one is the plain name
    adaptive, careless = got["idlg(steps=1)"], got["idlg(adapt=none,steps=1)"]
    assert adaptive.metrics["adaptive"] == 1.0 and careless.metrics["adaptive"] == 0.0
    assert 0.09 < adaptive.metrics["matched_share"] < 0.11 and careless.metrics["matched_share"] == 1.0
    assert adaptive.metrics["clip_norm"] == 0.0
    assert adaptive.metric_directions["adaptive"] and careless.estimate["images"].ids == adaptive.estimate["images"].ids


def test_a_whole_update_clipping_norm_is_read_in_the_attacked_updates_units():
    update = [torch.tensor([3.0, 4.0])]
    fedsgd = defense_knowledge({"update_clip_norm": 0.05, "mode": "fedsgd", "lr": 0.1}, update)
    assert fedsgd.update_clip == pytest.approx(0.5) and fedsgd.clip is None and fedsgd.adaptive
    assert defense_knowledge({"update_clip_norm": 0.05, "mode": "fedavg", "lr": 0.1}, update).update_clip == 0.05
    assert defense_knowledge({"update_clip_norm": 0.05, "mode": "fedsgd", "lr": 0.1}, update, "none").update_clip is None


def test_the_simulated_update_is_clipped_as_a_whole_only_above_the_norm():
    x, y, model = _case(2)
    params = {k: p.detach().requires_grad_(True) for k, p in trainable(model).items()}
    plain = simulate_known_update(model, params, x, y, LocalWork(), DefenseKnowledge())
    norm = float(torch.sqrt(sum((u**2).sum() for u in plain)))
    for clip in (norm / 4, norm * 2):
        got = simulate_known_update(model, params, x, y, LocalWork(), DefenseKnowledge(update_clip=clip))
        want = [u * min(1.0, clip / norm) for u in plain]
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-7)


def test_update_clipping_aware_dlg_beats_the_careless_one_on_a_clipped_update():
    x, y, model = _case(3)
    gradient = client_update(model, x, y, LocalWork())
    norm = float(torch.sqrt(sum((g**2).sum() for g in gradient)))
    clipped = [g * (0.05 / norm) for g in gradient]  # clipped as a whole to 0.05, far below its norm
    protocol = {"update_clip_norm": 0.005, "mode": "fedsgd", "lr": 0.1}  # 0.005 / lr = 0.05 in gradient units
    got = {}
    for adapt in ("auto", "none"):
        rec = invert(model, clipped, 1, (3, 8, 8), 5, InversionSettings("dlg", steps=5), seed=0,
                     knowledge=defense_knowledge(protocol, clipped, adapt))
        got[adapt] = _psnr(rec.images, x)
    assert got["auto"] > 40 and got["none"] < 20, got
