"""One batched evaluation of many inversion candidates (restarts), each with its own optimiser.

A gradient-inversion objective (DLG eq. 4, Zhu et al., NeurIPS 2019; Inverting Gradients
eq. 4, Geiping et al., NeurIPS 2020) needs, per candidate image batch x', the gradient of the
model's loss *with respect to the weights* at x', then the gradient of a distance of that to
the target update with respect to x'. A plain batched forward would sum the weight gradients
over the candidates; ``torch.func`` keeps them apart: ``vmap`` over a leading candidate
dimension of ``grad_and_value`` of the per-candidate objective, whose inner weight gradient is
``torch.func.grad`` (:func:`~vispriv.plugins.federated.deep.local.functional_gradient`). One
call evaluates R candidates' losses and their gradients in x' (and in the soft labels of DLG).

The candidates' optimisers stay separate and unchanged: each runs in its own thread, and
:class:`LockStep` answers their evaluation requests together, once every candidate still
running has asked. An optimiser thus sees exactly the sequence of losses and gradients it would
see alone (up to the float rounding of batched kernels), whatever it does between evaluations:
an L-BFGS line search that evaluates a varying number of times per iteration included. The
threads only hand tensors over; the arithmetic runs in the thread that calls :meth:`LockStep.run`.

On a CUDA device :class:`GraphedEvaluate` replays the batched objective from CUDA graphs (DLG's and
iDLG's small networks: launching their kernels one by one cost more than running them).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import torch
from torch.func import grad_and_value, vmap

#: ``evaluate(x, z)`` of stacked candidates (R, ...) -> (losses (R,), d/dx (R, ...), d/dz or None).
BatchEvaluate = Callable[[torch.Tensor, torch.Tensor | None], tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]]
#: The objective of one candidate: ``loss(x, z, buffers)`` (z None where the labels are fixed).
CandidateLoss = Callable[[torch.Tensor, torch.Tensor | None, dict[str, torch.Tensor]], torch.Tensor]
#: One candidate's answer: its loss (0-d), d/dx and d/dz (None where the labels are fixed).
Answer = tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]

T = TypeVar("T")


def batch_evaluator(loss: CandidateLoss, buffers: dict[str, torch.Tensor]) -> BatchEvaluate:
    """Evaluate ``loss`` and its gradients for R candidates in one vmapped call.

    Each candidate runs on its own copy of ``buffers`` (BatchNorm in training mode updates them
    in place, as a fresh copy is updated in the per-candidate path; the update never feeds back).
    """

    def with_labels(x: torch.Tensor, z: torch.Tensor, bufs: dict[str, torch.Tensor]) -> torch.Tensor:
        return loss(x, z, bufs)

    def fixed_labels(x: torch.Tensor, bufs: dict[str, torch.Tensor]) -> torch.Tensor:
        return loss(x, None, bufs)

    joint = vmap(grad_and_value(with_labels, argnums=(0, 1)))
    images_only = vmap(grad_and_value(fixed_labels))

    def evaluate(x: torch.Tensor, z: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        copies = {k: b.unsqueeze(0).expand(len(x), *b.shape).clone() for k, b in buffers.items()}
        with torch.enable_grad():
            if z is None:
                gx, value = images_only(x, copies)
                return value.detach(), gx.detach(), None
            (gx, gz), value = joint(x, z, copies)
            return value.detach(), gx.detach(), gz.detach()

    return evaluate


class Aborted(RuntimeError):
    """Raised in a candidate's thread when the batched evaluation failed."""


