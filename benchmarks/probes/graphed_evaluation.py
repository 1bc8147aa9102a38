"""DLG's LeNet evaluation eager against one CUDA-graph replay, per candidate, against one CPU thread.

A probe for what a device can do with DLG's objective (Zhu et al., NeurIPS 2019, eq. 4: the
squared L2 distance between the candidate's weight gradient and the target, and its gradient in
the candidate image and label logits), batch 1, a bundled 32x32 digit, LeNet at its
initialisation. Three ways to evaluate it on R candidates:

* ``eager``: R autograd evaluations one after the other (the path of ``batched: off``);
* ``vmap``: one ``torch.func`` call over the R stacked candidates (``batched: on``,
  :func:`~vispriv.plugins.federated.deep.batched.batch_evaluator`);
* ``graph``: the ``vmap`` call captured once in a CUDA graph and replayed on new candidates copied
  into its static input, one launch per evaluation
  (:class:`~vispriv.plugins.federated.deep.batched.GraphedEvaluate`, what DLG and iDLG use on a
  CUDA device).

Prints milliseconds per call and per candidate, and the candidate evaluations per second,
beside the same eager evaluation on one CPU thread. A capture that fails prints its error.

    python benchmarks/probes/graphed_evaluation.py --restarts 1 8 32 128
"""

from __future__ import annotations

import argparse

import torch
from batched_evaluation import timed  # the same timing as the batched-evaluation probe

from vispriv.harness import torch_threads
from vispriv.plugins.federated.deep.adaptive import DefenseKnowledge
from vispriv.plugins.federated.deep.batched import GraphedEvaluate, batch_evaluator
from vispriv.plugins.federated.deep.inversion import InversionSettings, _candidate_loss
from vispriv.plugins.federated.deep.local import LocalWork, autograd_gradient, client_update, functional_gradient
from vispriv.plugins.federated.deep.models import build_model
from vispriv.plugins.federated.deep.sources import load_bundled_digits


def objective(device: str):
    """DLG's candidate loss on ``device`` and the shapes of one candidate."""
    data = load_bundled_digits(32)
    x = torch.as_tensor(data.images[:1]).permute(0, 3, 1, 2).contiguous()
    y = torch.as_tensor(data.labels[:1])
    n_classes = len(data.class_names)
    model = build_model("lenet", n_classes, x.shape[1], 32, 16, 0)
    work = LocalWork()
    work.set_mode(model)
    target = [t.to(device) for t in client_update(model, x, y, work)]
    model = model.to(device)
    settings = InversionSettings("dlg")
    return model, target, work, settings, tuple(x.shape), n_classes


def measure(device: str, r: int, reps: int) -> list[tuple[str, int, str, float]]:
    """Seconds per call of the three evaluations of ``r`` candidates on ``device`` (no graph on the CPU)."""
    model, target, work, settings, shape, n_classes = objective(device)
    params = {k: p.detach().requires_grad_(True) for k, p in model.named_parameters()}
    fixed = {k: p.detach() for k, p in model.named_parameters()}
    knowledge = DefenseKnowledge().to(device)
    eager_loss = _candidate_loss(model, target, work, None, settings, device, knowledge, autograd_gradient(True))
    vmap_loss = _candidate_loss(model, target, work, None, settings, device, knowledge, functional_gradient)
    evaluate = batch_evaluator(lambda x, z, bufs: vmap_loss(fixed, x, z, bufs), {})
    xs = torch.rand(r, *shape, device=device)
    zs = torch.randn(r, shape[0], n_classes, device=device)

    def eager() -> None:
        for i in range(r):
            x = xs[i].clone().requires_grad_(True)
            z = zs[i].clone().requires_grad_(True)
            eager_loss(params, x, z, None).backward()
            float(x.grad.sum())

    rows = [(device, r, "eager", timed(eager, device, max(1, reps // r))),
            (device, r, "vmap", timed(lambda: evaluate(xs, zs), device, max(1, reps // r)))]
    if device == "cpu":
        return rows
    try:
        graphed = GraphedEvaluate(evaluate)
        reference = evaluate(xs, zs)
        error = max(float((a - b).abs().max()) for a, b in zip(graphed(xs, zs), reference) if a is not None)
        rows.append((device, r, f"graph (max |graph - vmap| {error:.1e})", timed(lambda: graphed(xs, zs), device, reps)))
    except Exception as exc:  # noqa: BLE001 -- a probe reports what failed
        rows.append((device, r, f"graph failed: {type(exc).__name__}: {str(exc)[:160]}", float("nan")))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--restarts", type=int, nargs="*", default=[1, 8, 32])
    parser.add_argument("--reps", type=int, default=50)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rows = []
    for device in ["cpu"] + ([args.device] if args.device != "cpu" else []):
        with torch_threads(1 if device == "cpu" else torch.get_num_threads()):
            for r in args.restarts:
                rows += measure(device, r, args.reps)
    print(f"torch {torch.__version__}; {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU'}")
    print("\n| device | R | evaluation | ms per call | ms per candidate | candidate evaluations / s |")
    print("|---|---|---|---|---|---|")
    for device, r, how, seconds in rows:
        print(f"| {device} | {r} | {how} | {seconds * 1e3:.3f} | {seconds * 1e3 / r:.3f} | {r / seconds:.0f} |")


if __name__ == "__main__":
    main()
