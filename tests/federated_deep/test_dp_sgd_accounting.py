"""DP-SGD's reported epsilon: the RDP accountant's, by hand, over rounds x local steps; and the label counts rounded by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vispriv.harness import CellContext
from vispriv.plugins.defenses.dp_sgd import DpSgd, dp_epsilon
from vispriv.plugins.federated.deep.dataset import DeepFederatedImages
from vispriv.plugins.federated.deep.labels import counts_to_labels

#: Opacus' RDPAccountant.DEFAULT_ALPHAS, written out.
ALPHAS = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))


def epsilon_by_hand(sigma: float, compositions: int, delta: float) -> float:
    """T Gaussian mechanisms at sampling rate 1: RDP T a / (2 sigma^2) at order a, converted by Balle et al.'s
    Theorem 21, minimised over the accountant's orders."""
    return min(compositions * a / (2 * sigma**2) - (math.log(delta) + math.log(a)) / (a - 1) + math.log((a - 1) / a)
               for a in ALPHAS)


@pytest.mark.parametrize("sigma,compositions,delta", [(1.0, 6, 1e-5), (1.0, 2, 1e-5), (0.5, 10, 1e-3), (2.0, 1, 1e-5)])
def test_dp_epsilon_is_the_rdp_accountants_minimum_over_orders(sigma, compositions, delta):
    assert dp_epsilon(sigma, compositions, delta) == pytest.approx(epsilon_by_hand(sigma, compositions, delta), rel=1e-12)


def test_no_noise_is_no_guarantee():
    assert dp_epsilon(0.0, 1, 1e-5) == math.inf


def _scene(**dataset):
    ctx = CellContext(seed=0, quiet=True)
    cfg = {"size": 8, "n_users": 1, "batch_size": 1, "test_images": 2, "public_images": 2, **dataset}
    return DeepFederatedImages(DeepFederatedImages.Config(**cfg)).load(ctx), ctx


@pytest.mark.parametrize("local,steps,compositions", [("fedavg", 3, 2 * 3), ("fedsgd", 3, 2)])
def test_the_defense_composes_rounds_times_local_steps(local, steps, compositions):
    """FedAvg's E local steps are E noisy steps each round: 2 rounds x 3 steps = 6 compositions; FedSGD sends one."""
    scene, ctx = _scene(local=local, local_steps=steps)
    out = DpSgd(DpSgd.Config(noise_multiplier=1.0, rounds=2, delta=1e-5)).protect(scene.private, scene.public, ctx)
    assert out.utility["epsilon"] == pytest.approx(epsilon_by_hand(1.0, compositions, 1e-5), rel=1e-12)


def test_counts_are_rounded_one_label_at_a_time_to_the_largest_remainder():
    # [1.6, 0.3, 1.1]: class 0 (0.6 left), class 2 (0.1 left), class 0 again -> sorted [0, 0, 2]
    assert counts_to_labels(np.array([1.6, 0.3, 1.1]), 3).tolist() == [0, 0, 2]
    # a tie goes to the lower class index, every time
    assert counts_to_labels(np.array([1.0, 1.0, 0.0]), 1).tolist() == [0]
    assert counts_to_labels(np.array([0.5, 0.5, 0.5]), 2).tolist() == [0, 1]
    # negative counts still give B labels: class 1 (-1, then -2), then the tie at -2 goes to class 0
    assert counts_to_labels(np.array([-2.0, -1.0]), 2).tolist() == [0, 1]
