"""Gradient inversion of deep networks: DLG, iDLG and Inverting Gradients.

Given the model at the weights the user started from, the public local-work protocol and the
update the user sent, find images (and labels) whose simulated update matches it.

* ``dlg`` -- "Deep Leakage from Gradients" (Zhu, Liu & Han, NeurIPS 2019, Algorithm 1): dummy
  images x' and dummy label logits y' drawn at random, both optimised with L-BFGS to minimise
  the squared L2 distance ||∇W' - ∇W||² summed over every layer (eq. 4); the label enters the
  loss as softmax(y').
* ``idlg`` -- "iDLG" (Zhao, Mopuri & Bilen, 2020): the labels are first read from the last
  layer's gradient (:mod:`~vispriv.plugins.federated.deep.labels`), then DLG optimises x' alone.
* ``inverting-gradients`` -- "Inverting Gradients" (Geiping, Bauermeister, Dröge & Moeller,
  NeurIPS 2020, eq. 4): minimise 1 - <∇W', ∇W> / (||∇W'|| ||∇W||) + α TV(x') with Adam on the
  *sign* of the gradient (section 4), x' kept in the box [0, 1] after every step, the step
  size decayed tenfold at 3/8, 5/8 and 7/8 of the steps, several restarts of which the one with
  the lowest loss is kept. On FedAvg updates the simulated update unrolls the user's E local
  steps (section 5), which ``simulate_update`` does for every method.

Budgets: ``steps`` is the optimiser's total number of iterations over all restarts (an L-BFGS
iteration may evaluate the loss several times in its line search; ``evaluations`` counts
them), ``max_seconds`` a wall-clock cap on the whole batch. The L-BFGS of DLG and iDLG runs
with a strong-Wolfe line search, which keeps the iteration from diverging where DLG's fixed
step of 1 does; where the loss turns NaN the best iterate so far is kept. The iterate with the
lowest loss seen is returned (never a later, worse one).

Restarts can run at once (``batched: on``): the first ``restarts`` restarts' objective
evaluations are made in one ``torch.func`` call over the stacked candidates
(:mod:`~vispriv.plugins.federated.deep.batched`), while every restart keeps its own Adam or
L-BFGS, with its own step budget, schedule and line search, exactly as it runs alone. The
starts are the same draws and the restarts' results are taken in the same order, so each
evaluation matches the one-after-the-other search (``batched: off``) up to the float rounding
of the batched kernels; restarts after one that converged or ran out of time are computed and
discarded; a fresh start after a halted L-BFGS runs alone, as before. ``auto`` (the default)
batches Inverting Gradients, whose signed-Adam step turns a rounding difference into a
different step only where a gradient entry is within rounding of zero (the paper's ConvNet:
bit-identical reconstructions, tests/federated_deep/test_batched_inversion.py), and not DLG or
iDLG, whose L-BFGS line search amplifies a 1e-7 rounding difference into a different iterate
within a few dozen evaluations. Batched Inverting Gradients needs no thread per restart: its
restarts with the same step budget are one stacked tensor under one Adam (elementwise, so each
restart takes exactly its own steps), all running restarts evaluated in one call per step
(:func:`_signed_adam_together`); DLG's and iDLG's L-BFGS, whose line searches evaluate a varying
number of times, run in lock-step threads (:class:`~vispriv.plugins.federated.deep.batched.LockStep`).

``device`` runs the search on an accelerator (the matrix's ``device``, e.g. ``cuda``): the
random starts are drawn on the CPU from the same seed and moved, so a cell starts from the
same images on any device (the optimisation's arithmetic, and so its last digits, differ).
L-BFGS keeps its iterate and its history on the host even then, and only the objective runs on
the device (:func:`optimiser_device`): its many tiny steps cost more than the objective there.

``knowledge`` makes any of the three adaptive
(:mod:`~vispriv.plugins.federated.deep.adaptive`): the distance (L2 or cosine) is computed
over the sent entries of a pruned update only, the label recovery reads only sent entries,
and the simulated update is clipped per example as DP-SGD clips it.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import nn

from vispriv.harness import blas_threads, torch_threads
from vispriv.plugins.federated.deep.adaptive import DefenseKnowledge, simulate_known_update
from vispriv.plugins.federated.deep.batched import Answer, BatchEvaluate, GraphedEvaluate, LockStep, batch_evaluator
from vispriv.plugins.federated.deep.labels import recover_labels
from vispriv.plugins.federated.deep.lbfgs import CompactLBFGS
from vispriv.plugins.federated.deep.lbfgs_two_loop import TwoLoopLBFGS
from vispriv.plugins.federated.deep.local import (
    Differentiate,
    LocalWork,
    as_gradient,
    autograd_gradient,
    functional_gradient,
    trainable,
)

Method = Literal["dlg", "idlg", "inverting-gradients"]


@dataclass(frozen=True)
class InversionSettings:
    """One attack's optimisation settings (defaults: the papers' own, see each plugin)."""

    method: Method = "dlg"
    steps: int = 300
    restarts: int = 1
    lr: float | None = None
    tv: float = 0.0
    init: Literal["randn", "uniform"] = "uniform"
    max_seconds: float | None = None
    threads: int = 1
    lbfgs_inner: int = 20
    #: "on": several restarts are evaluated together, one batched ``torch.func`` call per round
    #: of evaluations, each restart keeping its own optimiser; "off": one restart after the other;
    #: "auto": "on" for Inverting Gradients, "off" for DLG and iDLG (see :func:`invert`).
    batched: Literal["auto", "on", "off"] = "auto"
    #: DLG's and iDLG's L-BFGS: "torch" (``torch.optim.LBFGS``'s iterates; its step compiled
    #: where numba is installed:
    #: :class:`~vispriv.plugins.federated.deep.lbfgs_two_loop.TwoLoopLBFGS`) or "compact"
    #: (:class:`~vispriv.plugins.federated.deep.lbfgs.CompactLBFGS`: the same direction from the
    #: compact representation, a dozen array operations per iteration instead of ~700).
    lbfgs: Literal["torch", "compact"] = "torch"

    def batches(self) -> bool:
        """Whether this search evaluates its restarts together."""
        if self.restarts < 2 or self.batched == "off":
            return False
        return self.batched == "on" or self.method == "inverting-gradients"

    def step_size(self) -> float:
        if self.lr is not None:
            return self.lr
        return 0.1 if self.method == "inverting-gradients" else 1.0


@dataclass
class Reconstruction:
    """Recovered images (B, C, H, W) in [0, 1], their labels and what the search cost."""

    images: torch.Tensor
    labels: np.ndarray
    loss: float
    steps: int
    evaluations: int
    seconds: float
    stopped: str


def l2_distance(
    simulated: list[torch.Tensor], target: list[torch.Tensor], sent: list[torch.Tensor] | None = None
) -> torch.Tensor:
    """DLG eq. 4: sum over layers of ||∇W' - ∇W||², over the ``sent`` entries only when given
    (the pruning-aware distance: an unsent entry of either update changes nothing)."""
    if sent is None:
        return sum(((s - t) ** 2).sum() for s, t in zip(simulated, target))  # type: ignore[return-value]
    return sum((((s - t) ** 2) * m).sum() for s, t, m in zip(simulated, target, sent))  # type: ignore[return-value]


def cosine_distance(
    simulated: list[torch.Tensor], target: list[torch.Tensor], sent: list[torch.Tensor] | None = None
) -> torch.Tensor:
    """Inverting Gradients eq. 4: 1 - cosine similarity of the whole update vectors, or of their
    restrictions to the ``sent`` entries when given (both vectors masked before the dot product
    and the norms)."""
    if sent is not None:
        simulated = [s * m for s, m in zip(simulated, sent)]
        target = [t * m for t, m in zip(target, sent)]
    dot = sum((s * t).sum() for s, t in zip(simulated, target))
    norm_s = sum((s * s).sum() for s in simulated)
    norm_t = sum((t * t).sum() for t in target)
    return 1.0 - dot / (torch.sqrt(norm_s) * torch.sqrt(norm_t)).clamp_min(1e-20)  # type: ignore[operator]


def total_variation(x: torch.Tensor) -> torch.Tensor:
    """Anisotropic total variation: mean absolute difference of neighbouring pixels (both axes)."""
    return (x[..., 1:, :] - x[..., :-1, :]).abs().mean() + (x[..., :, 1:] - x[..., :, :-1]).abs().mean()


def _initial(shape: tuple[int, ...], init: str, generator: torch.Generator) -> torch.Tensor:
    if init == "randn":
        return (0.5 + 0.5 * torch.randn(shape, generator=generator)).clamp(0, 1)
    return torch.rand(shape, generator=generator)


def invert(
    model: nn.Module,
    target_update: list[torch.Tensor],
    n_images: int,
    image_shape: tuple[int, int, int],
    n_classes: int,
    settings: InversionSettings,
    seed: int = 0,
    work: LocalWork | None = None,
    public_images: torch.Tensor | None = None,
    device: str = "cpu",
    knowledge: DefenseKnowledge | None = None,
) -> Reconstruction:
    """Reconstruct ``n_images`` images of ``image_shape`` (C, H, W) from ``target_update``.

    ``target_update`` lists one tensor per trainable parameter of ``model``, in
    ``model.named_parameters()`` order: a FedSGD gradient or a FedAvg weight difference, as
    ``work`` says. ``public_images`` calibrate the label counts of batches (labels.py).
    ``knowledge`` is what the attacker knows of the defense (default: nothing).
    """
    work = work or LocalWork()
    knowledge = (knowledge or DefenseKnowledge()).to(device)
    if settings.steps < 1:
        raise ValueError(f"steps must be >= 1; got {settings.steps}")
    if device != "cpu":
        model = copy.deepcopy(model).to(device)  # the caller's model stays where it is
        public_images = None if public_images is None else public_images.to(device)
    work.set_mode(model)
    params = {k: p.detach() for k, p in trainable(model).items()}
    if len(params) != len(target_update):
        raise ValueError(f"the update has {len(target_update)} tensors but the model has {len(params)} trainable parameters")
    if knowledge.sent is not None and [m.shape for m in knowledge.sent] != [t.shape for t in target_update]:
        raise ValueError("the sent-entry masks must have the update's shapes, one per trainable parameter")
    target = [t.detach().to(device=device, dtype=torch.float32) for t in target_update]
    labels: np.ndarray | None = None
    if settings.method != "dlg":
        grad_scale = dict(zip(params, as_gradient(target, work)))
        sent = None if knowledge.sent is None else dict(zip(params, knowledge.sent))
        labels = recover_labels(model, grad_scale, n_images, public_images, sent)
    generator = torch.Generator().manual_seed(int(seed) % (2**63))
    restarts = max(1, min(settings.restarts, settings.steps))
    per_restart = [settings.steps // restarts + (1 if r < settings.steps % restarts else 0) for r in range(restarts)]
    start = time.perf_counter()
    best: Reconstruction | None = None
    evaluations = 0
    stopped = "steps"
    budget = settings.steps
    # The compact L-BFGS's history products run in numpy's BLAS: as many threads as torch's.
    with torch_threads(settings.threads), blas_threads(settings.threads if settings.lbfgs == "compact" else None):
        # Batched, the first ``restarts`` restarts run at once; their results are then taken in
        # order exactly as the sequential loop takes them (a converged or timed-out restart ends it).
        batch: list[Reconstruction] = []
        if settings.batches() and restarts > 1:
            batch = _search_batched(model, params, target, work, n_images, image_shape, n_classes, labels, settings,
                                    per_restart, generator, settings.max_seconds, device, knowledge)
        r = 0
        while budget > 0:
            if r < len(batch):
                run = batch[r]
            else:
                remaining = None if settings.max_seconds is None else settings.max_seconds - (time.perf_counter() - start)
                if remaining is not None and remaining <= 0:
                    stopped = "time"
                    break
                # A restart's share of the budget; what a halted search leaves goes to a fresh start.
                share = min(budget, per_restart[r] if r < restarts else budget)
                run = _search(model, params, target, work, n_images, image_shape, n_classes, labels, settings,
                              share, generator, remaining, device, knowledge)
            budget -= run.steps
            evaluations += run.evaluations
            if best is None or run.loss < best.loss:
                best = run
            r += 1
            stopped = run.stopped
            if run.stopped in ("time", "converged"):
                break
    assert best is not None
    steps_run = settings.steps - budget
    return Reconstruction(best.images.cpu(), best.labels, best.loss, steps_run, evaluations, time.perf_counter() - start,
                          stopped)


#: ``evaluate(x, z, grads)``: the objective at the leaves x (and the label logits z) as a 0-d
#: tensor without a graph; it sets ``x.grad`` (and ``z.grad``) when ``grads`` is "always", or
#: "finite" and the loss is finite; "none" sets nothing.
Evaluate = Callable[[torch.Tensor, "torch.Tensor | None", Literal["always", "finite", "none"]], torch.Tensor]


def _draw_start(
    n_images: int, image_shape: tuple[int, int, int], n_classes: int, joint: bool, init: str,
    generator: torch.Generator, device: str,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One restart's random start, drawn on the CPU (images, then DLG's label logits)."""
    x = _initial((n_images, *image_shape), init, generator).to(device).requires_grad_(True)
    z = torch.randn((n_images, n_classes), generator=generator).to(device).requires_grad_(True) if joint else None
    return x, z


