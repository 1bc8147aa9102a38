"""Deep gradient inversion on a GPU against the CPU, at the papers' scale, with the physical limit.

Three cases, each the paper's network on bundled 32x32 images, batch 1, one FedSGD gradient
per image (the gradient of the cross-entropy at the untrained weights), inverted by vispriv's
own ``invert`` (the code the ``dlg`` and ``inverting-gradients`` plugins run):

* ``dlg-lenet``: DLG on DLG's LeNet (sigmoid, weights uniform in ±0.5), scikit-learn's bundled
  digits enlarged to 32x32, ``--dlg-steps`` L-BFGS steps (DLG: 300);
* ``ig-convnet64``: Inverting Gradients on its ConvNet at the paper's width 64, crops of the
  bundled photos, ``--ig-steps`` signed-Adam steps (the paper: 4,800), TV 0.1;
* ``ig-resnet18``: Inverting Gradients on ResNet-18 (CIFAR stem, untrained), the same crops
  and steps.

For each case and device: median PSNR over ``--images`` images, labels recovered, median
seconds per image, and the seconds per objective evaluation (forward, gradient with graph,
distance, backward). The CPU runs the whole budget for ``dlg-lenet`` and a ``--cpu-steps``
slice of the IG cases (their full budget takes hours on a CPU); its seconds per evaluation
give the speed-up. The physical limit, measured in the same process: the FLOPs of one
evaluation (``torch.utils.flop_counter``) over the device's measured float32 matrix-product
rate (TF32 off, as the inversion runs), i.e. the fastest an evaluation could run if it were
one large matrix product; the printed ratio says how far from it the small-batch search is.

Run (GPU machine; nothing is downloaded)::

    python benchmarks/deep_inversion_devices.py --out results.json

Without a GPU it runs the CPU rows only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch
from skimage.metrics import peak_signal_noise_ratio
from torch.utils.flop_counter import FlopCounterMode

from vispriv.plugins.federated.deep.inversion import (
    InversionSettings,
    cosine_distance,
    invert,
    l2_distance,
    torch_threads,
)
from vispriv.plugins.federated.deep.local import LocalWork, client_update, simulate_update, trainable
from vispriv.plugins.federated.deep.models import build_model
from vispriv.plugins.federated.deep.sources import load_bundled_digits, load_bundled_photos


def images_of(source: str, n: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``n`` images (N, C, 32, 32) of distinct classes, their labels and the class count."""
    data = load_bundled_digits(32) if source == "digits" else load_bundled_photos(32)
    picks = [int(np.flatnonzero(data.labels == c)[0]) for c in range(min(n, len(data.class_names)))]
    x = torch.as_tensor(data.images[picks]).permute(0, 3, 1, 2).contiguous()
    return x, torch.as_tensor(data.labels[picks]), len(data.class_names)


def matmul_rate(device: str, n: int = 4096, reps: int = 20) -> float:
    """Measured float32 matrix-product FLOP/s on ``device`` (TF32 off; one thread on the CPU, as the search runs)."""
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    with torch_threads(1 if device == "cpu" else torch.get_num_threads()):
        for _ in range(3):
            a @ b
        sync(device)
        start = time.perf_counter()
        for _ in range(reps):
            a @ b
        sync(device)
        return 2 * n**3 * reps / (time.perf_counter() - start)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def evaluation_cost(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, target: list[torch.Tensor],
                    ig: bool, device: str, reps: int) -> tuple[float, float]:
    """(seconds, FLOPs) of one objective evaluation with its backward, as the search runs it."""
    model = model.to(device)
    leaves = {k: p.detach().clone().requires_grad_(True) for k, p in trainable(model).items()}
    dummy = torch.rand_like(x, device=device).requires_grad_(True)
    target = [t.to(device) for t in target]
    y = y.to(device)
    distance = cosine_distance if ig else l2_distance
    work = LocalWork()
    work.set_mode(model)

    def once() -> None:
        loss = distance(simulate_update(model, leaves, dummy, y, work, create_graph=True), target)
        loss.backward()

    with FlopCounterMode(display=False) as counter:
        once()
    flops = float(counter.get_total_flops())
    with torch_threads(1 if device == "cpu" else torch.get_num_threads()):  # as the search runs
        for _ in range(3):
            once()
        sync(device)
        start = time.perf_counter()
        for _ in range(reps):
            once()
        sync(device)
        seconds = (time.perf_counter() - start) / reps
    return seconds, flops


