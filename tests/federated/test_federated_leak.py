"""Local updates and the gradient-leakage inversion of appendix A.2, against brute force."""

from __future__ import annotations

import numpy as np
import pytest

from vispriv.plugins.federated.linear import linear
from vispriv.plugins.federated.linear.leak import (
    isolated_update,
    loss_gradient_estimate,
    newton_logistic,
    recover_sample,
    single_sample_gradient,
)


def _numeric_gradient(w, x, labels, loss, h=1e-6):
    def objective(v):
        xa = linear.augment(x)
        y = linear.signed_targets(labels, v.shape[0])
        m = y * (xa @ v.T)
        per = np.maximum(0, 1 - m) if loss == "hinge" else np.log1p(np.exp(-m))
        return per.sum(axis=1).mean()

    g = np.zeros_like(w)
    for idx in np.ndindex(*w.shape):
        e = np.zeros_like(w)
        e[idx] = h
        g[idx] = (objective(w + e) - objective(w - e)) / (2 * h)
    return g


@pytest.mark.parametrize("loss", ["hinge", "logistic"])
def test_loss_gradient_matches_finite_differences(loss):
    rng = np.random.default_rng(0)
    w, x, labels = rng.normal(size=(3, 5)), rng.normal(size=(4, 4)), rng.integers(0, 3, 4)
    np.testing.assert_allclose(linear.loss_gradient(w, x, labels, loss), _numeric_gradient(w, x, labels, loss), atol=1e-5)


def test_prox_step_soft_thresholds_and_spares_bias():
    w = np.array([[0.5, -0.02, 0.3]])
    out = linear.prox_step(w, np.zeros_like(w), lr=1.0, l1=0.1, l2=0.0)
    np.testing.assert_allclose(out, [[0.4, 0.0, 0.3]])


@pytest.mark.parametrize("loss", ["hinge", "logistic"])
def test_single_sample_update_is_inverted_exactly(loss):
    rng = np.random.default_rng(3)
    w_bar = rng.normal(scale=0.1, size=(4, 7))
    x, label = rng.normal(size=(1, 6)), np.array([2])
    lr, l2 = 0.05, 0.01
    w_new = linear.prox_step(w_bar, linear.loss_gradient(w_bar, x, label, loss), lr, 0.0, l2)
    theta = loss_gradient_estimate(w_bar, w_new, lr, 0.0, l2)
    np.testing.assert_allclose(theta, linear.loss_gradient(w_bar, x, label, loss), atol=1e-10)
    x_hat, y_hat = recover_sample(theta, w_bar)
    np.testing.assert_allclose(x_hat, x[0], atol=1e-8)
    assert y_hat == 2


def test_l1_support_is_inverted_exactly():
    rng = np.random.default_rng(4)
    w_bar = rng.normal(scale=1.0, size=(3, 9))
    x, label = rng.normal(size=(1, 8)), np.array([0])
    lr, l1, l2 = 0.1, 0.05, 0.02
    grad = linear.loss_gradient(w_bar, x, label, "hinge")
    w_new = linear.prox_step(w_bar, grad, lr, l1, l2)
    theta = loss_gradient_estimate(w_bar, w_new, lr, l1, l2)
    support = w_new != 0
    np.testing.assert_allclose(theta[support], grad[support], atol=1e-10)


def test_no_gradient_gives_no_sample():
    w_bar = np.zeros((2, 3))
    w_bar[0, -1], w_bar[1, -1] = 5.0, -5.0  # every sample of class 0 is classified with margin > 1
    w_new = linear.prox_step(w_bar, linear.loss_gradient(w_bar, np.ones((1, 2)), np.array([0]), "hinge"), 0.1, 0, 0)
    x_hat, label = recover_sample(loss_gradient_estimate(w_bar, w_new, 0.1, 0, 0), w_bar)
    assert x_hat is None and label == 0


def test_gd_one_class_user_leaks_mean_of_misclassified():
    """Appendix A.2.2 / eq. (13): all samples negative for a row -> the ratio is their mean."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(6, 4))
    labels = np.zeros(6, np.int64)
    w_bar = np.zeros((2, 5))
    grad = linear.loss_gradient(w_bar, x, labels, "hinge")
    row1 = grad[1]  # class 1: every sample is a negative and violates the margin at w = 0
    np.testing.assert_allclose(row1[:-1] / row1[-1], x.mean(axis=0), atol=1e-12)


def test_newton_solves_bias_free_logistic_leak():
    rng = np.random.default_rng(6)
    w, X = rng.normal(size=5), rng.normal(size=5)
    theta = -X / (1 + np.exp(w @ X))
    np.testing.assert_allclose(newton_logistic(theta, w), X, atol=1e-8)


def test_isolated_update_and_one_sample_test():
    """N w̄' - (N - 1) prox(w̄, 0) is the one user with a gradient; the test accepts it and rejects two users' sum."""
    rng = np.random.default_rng(7)
    w_bar = rng.normal(scale=0.1, size=(3, 6))
    lr, l1, l2 = 0.05, 0.002, 0.003
    x, other = rng.normal(size=(1, 5)), rng.normal(size=(1, 5))
    free = linear.prox_step(w_bar, np.zeros_like(w_bar), lr, l1, l2)
    mover = linear.prox_step(w_bar, linear.loss_gradient(w_bar, x, np.array([1]), "hinge"), lr, l1, l2)
    second = linear.prox_step(w_bar, linear.loss_gradient(w_bar, other, np.array([2]), "hinge"), lr, l1, l2)
    alone = isolated_update(w_bar, (mover + 2 * free) / 3, 3, lr, l1, l2)
    np.testing.assert_allclose(alone, mover, atol=1e-12)
    theta = loss_gradient_estimate(w_bar, alone, lr, l1, l2)
    assert single_sample_gradient(theta, "hinge")
    both = isolated_update(w_bar, (mover + second + free) / 3, 3, lr, l1, l2)
    assert not single_sample_gradient(loss_gradient_estimate(w_bar, both, lr, l1, l2), "hinge")
    nothing = isolated_update(w_bar, free, 3, lr, l1, l2)
    assert not single_sample_gradient(loss_gradient_estimate(w_bar, nothing, lr, l1, l2), "hinge")
