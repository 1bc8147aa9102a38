"""Gradient leakage from a classifier update (DPHE (ICCV 2017) appendix A.2).

Given the shared w̄_t and an update w' computed from it, eq. (12) gives

    Theta = (w̄_t - u) / lr - lam (1 - alpha) w̄_t        (the loss gradient at w̄_t)

where u is the update before soft-thresholding (see :mod:`linear`). On the support of
w', u = w' + lr lam alpha sign(w') exactly; where w' is zero, u is only known to lie in
[-lr lam alpha, lr lam alpha]: we take the value in that interval closest to the
gradient-free step (1 - lr lam (1 - alpha)) w̄_t, i.e. we assume no gradient there.
With L1 = 0 the inversion is exact.

Solving grad l(z, w̄) = Theta for the sample (A.2.1), per one-vs-rest row c whose
gradient is non-zero:

* hinge: Theta_c = -y_c (x, 1) -- the bias entry is -y_c, so x = Theta_c[:D] / Theta_c[D]
  exactly and y_c = -sign(Theta_c[D]) (the row with y_c = +1 is the label);
* logistic: Theta_c = -y_c s (x, 1) with s = 1 / (1 + exp(y_c w̄_c.(x, 1))) > 0: the same
  ratio gives x and the sign gives y_c. (The paper, whose model has no bias, solves
  -X / (1 + exp(w̄.X)) = Theta for X by Newton's method; the bias entry makes that
  unnecessary here, see :func:`newton_logistic` for the bias-free case.)
* full-batch GD (A.2.2): Theta_c = -(1/K) sum_{violators i} y_ic (x_i, 1), so the ratio
  is the signed mean of the samples that row c did not classify confidently; when they
  are all of one sign (one-class users) it is exactly their mean.

Rows are combined weighted by |Theta_c[D]|.
"""

from __future__ import annotations

import numpy as np

from vispriv.plugins.federated.linear.linear import prox_step


def loss_gradient_estimate(
    w_bar: np.ndarray, w_new: np.ndarray, lr: float, l1: float, l2: float
) -> np.ndarray:
    """Theta of eq. (12) for a proximal elastic-net step (bias column not regularised)."""
    shrink = np.ones_like(w_bar) * (1.0 - lr * l2)
    shrink[:, -1] = 1.0
    free_step = shrink * w_bar
    u = w_new + lr * l1 * np.sign(w_new)
    zero = w_new == 0.0
    u[zero] = np.clip(free_step[zero], -lr * l1, lr * l1)
    u[:, -1] = w_new[:, -1]
    return (free_step - u) / lr


def recover_sample(theta: np.ndarray, w_bar: np.ndarray, tol: float = 1e-9) -> tuple[np.ndarray | None, int]:
    """(x, label) from Theta (C, D + 1); x is None when no row carries a gradient."""
    bias = theta[:, -1]
    rows = np.flatnonzero(np.abs(bias) > tol)
    if len(rows) == 0:
        return None, int(np.argmax(w_bar[:, -1]))
    estimates = theta[rows, :-1] / bias[rows, None]
    weights = np.abs(bias[rows])
    x = (weights[:, None] * estimates).sum(axis=0) / weights.sum()
    positive = rows[bias[rows] < 0]
    if len(positive):
        label = int(positive[np.argmax(np.abs(bias[positive]))])
    else:
        label = int(np.argmax(w_bar[:, :-1] @ x + w_bar[:, -1]))
    return x, label


def newton_logistic(theta: np.ndarray, w: np.ndarray, iters: int = 50) -> np.ndarray:
    """Solve -X / (1 + exp(w.X)) = theta for X (bias-free logistic loss, appendix A.2.1).

    X = -theta (1 + exp(a)) with a = w.X, so a solves f(a) = a + (w.theta)(1 + e^a) = 0;
    Newton's method on that scalar.
    """
    b = float(w @ theta)
    a = 0.0
    for _ in range(iters):
        f = a + b * (1.0 + np.exp(a))
        df = 1.0 + b * np.exp(a)
        if df == 0:
            break
        step = f / df
        a -= step
        if abs(step) < 1e-12:
            break
    return -theta * (1.0 + np.exp(a))


def isolated_update(w_bar: np.ndarray, w_next: np.ndarray, n_users: int, lr: float, l1: float, l2: float) -> np.ndarray:
    """N w̄_{t+1} - (N - 1) g with g = prox(w̄_t, 0): one user's update if every other step was gradient-free.

    A user whose sample gives no loss gradient (hinge, margin >= 1 on every row) sends
    exactly g, the proximal step without a gradient; the published average then hides
    only the remaining user's update, which this returns.
    """
    free = prox_step(w_bar, np.zeros_like(w_bar), lr, l1, l2)
    return n_users * w_next - (n_users - 1) * free


def single_sample_gradient(theta: np.ndarray, loss: str, tol: float = 1e-6) -> bool:
    """Is Theta (C, D + 1) the gradient of one sample (A.2.1)? The check the isolation attack runs.

    One sample z = (x, y) gives Theta_c = -y_c s_c (x, 1) with s_c >= 0 (hinge: s_c in {0, 1}),
    so: some row carries a gradient; a row without bias gradient carries none at all; at
    most one row has y_c = +1 (negative bias entry); hinge bias entries are exactly +-1;
    and every row's ratio Theta_c[:D] / Theta_c[D] is the same x. A sum of two or more
    users' gradients breaks one of these except in degenerate cases (identical samples).
    ``tol`` is relative to the scale of x.
    """
    bias = theta[:, -1]
    rows = np.abs(bias) > tol
    if not rows.any() or np.count_nonzero(bias[rows] < 0) > 1:
        return False
    if np.any(np.abs(theta[~rows, :-1]) > tol):
        return False
    if loss == "hinge" and np.any(np.abs(np.abs(bias[rows]) - 1.0) > tol):
        return False
    estimates = theta[rows, :-1] / bias[rows, None]
    scale = 1.0 + float(np.max(np.abs(estimates)))
    return bool(np.max(np.abs(estimates - estimates[0])) <= tol * scale)