def run_case(name: str, arch: str, source: str, method: str, width: int, steps: int, n: int,
             device: str, seed: int = 0) -> dict:
    x, y, n_classes = images_of(source, n)
    model = build_model(arch, n_classes, x.shape[1], 32, width, seed)
    work = LocalWork()
    settings = InversionSettings(method=method, steps=steps, tv=0.1 if method == "inverting-gradients" else 0.0,
                                 init="randn" if method == "inverting-gradients" else "uniform",
                                 threads=1 if device == "cpu" else torch.get_num_threads())
    rows = []
    for i in range(len(y)):
        work.set_mode(model)
        update = client_update(model, x[i : i + 1], y[i : i + 1], work)
        sync(device)
        rec = invert(model, update, 1, tuple(x.shape[1:]), n_classes, settings, seed=seed + i, work=work,
                     public_images=None, device=device)
        truth = x[i].permute(1, 2, 0).numpy()
        got = rec.images[0].permute(1, 2, 0).numpy()
        rows.append(dict(psnr=float(peak_signal_noise_ratio(truth, got, data_range=1.0)), seconds=rec.seconds,
                         evaluations=rec.evaluations, label_ok=bool(rec.labels[0] == int(y[i])), stopped=rec.stopped))
        print(f"  {name} {device} image {i}: {rows[-1]['psnr']:.1f} dB, {rec.seconds:.1f} s, "
              f"{rec.evaluations} evaluations ({rec.stopped})", flush=True)
    update = client_update(model, x[:1], y[:1], work)
    per_eval, flops = evaluation_cost(model, x[:1], y[:1], update, method == "inverting-gradients", device,
                                      reps=20 if device != "cpu" else 5)
    return dict(case=name, device=device, steps=steps, images=len(rows),
                psnr_median=statistics.median(r["psnr"] for r in rows),
                labels=sum(r["label_ok"] for r in rows) / len(rows),
                seconds_median=statistics.median(r["seconds"] for r in rows),
                evaluations_median=statistics.median(r["evaluations"] for r in rows),
                seconds_per_evaluation=per_eval, flops_per_evaluation=flops, rows=rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=4)
    parser.add_argument("--cpu-images", type=int, default=2)
    parser.add_argument("--dlg-steps", type=int, default=300)
    parser.add_argument("--ig-steps", type=int, default=4800)
    parser.add_argument("--cpu-steps", type=int, default=50, help="IG steps of the CPU's timing slice")
    parser.add_argument("--only", nargs="*", default=None, help="case names to run, in this order")
    parser.add_argument("--out", default=None, help="write the rows as JSON here")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cases = [("dlg-lenet", "lenet", "digits", "dlg", 16, args.dlg_steps),
             ("ig-convnet64", "convnet", "photos", "inverting-gradients", 64, args.ig_steps),
             ("ig-resnet18", "resnet18", "photos", "inverting-gradients", 16, args.ig_steps)]
    if args.only is not None:
        cases = [c for name in args.only for c in cases if c[0] == name]
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    limits = {d: matmul_rate(d, 4096 if d != "cpu" else 1024, 20 if d != "cpu" else 5) for d in devices}
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    print(f"torch {torch.__version__}; GPU: {gpu}; CPU threads {torch.get_num_threads()}; float32 matmul: "
          + ", ".join(f"{d} {r / 1e12:.2f} TFLOP/s" for d, r in limits.items()), flush=True)
    results = []
    for name, arch, source, method, width, steps in cases:
        for device in devices:
            cpu_slice = device == "cpu" and method == "inverting-gradients"
            n = args.cpu_images if device == "cpu" else args.images
            result = run_case(name, arch, source, method, width, args.cpu_steps if cpu_slice else steps, n, device)
            result["limit_flops_per_s"] = limits[device]
            results.append(result)
    print("\n| case | device | steps | images | PSNR median (dB) | labels | s / image | s / evaluation | "
          "speed-up vs CPU | FLOP/s achieved / matmul peak |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        cpu = next(c for c in results if c["case"] == r["case"] and c["device"] == "cpu")
        speedup = cpu["seconds_per_evaluation"] / r["seconds_per_evaluation"]
        achieved = r["flops_per_evaluation"] / r["seconds_per_evaluation"]
        print(f"| {r['case']} | {r['device']} | {r['steps']} | {r['images']} | {r['psnr_median']:.1f} | "
              f"{r['labels']:.2f} | {r['seconds_median']:.1f} | {r['seconds_per_evaluation'] * 1e3:.2f} ms | "
              f"{speedup:.1f}x | {achieved / r['limit_flops_per_s']:.4f} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(gpu=gpu, torch=torch.__version__, limits=limits, results=results), f, indent=1)


if __name__ == "__main__":
    main()