def _candidate_loss(
    model: nn.Module,
    target: list[torch.Tensor],
    work: LocalWork,
    labels: np.ndarray | None,
    settings: InversionSettings,
    device: str,
    knowledge: DefenseKnowledge,
    differentiate: Differentiate,
) -> Callable[[dict[str, torch.Tensor], torch.Tensor, torch.Tensor | None, dict[str, torch.Tensor] | None], torch.Tensor]:
    """The method's objective of one candidate: ``loss(params, x, z, buffers)``."""
    fixed_labels = torch.as_tensor(labels, dtype=torch.long, device=device) if labels is not None else None
    distance = cosine_distance if settings.method == "inverting-gradients" else l2_distance
    normaliser = getattr(model, "std", None)
    # TV on the normalised image, as the authors' code regularises the network's input.
    tv_scale = float(normaliser.mean()) if isinstance(normaliser, torch.Tensor) else 1.0

    def loss(params: dict[str, torch.Tensor], x: torch.Tensor, z: torch.Tensor | None,
             buffers: dict[str, torch.Tensor] | None) -> torch.Tensor:
        y = torch.softmax(z, dim=-1) if z is not None else fixed_labels
        assert y is not None
        simulated = simulate_known_update(model, params, x, y, work, knowledge, True, differentiate, buffers)
        value = distance(simulated, target, knowledge.sent)
        if settings.tv > 0:
            value = value + settings.tv * total_variation(x) / tv_scale
        return value

    return loss


