"""Reading a batch's labels from the last layer's gradient.

For the mean cross-entropy over a batch of B images, the gradient of the last linear layer's
bias is g_c = (1/B) sum_i (p_ic - y_ic) and of its weights G_c = (1/B) sum_i (p_ic - y_ic) h_i,
where p_i is the softmax output and h_i >= 0 the layer's input (after a sigmoid, ReLU or
pooling of either). Hence:

* B = 1 ("iDLG: Improved Deep Leakage from Gradients", Zhao, Mopuri & Bilen, 2020, section 3):
  the true class is the only one whose gradient is negative: argmin_c of the bias gradient, or
  of the weight row sums sum_j G_cj when there is no bias.
* B > 1, count-aware: n_c = B (p̄_c - g_c), with p̄ the batch's mean softmax, which the attacker
  does not know; it is estimated by the model's mean softmax on public images (the estimate of
  "User-Level Label Leakage from Gradients in Federated Learning", Wainakh et al., PoPETs 2022,
  and of Geng et al.'s "Towards General Deep Leakage in Federated Learning", 2021). Without a
  bias the row sums are used, scaled by the mean input mass sum_j h_ij of the public images.
  The real-valued counts are rounded to B labels by handing out one label at a time to the
  class with the largest remaining count (so the counts always sum to B).

A pruned update (``sent``: which entries the user sent, see ``adaptive.py``) is read on its
sent entries only. For B = 1 the true class's entries have the largest magnitude of the last
layer (|p_y - 1| = sum of the other p_c, and h_j is shared by every row), so pruning by
magnitude keeps them whenever it keeps any of that layer: a sent bias is read as above (an
unsent class's bias counts as 0, below the threshold); with no bias entry sent, each weight row's
sum over its sent entries is divided by the public input mass over the same entries,
sum_j m_cj h̄_j (h̄ the public images' mean input); with nothing of the layer sent the counts
fall back to the public prior B p̄.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


def last_layer(params: dict[str, torch.Tensor]) -> tuple[str, str | None]:
    """Names of the classifier's last weight (the last 2-D parameter) and its bias (the 1-D
    parameter right after it with one entry per output), found by shape so that modules without
    ``nn.Linear`` objects (a ``torch.export`` program) work too."""
    names = list(params)
    for i in range(len(names) - 1, -1, -1):
        weight = params[names[i]]
        if weight.ndim == 2:
            bias = names[i + 1] if i + 1 < len(names) and params[names[i + 1]].shape == weight.shape[:1] else None
            return names[i], bias
    raise ValueError("the model has no 2-D (linear) parameter: labels cannot be read from its gradient")


def _input_mean(model: nn.Module, images: torch.Tensor) -> torch.Tensor | None:
    """Mean of the last linear layer's input over ``images``, per feature (None without an nn.Linear)."""
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    if not linears:
        return None
    seen: list[torch.Tensor] = []
    handle = linears[-1].register_forward_hook(lambda _m, args, _out: seen.append(args[0].detach()))
    try:
        model(images)
    finally:
        handle.remove()
    return seen[0].mean(dim=0)


def class_scores(
    model: nn.Module,
    gradient: dict[str, torch.Tensor],
    batch_size: int,
    public_images: torch.Tensor | None,
    sent: dict[str, torch.Tensor] | None = None,
) -> np.ndarray:
    """Real-valued label counts n_c (see the module docstring) from the last layer's gradient,
    read on its ``sent`` entries when given."""
    w_name, b_name = last_layer(gradient)
    grad_w = gradient[w_name]
    n_classes = grad_w.shape[0]
    h_bar: torch.Tensor | None = None
    if public_images is not None and len(public_images):
        with torch.no_grad():
            p_bar = torch.softmax(model(public_images), dim=-1).mean(dim=0)
            h_bar = _input_mean(model, public_images)
    else:
        p_bar = torch.full((n_classes,), 1.0 / n_classes, device=grad_w.device)
    bias_sent = b_name is not None and (sent is None or bool(sent[b_name].any()))
    if bias_sent:
        signal = gradient[str(b_name)].detach()
    else:
        mask = torch.ones_like(grad_w) if sent is None else sent[w_name].to(grad_w.dtype)
        if h_bar is None:  # no public images: the row sums as they are (rows with nothing sent read 0)
            mass = mask.sum(dim=1).clamp(max=1.0)
        else:
            width = grad_w.shape[1]
            features = h_bar if h_bar.shape[0] == width else torch.full((width,), float(h_bar.sum()) / width)
            mass = (mask * features.to(grad_w.device)).sum(dim=1)
        row_sums = (grad_w.detach() * mask).sum(dim=1)
        signal = torch.where(mass > 0, row_sums / mass.clamp_min(1e-12), torch.zeros_like(row_sums))
    return (batch_size * (p_bar - signal)).double().cpu().numpy()


def counts_to_labels(scores: np.ndarray, batch_size: int) -> np.ndarray:
    """B labels from real-valued counts: one at a time to the class with the largest remainder."""
    remaining = np.asarray(scores, dtype=np.float64).copy()
    labels = np.empty(batch_size, dtype=np.int64)
    for i in range(batch_size):
        c = int(np.argmax(remaining))
        labels[i] = c
        remaining[c] -= 1.0
    return np.sort(labels)


def recover_labels(
    model: nn.Module,
    gradient: dict[str, torch.Tensor],
    batch_size: int,
    public_images: torch.Tensor | None = None,
    sent: dict[str, torch.Tensor] | None = None,
) -> np.ndarray:
    """The batch's labels (sorted) read from ``gradient`` (gradient scale, see ``local.as_gradient``),
    on its ``sent`` entries when given."""
    return counts_to_labels(class_scores(model, gradient, batch_size, public_images, sent), batch_size)
