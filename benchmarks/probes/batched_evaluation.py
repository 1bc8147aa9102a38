"""One batched evaluation of R inversion candidates against R plain evaluations, on a device.

Splits a batched search's time into the evaluation itself and the rest (the candidates'
optimisers and their threads): times one ``batch_evaluator`` call over R candidates (the
``torch.func`` path of ``batched: on``) and R evaluations one after the other (the autograd
path of ``batched: off``), Inverting Gradients' objective on its ConvNet or ResNet-18, a bundled
32x32 photo, batch 1, synchronised on a GPU. ``--cudnn-benchmark`` lets cuDNN pick its
algorithms by timing them. Prints milliseconds per call and per candidate and the share of the
measured float32 matrix-product rate.

    python benchmarks/probes/batched_evaluation.py --device cuda --cases convnet:64 resnet18:16 --restarts 1 32 128
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from vispriv.plugins.federated.deep.adaptive import DefenseKnowledge
from vispriv.plugins.federated.deep.batched import batch_evaluator
from vispriv.plugins.federated.deep.inversion import InversionSettings, _candidate_loss
from vispriv.plugins.federated.deep.local import (
    LocalWork,
    autograd_gradient,
    client_update,
    functional_gradient,
    trainable,
)
from vispriv.plugins.federated.deep.models import build_model
from vispriv.plugins.federated.deep.sources import load_bundled_photos


def timed(fn, device: str, reps: int) -> float:
    fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / reps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--cases", nargs="*", default=["convnet:16"])
    parser.add_argument("--restarts", type=int, nargs="*", default=[1, 8])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--cudnn-benchmark", action="store_true")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    if args.device == "cpu":
        torch.set_num_threads(1)
    device = args.device
    n = 1024 if device == "cpu" else 4096
    a = torch.randn(n, n, device=device)
    rate = 2 * n**3 / timed(lambda: a @ a, device, 10)
    print(f"torch {torch.__version__}; {device}; cudnn.benchmark {args.cudnn_benchmark}; matmul {rate / 1e12:.3f} TFLOP/s")
    data = load_bundled_photos(32)
    x = torch.as_tensor(data.images[:1]).permute(0, 3, 1, 2).contiguous()
    y = torch.as_tensor(data.labels[:1])
    classes = len(data.class_names)
    for case in args.cases:
        arch, width = case.split(":")
        measure(case, build_model(arch, classes, 3, 32, int(width), 0), x, y, device, rate, args.restarts, args.reps)


def measure(case: str, model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, device: str, rate: float,
            restarts: list[int], reps: int) -> None:
    work = LocalWork()
    work.set_mode(model)
    target = [t.to(device) for t in client_update(model, x, y, work)]
    model = model.to(device)
    settings = InversionSettings(method="inverting-gradients", steps=10, tv=0.1, init="randn")
    labels = [int(y[0])]
    fixed = {k: p.detach() for k, p in trainable(model).items()}
    leaves = {k: p.detach().requires_grad_(True) for k, p in trainable(model).items()}
    buffers = {k: b.detach() for k, b in model.named_buffers()}
    knowledge = DefenseKnowledge()
    batched_loss = _candidate_loss(model, target, work, labels, settings, device, knowledge, functional_gradient)
    batched = batch_evaluator(lambda xx, z, b: batched_loss(fixed, xx, z, b), buffers)
    plain_loss = _candidate_loss(model, target, work, labels, settings, device, knowledge, autograd_gradient(True))

    def plain(xi: torch.Tensor) -> None:
        xi = xi.clone().requires_grad_(True)
        plain_loss(leaves, xi, None, None).backward(inputs=[xi])

    with FlopCounterMode(display=False) as counter:
        plain(torch.rand(1, 3, 32, 32, device=device))
    flops = counter.get_total_flops()
    for r in restarts:
        xs = torch.rand(r, 1, 3, 32, 32, device=device)
        one_by_one = timed(lambda xs=xs: [plain(xi) for xi in xs], device, reps)
        together = timed(lambda xs=xs: batched(xs, None), device, reps)
        print(f"{case} R={r}: one after the other {one_by_one * 1e3:.1f} ms ({one_by_one / r * 1e3:.2f} ms/candidate, "
              f"share {flops * r / one_by_one / rate:.4f}); batched {together * 1e3:.1f} ms "
              f"({together / r * 1e3:.2f} ms/candidate, share {flops * r / together / rate:.4f}); "
              f"speed-up {one_by_one / together:.2f}x", flush=True)

if __name__ == "__main__":
    main()