def _search(
    model: nn.Module,
    params: dict[str, torch.Tensor],
    target: list[torch.Tensor],
    work: LocalWork,
    n_images: int,
    image_shape: tuple[int, int, int],
    n_classes: int,
    labels: np.ndarray | None,
    settings: InversionSettings,
    steps: int,
    generator: torch.Generator,
    seconds: float | None,
    device: str = "cpu",
    knowledge: DefenseKnowledge | None = None,
) -> Reconstruction:
    """One restart of the chosen method (starts drawn on the CPU, searched on ``device``), the
    objective by autograd."""
    knowledge = knowledge or DefenseKnowledge()
    x, z = _draw_start(n_images, image_shape, n_classes, labels is None, settings.init, generator,
                       optimiser_device(settings, device))
    if graphs_on(settings, device):
        graphed = _device_evaluator(model, params, target, work, labels, settings, device, knowledge)
        return _optimise(x, z, labels, settings, steps, seconds, _leaf_evaluate(_single(graphed)))
    loss = _candidate_loss(model, target, work, labels, settings, device, knowledge, autograd_gradient(True))
    leaves = {k: p.requires_grad_(True) for k, p in params.items()}

    def evaluate(x: torch.Tensor, z: torch.Tensor | None, grads: Literal["always", "finite", "none"]) -> torch.Tensor:
        # The objective runs on ``device``, on copies of the optimiser's leaves; the gradients go back to them.
        xd = x.detach().to(device).requires_grad_(True)
        zd = None if z is None else z.detach().to(device).requires_grad_(True)
        value = loss(leaves, xd, zd, None)
        if grads == "always" or (grads == "finite" and torch.isfinite(value)):
            # Only to the candidate: the weights' own gradients of the distance are never used.
            value.backward(inputs=[xd] if zd is None else [xd, zd])
            x.grad = _grad_to(xd, x)
            if z is not None and zd is not None:
                z.grad = _grad_to(zd, z)
        return value.detach().to(x.device)

    return _optimise(x, z, labels, settings, steps, seconds, evaluate)


