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
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from vispriv.plugins.federated.deep.models import last_linear


def _last_layer_input(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """The input h of the last linear layer for ``images`` (captured with a forward hook)."""
    layer = last_linear(model)
    seen: list[torch.Tensor] = []
    handle = layer.register_forward_hook(lambda _m, args, _out: seen.append(args[0].detach()))
    try:
        model(images)
    finally:
        handle.remove()
    return seen[0]


def class_scores(
    model: nn.Module,
    gradient: dict[str, torch.Tensor],
    batch_size: int,
    public_images: torch.Tensor | None,
) -> np.ndarray:
    """Real-valued label counts n_c (see the module docstring) from the last layer's gradient."""
    layer = last_linear(model)
    names = {id(p): k for k, p in model.named_parameters()}
    grad_w = gradient[names[id(layer.weight)]]
    grad_b = gradient.get(names[id(layer.bias)]) if layer.bias is not None else None
    n_classes = grad_w.shape[0]
    if public_images is not None and len(public_images):
        with torch.no_grad():
            p_bar = torch.softmax(model(public_images), dim=-1).mean(dim=0)
            mass = _last_layer_input(model, public_images).sum(dim=1).mean()
    else:
        p_bar = torch.full((n_classes,), 1.0 / n_classes)
        mass = torch.tensor(1.0)
    if grad_b is not None:
        signal = grad_b.detach()
    else:
        signal = grad_w.detach().sum(dim=1) / mass.clamp_min(1e-12)
    return (batch_size * (p_bar - signal)).double().numpy()


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
) -> np.ndarray:
    """The batch's labels (sorted) read from ``gradient`` (gradient scale, see ``local.as_gradient``)."""
    return counts_to_labels(class_scores(model, gradient, batch_size, public_images), batch_size)