class LockStep(Generic[T]):
    """Run ``workers`` (one per candidate) in threads; answer their evaluations in batches.

    ``workers[r](ask)`` runs candidate r's whole search and returns its result; it calls
    ``ask(x, z)`` wherever it needs the objective and gets that candidate's :data:`Answer`.
    A batch is evaluated once every worker still running waits on ``ask``; a worker that
    finishes leaves the batch. Results come back in the workers' order.

    Each worker waits on an event of its own, set when its answer is ready, and only the
    coordinator waits on the shared condition: a round of R evaluations wakes R + 1 threads,
    not R² (with one condition for all, every request and every answer woke every thread:
    at 128 restarts that, not the evaluation, set the pace).
    """

    def __init__(self, workers: Sequence[Callable[[Callable[[torch.Tensor, torch.Tensor | None], Answer]], T]],
                 evaluate: BatchEvaluate) -> None:
        self.workers = list(workers)
        self.evaluate = evaluate
        self.cond = threading.Condition()
        self.pending: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = {}
        self.answers: dict[int, Answer] = {}
        self.ready = [threading.Event() for _ in self.workers]
        self.live = len(self.workers)
        self.failed: BaseException | None = None
        self.batches = 0

    def _ask(self, r: int, x: torch.Tensor, z: torch.Tensor | None) -> Answer:
        with self.cond:
            if self.failed is not None:
                raise Aborted("the batched evaluation failed") from self.failed
            self.pending[r] = (x, z)
            if len(self.pending) >= self.live:
                self.cond.notify()
        self.ready[r].wait()
        self.ready[r].clear()
        with self.cond:
            if r not in self.answers:
                raise Aborted("the batched evaluation failed") from self.failed
            return self.answers.pop(r)

    def _work(self, r: int, results: list[T | None], errors: list[Exception | None]) -> None:
        try:
            results[r] = self.workers[r](lambda x, z: self._ask(r, x, z))
        except Exception as err:  # noqa: BLE001 -- handed to the caller of run(), which raises it
            errors[r] = err
        finally:
            with self.cond:
                self.live -= 1
                self.cond.notify()

    def run(self) -> list[T]:
        """Start the workers, evaluate their batches here until all have finished, return their results."""
        results: list[T | None] = [None] * len(self.workers)
        errors: list[Exception | None] = [None] * len(self.workers)
        threads = [threading.Thread(target=self._work, args=(r, results, errors), daemon=True)
                   for r in range(len(self.workers))]
        for t in threads:
            t.start()
        try:
            while True:
                with self.cond:
                    while self.live > 0 and len(self.pending) < self.live:
                        self.cond.wait()
                    if self.live == 0:
                        break
                    batch = sorted(self.pending.items())
                    self.pending.clear()
                try:
                    answers = self._answer(batch)
                except BaseException as err:
                    with self.cond:
                        self.failed = err
                    for event in self.ready:
                        event.set()
                    raise
                with self.cond:
                    self.answers.update(answers)
                    self.batches += 1
                for r in answers:
                    self.ready[r].set()
        finally:
            for t in threads:
                t.join()
        for error in errors:
            if error is not None and not isinstance(error, Aborted):
                raise error
        return list(results)  # type: ignore[arg-type]

    def _answer(self, batch: list[tuple[int, tuple[torch.Tensor, torch.Tensor | None]]]) -> dict[int, Answer]:
        x = torch.stack([xz[0] for _, xz in batch])
        zs = [xz[1] for _, xz in batch]
        z = None if zs[0] is None else torch.stack(zs)  # type: ignore[arg-type]
        losses, gx, gz = self.evaluate(x, z)
        return {r: (losses[i].clone(), gx[i].clone(), None if gz is None else gz[i].clone())
                for i, (r, _) in enumerate(batch)}


class GraphedEvaluate:
    """A :data:`BatchEvaluate` on a CUDA device, captured once per batch size in a CUDA graph and replayed.

    DLG's LeNet objective is a few hundred kernels of a few microseconds each: launched one by
    one from Python (forward, weight gradient with a graph, distance, double backward) they take
    ~5 ms on an H100, as long as on one CPU thread; replayed from a graph, 0.4 ms for one
    candidate and 1.4 ms for 128 (benchmarks/probes/graphed_evaluation.py). The batch is padded
    to the next power of two (repeats of its first candidate, whose answers are dropped), so a
    search whose batch shrinks as restarts finish captures at most log2(R) + 1 graphs. Each
    graph is captured after three warm-up calls on a side stream (``torch.cuda.graph``'s
    recipe); the replay computes the same kernels on the same numbers, so its answers equal
    the eager call's up to the order of floating-point reductions. A capture that fails (an
    objective that reads a value back to the host, say) is reported once as a warning and the
    eager call answers from then on.
    """

    def __init__(self, evaluate: BatchEvaluate, warmup: int = 3) -> None:
        self.evaluate = evaluate
        self.warmup = warmup
        self.graphs: dict[tuple[object, ...], tuple[torch.cuda.CUDAGraph, torch.Tensor, torch.Tensor | None,
                                                    tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]]] = {}
        self.failed: str | None = None

    def __call__(self, x: torch.Tensor, z: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        if self.failed is not None:
            return self.evaluate(x, z)
        n = len(x)
        size = 1 << (n - 1).bit_length()
        x, z = _padded(x, size), None if z is None else _padded(z, size)
        key = (tuple(x.shape), None if z is None else tuple(z.shape), x.device)
        if key not in self.graphs:
            try:
                self.graphs[key] = self._capture(x, z)
            except Exception as err:  # noqa: BLE001 -- any capture failure: the eager call answers (and raises a real fault)
                self.failed = f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
                warnings.warn(f"the inversion objective could not be captured in a CUDA graph ({self.failed}); "
                              "evaluating it eagerly", RuntimeWarning, stacklevel=2)
                losses, gx, gz = self.evaluate(x, z)
                return losses[:n], gx[:n], None if gz is None else gz[:n]
        graph, static_x, static_z, (losses, gx, gz) = self.graphs[key]
        static_x.copy_(x)
        if static_z is not None and z is not None:
            static_z.copy_(z)
        graph.replay()
        return losses[:n].clone(), gx[:n].clone(), None if gz is None else gz[:n].clone()

    def _capture(self, x: torch.Tensor, z: torch.Tensor | None):  # type: ignore[no-untyped-def]
        static_x = x.clone()
        static_z = None if z is None else z.clone()
        side = torch.cuda.Stream(device=x.device)
        side.wait_stream(torch.cuda.current_stream(x.device))
        with torch.cuda.stream(side):
            for _ in range(self.warmup):
                self.evaluate(static_x, static_z)
        torch.cuda.current_stream(x.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = self.evaluate(static_x, static_z)
        return graph, static_x, static_z, outputs


def _padded(t: torch.Tensor, size: int) -> torch.Tensor:
    """``t`` with repeats of its first row appended up to ``size`` rows."""
    if len(t) == size:
        return t
    return torch.cat([t, t[:1].expand(size - len(t), *t.shape[1:])])
