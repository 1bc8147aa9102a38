"""Rounds of federated learning on a deep model, with a defense's hooks at each step.

Round t (McMahan et al., AISTATS 2017, Algorithm 1, one local batch per user): every user n
computes its update on its batch ``batch_rows(n, t)`` at the global weights (``local``: the
plain FedSGD/FedAvg update, or a defense's own such as DP-SGD), may transform it
(``protect``: pruning), and the server combines the N updates (``aggregate``: the plain mean,
or DPHE's secure sum) and moves the global model: w <- w - lr * mean gradient (FedSGD) or
w <- w + mean weight difference (FedAvg). Round 0 starts from the published weights and is
the round the attacks see; the following rounds exist to measure the defense's utility, the
test accuracy of the global model after ``rounds`` rounds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from vispriv.harness import CellContext
from vispriv.plugins.federated.deep.local import LocalWork, client_update, trainable
from vispriv.plugins.federated.deep.payloads import (
    DeepFederatedData,
    DeepFederatedPublic,
    flatten,
    to_tensor,
    unflatten,
)

#: A user's local work: (model, images, labels, work, user, rng) -> update tensors.
LocalFn = Callable[[nn.Module, torch.Tensor, torch.Tensor, LocalWork, int, np.random.Generator], list[torch.Tensor]]
#: A transform of a user's flat update before it is sent: (user, update, rng) -> update.
ProtectFn = Callable[[int, np.ndarray, np.random.Generator], np.ndarray]
#: The server's combination of the N flat updates (N, D) into their mean (D,).
AggregateFn = Callable[[np.ndarray], np.ndarray]


def plain_local(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, work: LocalWork,
                _user: int, _rng: np.random.Generator) -> list[torch.Tensor]:
    return client_update(model, images, labels, work)


def plain_mean(updates: np.ndarray) -> np.ndarray:
    return updates.mean(axis=0)


@dataclass
class DeepRun:
    """The attacked round's messages and the model's accuracy after each round."""

    sent: np.ndarray
    average: np.ndarray
    accuracy: list[float] = field(default_factory=list)

    def sparsity(self) -> float:
        return float(np.mean(self.sent == 0.0))


def accuracy(model: nn.Module, images: np.ndarray, labels: np.ndarray, work: LocalWork) -> float:
    """Top-1 accuracy of ``model`` on a test split, in the protocol's forward mode."""
    if not len(labels):
        return float("nan")
    work.set_mode(model)
    with torch.no_grad():
        predicted = model(to_tensor(images)).argmax(dim=-1).numpy()
    return float(np.mean(predicted == labels))


def run_deep_rounds(
    private: DeepFederatedData,
    public: DeepFederatedPublic,
    rounds: int,
    ctx: CellContext,
    local: LocalFn = plain_local,
    protect: ProtectFn | None = None,
    aggregate: AggregateFn = plain_mean,
) -> DeepRun:
    """Run ``rounds`` rounds from the published weights; round 0's messages are kept for the release."""
    model = public.model()
    work = public.local_work()
    rng = ctx.rng("deep-rounds")
    acc = [accuracy(model, private.test_images, private.test_labels, work)]
    sent0 = avg0 = None
    for t in ctx.progress(range(rounds), desc="federated (deep)", total=rounds, unit="round"):
        sent = []
        for n in range(private.n_users):
            rows = private.batch_rows(n, t)
            x = to_tensor(private.images[rows])
            y = torch.as_tensor(private.labels[rows])
            update = flatten(local(model, x, y, work, n, rng))
            sent.append(protect(n, update, rng) if protect is not None else update)
        sent_arr = np.stack(sent).astype(np.float32)
        mean = np.asarray(aggregate(sent_arr), np.float32)
        if t == 0:
            sent0, avg0 = sent_arr, mean
        step = unflatten(mean, model)
        with torch.no_grad():
            for p, u in zip(trainable(model).values(), step):
                p.add_(-work.lr * u if work.mode == "fedsgd" else u)
        acc.append(accuracy(model, private.test_images, private.test_labels, work))
    assert sent0 is not None and avg0 is not None
    return DeepRun(sent0, avg0, acc)
