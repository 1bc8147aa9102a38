"""A user's local work on a deep model: FedSGD (one gradient) or FedAvg (E local steps).

FedSGD ("Communication-Efficient Learning of Deep Networks from Decentralized Data",
McMahan et al., AISTATS 2017, section 2): the user sends the gradient of the mean
cross-entropy on its batch at the global weights w. FedAvg: the user takes E full-batch
gradient steps of size lr from w and sends the difference of weights w_E - w (the
convention of "Inverting Gradients", Geiping et al., NeurIPS 2020, section 5, where the
attack unrolls the same E steps). Only trainable parameters form the update; BatchNorm
running statistics are never sent. BatchNorm runs on running statistics or batch statistics
as ``LocalWork.batchnorm`` says (a public protocol setting).

One function computes the update for the user (no graph) and for the attacker (with a graph
through the steps, ``create_graph=True``), so the attack replays exactly the user's arithmetic.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn
from torch.func import functional_call

LocalMode = Literal["fedsgd", "fedavg"]

#: A loss as a function of the parameters and the buffers (by name): ``loss(params, buffers)``.
ParamLoss = Callable[[dict[str, torch.Tensor], dict[str, torch.Tensor]], torch.Tensor]
#: How a gradient is taken: ``differentiate(loss, params, buffers)`` is the gradient of ``loss``
#: in the parameters at ``params``, one tensor per parameter in ``params``' order (the buffers are
#: an input, not a differentiated one: BatchNorm in training mode updates them in place).
Differentiate = Callable[[ParamLoss, dict[str, torch.Tensor], dict[str, torch.Tensor]], list[torch.Tensor]]


@dataclass(frozen=True)
class LocalWork:
    """The public protocol of the users' local work (part of every release)."""

    mode: LocalMode = "fedsgd"
    steps: int = 1
    lr: float = 0.1
    #: "eval": BatchNorm on its running statistics (the setting of Inverting Gradients' own
    #: experiments); "train": on the batch's statistics, as a client in training mode computes.
    batchnorm: Literal["eval", "train"] = "eval"

    def set_mode(self, model: nn.Module) -> None:
        """Put ``model`` in the forward mode the protocol says (matters for BatchNorm only).

        A model loaded from a ``torch.export`` file keeps the mode it was exported in (its
        ``train()``/``eval()`` raise NotImplementedError), so it is left as it is.
        """
        with suppress(NotImplementedError):
            model.train(self.batchnorm == "train")


def trainable(model: nn.Module) -> dict[str, torch.Tensor]:
    """The model's trainable parameters by name (the coordinates of an update)."""
    return {k: p for k, p in model.named_parameters() if p.requires_grad}


_TIED: weakref.WeakKeyDictionary[nn.Module, bool] = weakref.WeakKeyDictionary()


def ties_weights(model: nn.Module) -> bool:
    """Whether two names of ``model`` share one parameter or buffer (weight tying); cached per model."""
    if model not in _TIED:
        named = [*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)]
        _TIED[model] = len({id(t) for _, t in named}) < len(named)
    return _TIED[model]