def optimiser_device(settings: InversionSettings, device: str) -> str:
    """Where a restart's optimiser keeps its iterate: the host for L-BFGS (DLG, iDLG), ``device`` for Adam.

    L-BFGS's two-loop recursion and strong-Wolfe line search are a few hundred tiny operations
    per iteration, most of them ending in a host synchronisation (torch's ``LBFGS`` turns each
    history coefficient into a Python number); on an accelerator they cost more than the
    objective they steer (DLG's LeNet: 15 ms per evaluation on an H100 against 6 ms on one CPU
    thread). So its leaves stay on the host and only the objective (the model's forward, weight
    gradient and distance, and their backward) runs on ``device``: the same algorithm on the same
    numbers, one small copy each way per evaluation. Inverting Gradients' signed Adam is
    elementwise and runs where the objective does.
    """
    return device if settings.method == "inverting-gradients" else "cpu"


def graphs_on(settings: InversionSettings, device: str) -> bool:
    """Whether the objective is replayed from CUDA graphs: L-BFGS (DLG, iDLG) on a CUDA device.

    With its optimiser on the host (:func:`optimiser_device`), DLG's objective is all that runs
    on the device, a few hundred tiny kernels whose launches cost more than their arithmetic:
    a graph launches them at once (:class:`~.batched.GraphedEvaluate`). Inverting Gradients
    on the device keeps the eager path: its networks (ConvNet, ResNet-18) give the kernels work.
    """
    return device.startswith("cuda") and optimiser_device(settings, device) != device


