"""Where one DLG restart's time goes on one CPU thread: the objective against the plain evaluation, and L-BFGS.

DLG (Zhu et al., NeurIPS 2019) on its LeNet, a bundled digit, batch 1, the case of
``benchmarks/inversion_batching.py``. Prints, per evaluation:

* ``plain``: the plain gradient-matching evaluation (that benchmark's bound: the model's own
  forward, weight gradient with a graph, distance, backward to the image);
* ``search objective``: the same evaluation as one restart's search runs it (the method's
  objective through the simulated local work, backward to the image and label logits only);
* ``search``: a whole DLG restart (the median of three; ``invert``, ``--steps`` L-BFGS steps, ``--lbfgs``: torch's
  with its step compiled, the default where numba is installed; torch's own step in Python,
  ``torch-eager``; or the compact one) over its evaluations;

and, from ``cProfile`` of one such restart, the seconds per evaluation inside autograd's
backward and inside the L-BFGS's own code (torch-eager: torch's step, i.e. the two-loop
recursion, and its dot/add_ calls; the others: their module's functions), the objective excluded.
Last, the ceilings: each L-BFGS (torch's, torch's with its step compiled, the
compact one) alone with DLG's settings (history 100, full; strong Wolfe) on as many variables
(the image and the label logits) and an objective of negligible cost (the Rosenbrock
function), per evaluation; with it, no search that keeps that L-BFGS can exceed plain /
(plain + L-BFGS alone) of the bound once its history is full (all but the first 100 iterations; a DLG attack runs thousands). The
``search`` row's short restart fills its history partway, so on a loaded machine, or with few
steps, it can sit slightly above that steady-state ceiling.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/probes/dlg_overhead.py [--lbfgs torch-eager|compact]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from inversion_batching import bound_seconds, setup  # the benchmark's own timing: median after 5 warm-ups

from vispriv.harness import torch_threads
from vispriv.plugins.federated.deep.adaptive import DefenseKnowledge
from vispriv.plugins.federated.deep.inversion import InversionSettings, _candidate_loss, invert
from vispriv.plugins.federated.deep.lbfgs import CompactLBFGS
from vispriv.plugins.federated.deep.lbfgs_two_loop import SWITCH, TwoLoopLBFGS
from vispriv.plugins.federated.deep.local import autograd_gradient, trainable


def lbfgs_alone(n_vars: int, warm_steps: int = 10, steps: int = 20, optimiser_class: type = torch.optim.LBFGS) -> float:
    """Seconds per evaluation of ``optimiser_class`` (torch's L-BFGS or the compact one) with DLG's
    settings once its history is full, less the cost of the objective (the Rosenbrock function on
    ``n_vars`` variables)."""
    generator = torch.Generator().manual_seed(0)
    v = (torch.rand(n_vars, generator=generator) * 2 - 1).requires_grad_(True)

    def value() -> torch.Tensor:
        return (100 * (v[1:] - v[:-1] ** 2) ** 2 + (1 - v[:-1]) ** 2).sum()

    optimiser = optimiser_class([v], lr=1, max_iter=20, history_size=100, line_search_fn="strong_wolfe",
                                  tolerance_grad=0.0, tolerance_change=0.0)
    count = 0

    def closure() -> torch.Tensor:
        nonlocal count
        optimiser.zero_grad()
        loss = value()
        loss.backward()
        count += 1
        return loss

    for _ in range(warm_steps):
        optimiser.step(closure)
    state = optimiser.state[v]
    history = next(state[key] for key in ("old_dirs", "pairs", "history") if key in state)
    assert len(history) == 100, "history not full"
    first, start = count, time.perf_counter()
    for _ in range(steps):
        optimiser.step(closure)
    per_evaluation = (time.perf_counter() - start) / (count - first)

    def objective() -> None:
        v.grad = None
        value().backward()

    return per_evaluation - bound_seconds(objective, "cpu", 500)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=8, help="L-BFGS steps of the profiled restart")
    parser.add_argument("--reps", type=int, default=60)
    parser.add_argument("--lbfgs", choices=["torch", "torch-eager", "compact"], default="torch",
                        help="the search's L-BFGS: torch's (its step compiled where numba is installed), "
                             "torch's own step in Python, or the compact one")
    args = parser.parse_args()
    with torch_threads(1):
        x, _, n_classes, model, work, target, plain, _ = setup("dlg-lenet", "cpu")
        if args.lbfgs == "torch-eager":
            os.environ[SWITCH] = "0"
        settings = InversionSettings(method="dlg", steps=args.steps, restarts=1, lbfgs="compact" if args.lbfgs == "compact" else "torch")
        loss = _candidate_loss(model, target, work, None, settings, "cpu", DefenseKnowledge(), autograd_gradient(True))
        leaves = {k: p.detach().requires_grad_(True) for k, p in trainable(model).items()}
        xs = torch.rand(*x.shape).requires_grad_(True)
        zs = torch.randn(1, n_classes).requires_grad_(True)

        def objective() -> None:
            loss(leaves, xs, zs, None).backward(inputs=[xs, zs])
            xs.grad = zs.grad = None

        shape = tuple(x.shape[1:])
        invert(model, target, 1, shape, n_classes, settings, seed=0, work=work)  # first-call costs
        per_evaluation = []
        for _ in range(3):  # the median of three restarts: one timing moves by +-10 % on a shared machine
            start = time.perf_counter()
            run = invert(model, target, 1, shape, n_classes, settings, seed=0, work=work)
            per_evaluation.append((time.perf_counter() - start) / run.evaluations)
        search = statistics.median(per_evaluation)
        profile = cProfile.Profile()
        profile.enable()
        profiled = invert(model, target, 1, shape, n_classes, settings, seed=0, work=work)
        profile.disable()
        stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
        backward = sum(v[2] for k, v in stats.items() if "run_backward" in k[2])
        if args.lbfgs == "torch-eager":
            lbfgs_own = sum(v[2] for k, v in stats.items() if k[0].endswith("optim/lbfgs.py") and k[2] == "step")
            ops = sum(v[2] for k, v in stats.items() if k[2] in ("<method 'add_' of 'torch._C.TensorBase' objects>",
                                                                  "<method 'dot' of 'torch._C.TensorBase' objects>"))
        else:  # every function of the L-BFGS's own module; its array operations are C calls cProfile does not list
            modules = ("deep/lbfgs.py",) if args.lbfgs == "compact" else ("deep/lbfgs_two_loop.py", "deep/strong_wolfe.py")
            lbfgs_own = sum(v[2] for k, v in stats.items() if k[0].endswith(modules))
        rows = [("plain", bound_seconds(plain, "cpu", args.reps)), ("search objective", bound_seconds(objective, "cpu", args.reps)),
                ("search", search)]
        os.environ.pop(SWITCH, None)  # the ceilings below: each L-BFGS as it is
    print(f"torch {torch.__version__}; DLG LeNet, one CPU thread; {run.evaluations} evaluations in {args.steps} steps")
    print("\n| per evaluation | ms | / plain |")
    print("|---|---|---|")
    for name, seconds in rows:
        print(f"| {name} | {seconds * 1e3:.2f} | {seconds / rows[0][1]:.2f} |")
    n = profiled.evaluations
    own = (f"torch's L-BFGS step's own code {lbfgs_own / n * 1e3:.2f} ms and its dot/add_ operations {ops / n * 1e3:.2f} ms"
           if args.lbfgs == "torch-eager" else f"the {args.lbfgs} L-BFGS's own code {lbfgs_own / n * 1e3:.2f} ms")
    print(f"\ncProfile of one restart ({n} evaluations; profiled times run slower): autograd backward "
          f"{backward / n * 1e3:.2f} ms, {own} per evaluation")
    n_vars = int(x[0].numel()) + n_classes
    for name, optimiser_class in (("torch's L-BFGS", torch.optim.LBFGS), ("torch's L-BFGS, step compiled", TwoLoopLBFGS),
                                  ("the compact L-BFGS", CompactLBFGS)):
        with torch_threads(1):
            alone = lbfgs_alone(n_vars, optimiser_class=optimiser_class)
        print(f"{name} alone, history 100 full, {n_vars} variables: {alone * 1e3:.2f} ms per evaluation; ceiling of "
              f"a search that keeps it: plain / (plain + L-BFGS) = {rows[0][1] / (rows[0][1] + alone):.2f} of the bound")


if __name__ == "__main__":
    main()