def call_with(model: nn.Module, tensors: dict[str, torch.Tensor], inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """``model(*inputs)`` with ``tensors`` in place of its parameters and buffers, as
    ``torch.func.functional_call(model, tensors, inputs)`` computes it.

    A model that ties weights (:func:`ties_weights`) goes through functional_call, which unties
    them. Otherwise each named tensor is put straight into its module's parameter or buffer
    table for the call and the original put back after it, as functional_call's swap does,
    without its per-name checks and context managers (~1.5 % of a LeNet evaluation: the DLG
    objective 1.07 -> 1.05 times the plain evaluation); where a module put another tensor in a
    slot during the call, that one is written back to ``tensors``, as functional_call does. A
    name that is neither a parameter nor a buffer of its module goes through functional_call too.
    """
    if ties_weights(model):
        return functional_call(model, tensors, inputs, tie_weights=True)
    slots = _slots(model, tensors)
    if slots is None:
        return functional_call(model, tensors, inputs, tie_weights=False)
    originals = []
    try:
        for (table, attr), tensor in zip(slots, tensors.values()):
            originals.append(table[attr])
            table[attr] = tensor
        return model(*inputs)
    finally:
        for (name, tensor), (table, attr), original in zip(tensors.items(), slots, originals):
            if table[attr] is not tensor:
                tensors[name] = table[attr]
            table[attr] = original


def _slots(model: nn.Module, tensors: dict[str, torch.Tensor]) -> list[tuple[dict, str]] | None:
    """Each name's module table (``_parameters`` or ``_buffers``) and key, resolved now; ``None``
    when a name is neither a parameter nor a buffer of its module."""
    modules: dict[str, nn.Module | None] = {"": model}
    slots = []
    for name in tensors:
        prefix, _, attr = name.rpartition(".")
        if prefix not in modules:
            modules[prefix] = _submodule(model, prefix)
        module = modules[prefix]
        if module is None:
            return None
        table = module._parameters if attr in module._parameters else module._buffers if attr in module._buffers else None
        if table is None:
            return None
        slots.append((table, attr))
    return slots


def _submodule(model: nn.Module, path: str) -> nn.Module | None:
    """The registered submodule at dotted ``path`` (``""``: the model), ``None`` where there is none:
    the tables ``get_submodule`` walks, without its checks (~20 us a call for ten names)."""
    module: nn.Module | None = model
    for part in path.split(".") if path else ():
        module = module._modules.get(part) if module is not None else None
    return module


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy; ``labels`` integer (B,) or a distribution over classes (B, C)."""
    if labels.dtype.is_floating_point:
        return -(labels * torch.log_softmax(logits, dim=-1)).sum(dim=-1).mean()
    return nn.functional.cross_entropy(logits, labels)


def autograd_gradient(create_graph: bool = False) -> Differentiate:
    """Gradients by ``torch.autograd.grad`` (with a graph through them when ``create_graph``)."""

    def differentiate(loss: ParamLoss, params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        return list(torch.autograd.grad(loss(params, buffers), list(params.values()), create_graph=create_graph))

    return differentiate


def functional_gradient(loss: ParamLoss, params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """Gradients by ``torch.func.grad``: composes with ``torch.func.vmap`` and with an outer ``grad``."""
    grads = torch.func.grad(loss)(params, buffers)
    return [grads[k] for k in params]


def simulate_update(
    model: nn.Module,
    params: dict[str, torch.Tensor],
    images: torch.Tensor,
    labels: torch.Tensor,
    work: LocalWork,
    create_graph: bool = False,
    differentiate: Differentiate | None = None,
    buffers: dict[str, torch.Tensor] | None = None,
) -> list[torch.Tensor]:
    """The update a user with ``images``/``labels`` sends from weights ``params`` (one tensor per parameter).

    ``differentiate`` takes the gradients (default: autograd, ``create_graph`` as given);
    ``buffers`` are the model's buffers to run on, updated in place by BatchNorm in training
    mode (default: a fresh copy of the model's own).
    """
    differentiate = differentiate or autograd_gradient(create_graph)
    buffers = {k: b.clone() for k, b in model.named_buffers()} if buffers is None else buffers

    def gradient(current: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        return differentiate(
            lambda p, b: cross_entropy(call_with(model, {**p, **b}, (images,)), labels), current, buffers
        )

    return apply_local_work(params, gradient, work)


def apply_local_work(
    params: dict[str, torch.Tensor],
    gradient: Callable[[dict[str, torch.Tensor]], Sequence[torch.Tensor]],
    work: LocalWork,
) -> list[torch.Tensor]:
    """The protocol's arithmetic around any gradient (plain or DP-SGD's): FedSGD sends
    ``gradient(params)``; FedAvg takes E steps w <- w - lr g and sends w_E - w."""
    names = list(params)
    if work.mode == "fedsgd":
        return list(gradient(params))
    current = dict(params)
    for _ in range(work.steps):
        grads = gradient(current)
        current = {k: current[k] - work.lr * g for k, g in zip(names, grads)}
    return [current[k] - params[k] for k in names]


def client_update(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, work: LocalWork) -> list[torch.Tensor]:
    """What the user sends: the update at the model's current weights, detached."""
    work.set_mode(model)
    params = {k: p.detach().requires_grad_(True) for k, p in trainable(model).items()}
    return [u.detach() for u in simulate_update(model, params, images, labels, work)]


def as_gradient(update: list[torch.Tensor], work: LocalWork) -> list[torch.Tensor]:
    """An update on the gradient's scale: FedSGD's as is; FedAvg's -(w_E - w) / (lr E), the mean
    gradient along the local path (exact for E = 1); used where the gradient's sign and scale matter
    (label recovery)."""
    if work.mode == "fedsgd":
        return update
    return [-u / (work.lr * work.steps) for u in update]