def _device_evaluator(
    model: nn.Module, params: dict[str, torch.Tensor], target: list[torch.Tensor], work: LocalWork,
    labels: np.ndarray | None, settings: InversionSettings, device: str, knowledge: DefenseKnowledge,
) -> BatchEvaluate:
    """The batched objective of stacked candidates (:func:`~.batched.batch_evaluator`), on ``device``,
    replayed from CUDA graphs where :func:`graphs_on`; the answers come back to the candidates' device."""
    loss = _candidate_loss(model, target, work, labels, settings, device, knowledge, functional_gradient)
    fixed = {k: p.detach() for k, p in params.items()}
    buffers = {k: b.detach() for k, b in model.named_buffers()}
    evaluate = batch_evaluator(lambda x, z, bufs: loss(fixed, x, z, bufs), buffers)
    if graphs_on(settings, device):
        evaluate = GraphedEvaluate(evaluate)
    return _answers_to(evaluate, device)


def _leaf_evaluate(ask: Callable[[torch.Tensor, torch.Tensor | None], Answer]) -> Evaluate:
    """:data:`Evaluate` for one candidate's leaves from ``ask`` (its loss and gradients, computed elsewhere)."""

    def evaluate(x: torch.Tensor, z: torch.Tensor | None, grads: Literal["always", "finite", "none"]) -> torch.Tensor:
        value, gx, gz = ask(x.detach(), None if z is None else z.detach())
        if grads == "always" or (grads == "finite" and torch.isfinite(value)):
            x.grad = gx
            if z is not None:
                z.grad = gz
        return value

    return evaluate


def _single(evaluate: BatchEvaluate) -> Callable[[torch.Tensor, torch.Tensor | None], Answer]:
    """One candidate's :data:`~.batched.Answer` from a batched objective (a batch of one)."""

    def ask(x: torch.Tensor, z: torch.Tensor | None) -> Answer:
        losses, gx, gz = evaluate(x[None], None if z is None else z[None])
        return losses[0], gx[0], None if gz is None else gz[0]

    return ask


def _grad_to(computed: torch.Tensor, leaf: torch.Tensor) -> torch.Tensor | None:
    """The gradient computed on a device copy, as the gradient of the optimiser's own leaf."""
    return None if computed.grad is None else computed.grad.to(leaf.device)


