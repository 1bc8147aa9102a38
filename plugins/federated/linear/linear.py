"""Local updates of a one-vs-rest linear classifier with elastic-net regularisation.

Weights are (C, D + 1): row c scores class c against the rest, the last column is the
bias (not regularised). Per sample, y_c = +1 for the true class and -1 otherwise.

The regularised objective of appendix A.2, eq. (9), with the elastic net of section 3.1:

    Q(Z, w) = l(Z, w) + lam * (alpha * |w|_1 + (1 - alpha) / 2 * |w|_2^2)

is minimised by proximal (soft-thresholding) gradient steps, so the L1 part produces
exact zeros -- the sparsity DPHE exploits (section 2.3):

    u  = w̄ - lr * (grad l(z, w̄) + lam * (1 - alpha) * w̄)          (eq. 10-11)
    w' = sign(u) * max(|u| - lr * lam * alpha, 0)                   (non-bias entries)

``mode="sgd"`` takes each step on one random sample (appendix A.2.1), ``mode="gd"`` on
the user's whole set (appendix A.2.2).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from vispriv.harness import PluginConfig
from vispriv.harness.errors import InputError


class LocalTraining(PluginConfig):
    """Hyper-parameters of the users' local updates (public: part of the protocol)."""

    loss: Literal["hinge", "logistic"] = "hinge"
    mode: Literal["sgd", "gd"] = "sgd"
    lr: float = Field(0.05, gt=0)
    reg: float = Field(1e-3, ge=0, description="overall elastic-net strength lam")
    l1_ratio: float = Field(0.5, ge=0, le=1, description="alpha: relative L1 strength (paper: 0.5)")
    local_steps: int = Field(1, ge=1, description="SGD/GD steps per round per user")
    init_epochs: int = Field(100, ge=0, description="full-batch GD epochs on the init set for w̄_0")
    init_lr: float = Field(0.1, gt=0)

    @property
    def l1(self) -> float:
        return self.reg * self.l1_ratio

    @property
    def l2(self) -> float:
        return self.reg * (1.0 - self.l1_ratio)


def augment(x: np.ndarray) -> np.ndarray:
    """Append the constant-1 bias feature: (B, D) -> (B, D + 1)."""
    x = np.atleast_2d(x)
    return np.hstack([x, np.ones((len(x), 1))])


def signed_targets(labels: np.ndarray, n_classes: int) -> np.ndarray:
    """One-vs-rest targets (B, C) in {-1, +1}; multi-label 0/1 attributes (B, L) map to 2 y - 1."""
    if labels.ndim == 2:
        return 2.0 * labels - 1.0
    y = -np.ones((len(labels), n_classes))
    y[np.arange(len(labels)), labels] = 1.0
    return y


def loss_gradient(w: np.ndarray, x: np.ndarray, labels: np.ndarray, loss: str) -> np.ndarray:
    """Mean gradient of the one-vs-rest loss over the batch, shape (C, D + 1).

    Hinge: -y_c x when 1 - y_c w_c.x > 0 else 0; logistic: -y_c x / (1 + exp(y_c w_c.x))
    (appendix A.2.1).
    """
    xa = augment(x)
    y = signed_targets(labels, w.shape[0])
    margin = y * (xa @ w.T)
    if loss == "hinge":
        coef = -(margin < 1.0).astype(np.float64) * y
    elif loss == "logistic":
        coef = -y / (1.0 + np.exp(np.clip(margin, -50, 50)))
    else:
        raise InputError(f"loss must be 'hinge' or 'logistic'; got {loss!r}")
    return coef.T @ xa / len(xa)


def prox_step(w: np.ndarray, grad: np.ndarray, lr: float, l1: float, l2: float) -> np.ndarray:
    """One proximal elastic-net step; the bias column is neither shrunk nor thresholded."""
    reg = w.copy()
    reg[:, -1] = 0.0
    u = w - lr * (grad + l2 * reg)
    out = np.sign(u) * np.maximum(np.abs(u) - lr * l1, 0.0)
    out[:, -1] = u[:, -1]
    return out


def local_update(
    w_bar: np.ndarray,
    x: np.ndarray,
    labels: np.ndarray,
    cfg: LocalTraining,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """A user's update w^(n) from w̄ and the rows of its data it used (eq. 10)."""
    if len(x) == 0:
        raise InputError("a user with no training samples cannot update the classifier")
    w = w_bar.copy()
    used: list[np.ndarray] = []
    for _ in range(cfg.local_steps):
        rows = rng.integers(0, len(x), size=1) if cfg.mode == "sgd" else np.arange(len(x))
        used.append(rows)
        w = prox_step(w, loss_gradient(w, x[rows], labels[rows], cfg.loss), cfg.lr, cfg.l1, cfg.l2)
    return w, np.unique(np.concatenate(used))


def train_full_batch(
    x: np.ndarray, labels: np.ndarray, n_classes: int, cfg: LocalTraining, epochs: int, w0: np.ndarray | None = None
) -> np.ndarray:
    """Full-batch proximal GD from ``w0`` (zeros by default): w̄_0 from the init set, PRR10's local models."""
    w = np.zeros((n_classes, x.shape[1] + 1)) if w0 is None else w0.copy()
    for _ in range(epochs):
        w = prox_step(w, loss_gradient(w, x, labels, cfg.loss), cfg.init_lr, cfg.l1, cfg.l2)
    return w


def scores(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """One-vs-rest scores (B, C): w_c . (x, 1)."""
    return augment(x) @ w.T


def predict(w: np.ndarray, x: np.ndarray, multilabel: bool = False) -> np.ndarray:
    """Class with the highest one-vs-rest score; for attributes, every row's sign (B, L) as 0/1."""
    if multilabel:
        return (scores(w, x) > 0).astype(np.int64)
    return np.argmax(scores(w, x), axis=1)


def accuracy(w: np.ndarray, x: np.ndarray, labels: np.ndarray) -> float:
    """Test accuracy; for (B, L) attributes the mean over attributes of each one's accuracy (Table 3)."""
    return float(np.mean(predict(w, x, labels.ndim == 2) == labels)) if len(x) else float("nan")


def sparsity(w: np.ndarray) -> float:
    """Fraction of exactly-zero entries (Table 2's "sparsity")."""
    return float(np.mean(w == 0.0))