def _answers_to(evaluate: BatchEvaluate, device: str) -> BatchEvaluate:
    """``evaluate`` run on ``device`` for candidates kept elsewhere; the answers come back to them."""

    def moved(x: torch.Tensor, z: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        losses, gx, gz = evaluate(x.to(device), None if z is None else z.to(device))
        return losses.to(x.device), gx.to(x.device), None if gz is None else gz.to(x.device)

    return moved


def _search_batched(
    model: nn.Module,
    params: dict[str, torch.Tensor],
    target: list[torch.Tensor],
    work: LocalWork,
    n_images: int,
    image_shape: tuple[int, int, int],
    n_classes: int,
    labels: np.ndarray | None,
    settings: InversionSettings,
    shares: list[int],
    generator: torch.Generator,
    seconds: float | None,
    device: str = "cpu",
    knowledge: DefenseKnowledge | None = None,
) -> list[Reconstruction]:
    """``len(shares)`` restarts at once: the starts drawn in the order :func:`_search` draws them
    one restart after the other, every restart's own optimiser (:func:`_optimise`, unchanged), all
    their objective evaluations batched into one ``torch.func`` call (:mod:`.batched`)."""
    knowledge = knowledge or DefenseKnowledge()
    host = optimiser_device(settings, device)
    starts = [_draw_start(n_images, image_shape, n_classes, labels is None, settings.init, generator, host)
              for _ in shares]
    evaluator = _device_evaluator(model, params, target, work, labels, settings, device, knowledge)
    if settings.method == "inverting-gradients":
        return _signed_adam_together([x for x, _ in starts], labels, settings, shares, seconds, evaluator)

    def worker(r: int) -> Callable[[Callable[[torch.Tensor, torch.Tensor | None], Answer]], Reconstruction]:
        def run(ask: Callable[[torch.Tensor, torch.Tensor | None], Answer]) -> Reconstruction:
            x, z = starts[r]
            return _optimise(x, z, labels, settings, shares[r], seconds, _leaf_evaluate(ask))

        return run

    return LockStep([worker(r) for r in range(len(shares))], evaluator).run()


def _signed_adam_schedule(variables: list[torch.Tensor], settings: InversionSettings, steps: int
                          ) -> tuple[torch.optim.Adam, torch.optim.lr_scheduler.MultiStepLR]:
    """Inverting Gradients' optimiser: Adam (on the gradient's sign) decayed tenfold at 3/8, 5/8 and 7/8 of ``steps``."""
    optimiser = torch.optim.Adam(variables, lr=settings.step_size())
    milestones = [int(steps * f) for f in (3 / 8, 5 / 8, 7 / 8)]
    return optimiser, torch.optim.lr_scheduler.MultiStepLR(optimiser, milestones=milestones, gamma=0.1)


def _signed_adam_together(
    starts: list[torch.Tensor],
    labels: np.ndarray | None,
    settings: InversionSettings,
    shares: list[int],
    seconds: float | None,
    evaluate: BatchEvaluate,
) -> list[Reconstruction]:
    """Inverting Gradients' restarts optimised together: the restarts with the same step budget
    are one stacked tensor under one Adam, all running restarts evaluated in one batched call.

    Adam and the box are elementwise, so a stacked tensor takes exactly the steps each restart
    takes under its own Adam (:func:`_optimise`); each restart's schedule follows its own share,
    its best iterate is kept as alone (the lowest finite loss, compared as a Python float), and
    it is scored once more at its final iterate. No thread per restart: one evaluation and one
    optimiser step per group and step, which is what lets a GPU run many restarts at its rate.
    """
    out_labels = np.asarray(labels, dtype=np.int64)
    groups: dict[int, list[int]] = {}
    for r, share in enumerate(shares):
        groups.setdefault(share, []).append(r)
    stacks = {share: torch.stack([starts[r].detach() for r in members]).requires_grad_(True)
              for share, members in groups.items()}
    schedules = {share: _signed_adam_schedule([x], settings, share) for share, x in stacks.items()}
    best_loss = {share: torch.full((len(m),), math.inf, dtype=torch.float64) for share, m in groups.items()}
    best_x = {share: x.detach().clone() for share, x in stacks.items()}
    done = dict.fromkeys(groups, 0)
    evaluations = dict.fromkeys(groups, 0)

    def keep(share: int, values: torch.Tensor) -> None:
        values = values.detach().to("cpu", torch.float64)
        better = torch.isfinite(values) & (values < best_loss[share])
        best_loss[share] = torch.where(better, values, best_loss[share])
        mask = better.to(stacks[share].device).view(-1, *([1] * (stacks[share].dim() - 1)))
        best_x[share] = torch.where(mask, stacks[share].detach().clamp(0, 1), best_x[share])

    def evaluate_groups(active: list[int]) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
        values, gx, _ = evaluate(torch.cat([stacks[share].detach() for share in active]), None)
        sizes = [len(groups[share]) for share in active]
        return dict(zip(active, zip(values.split(sizes), gx.split(sizes))))

    start = time.perf_counter()
    timed_out = 0  # the step after which the clock stopped every running restart (0: never)
    for step in range(1, max(shares) + 1):
        active = [share for share in groups if share >= step]
        for share, (values, gx) in evaluate_groups(active).items():
            optimiser, scheduler = schedules[share]
            optimiser.zero_grad()
            done[share] = step
            evaluations[share] += 1
            keep(share, values)
            stacks[share].grad = gx.sign()
            optimiser.step()
            scheduler.step()
            with torch.no_grad():
                stacks[share].clamp_(0, 1)
        if seconds is not None and time.perf_counter() - start > seconds:
            timed_out = step
            break
    for share, (values, _) in evaluate_groups(list(groups)).items():  # each restart's final iterate
        evaluations[share] += 1
        keep(share, values)
    elapsed = time.perf_counter() - start
    runs: dict[int, Reconstruction] = {}
    for share, members in groups.items():
        for i, r in enumerate(members):
            ran = "time" if timed_out and share >= timed_out else "steps"
            runs[r] = Reconstruction(best_x[share][i].clone(), out_labels, float(best_loss[share][i]), done[share],
                                     evaluations[share], elapsed, ran)
    return [runs[r] for r in range(len(shares))]


def _optimise(
    x: torch.Tensor,
    z: torch.Tensor | None,
    labels: np.ndarray | None,
    settings: InversionSettings,
    steps: int,
    seconds: float | None,
    evaluate: Evaluate,
) -> Reconstruction:
    """One restart's optimisation from the leaves x (and z): signed Adam for Inverting Gradients,
    L-BFGS otherwise, the best iterate kept."""
    ig = settings.method == "inverting-gradients"
    evaluations = 0
    best_loss, best_x, best_z = math.inf, x.detach().clone(), None if z is None else z.detach().clone()

    def keep(loss: torch.Tensor) -> None:
        nonlocal best_loss, best_x, best_z
        value = float(loss)
        if math.isfinite(value) and value < best_loss:
            best_loss = value
            best_x = x.detach().clamp(0, 1)  # a new tensor: the iterate moves on
            best_z = None if z is None else z.detach().clone()

    variables = [x] if z is None else [x, z]
    start = time.perf_counter()
    stopped = "steps"
    done = 0
    if ig:
        optimiser, scheduler = _signed_adam_schedule(variables, settings, steps)
        for step in range(1, steps + 1):
            done = step
            optimiser.zero_grad()
            loss = evaluate(x, z, "always")
            evaluations += 1
            keep(loss)
            for v in variables:
                if v.grad is not None:
                    v.grad.sign_()
            optimiser.step()
            scheduler.step()
            with torch.no_grad():
                x.clamp_(0, 1)
            if seconds is not None and time.perf_counter() - start > seconds:
                stopped = "time"
                break
    else:
        # One step = one call of L-BFGS with up to ``lbfgs_inner`` iterations (20, torch's
        # default and the inner loop of DLG's own code), strong-Wolfe line search.
        optimiser = (CompactLBFGS if settings.lbfgs == "compact" else TwoLoopLBFGS)(
            variables, lr=settings.step_size(), max_iter=settings.lbfgs_inner, history_size=100,
            line_search_fn="strong_wolfe", tolerance_grad=0.0, tolerance_change=0.0,
        )

        def closure() -> torch.Tensor:
            nonlocal evaluations
            optimiser.zero_grad()
            loss = evaluate(x, z, "finite")
            evaluations += 1
            keep(loss)
            return loss

        for step in range(1, steps + 1):
            done = step
            before = optimiser.state[x].get("n_iter", 0)
            optimiser.step(closure)
            advanced = optimiser.state[x].get("n_iter", 0) - before
            if not all(torch.isfinite(v).all() for v in variables):
                stopped = "diverged"
                break
            if best_loss < 1e-14:
                stopped = "converged"
                break
            if advanced < settings.lbfgs_inner:
                # The line search found no descent: L-BFGS has halted and more steps change nothing.
                stopped = "halted"
                break
            if seconds is not None and time.perf_counter() - start > seconds:
                stopped = "time"
                break
    # The final iterate is scored too (the last optimiser step moved it after the last evaluation).
    if stopped not in ("diverged",):
        with torch.enable_grad():
            final = evaluate(x, z, "none")
        evaluations += 1
        keep(final)
    if best_z is not None:
        out_labels = best_z.argmax(dim=-1).cpu().numpy().astype(np.int64)
    else:
        out_labels = np.asarray(labels, dtype=np.int64)
    return Reconstruction(best_x, out_labels, best_loss, done, evaluations, time.perf_counter() - start, stopped)
