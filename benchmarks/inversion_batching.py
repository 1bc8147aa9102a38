"""Batched restarts against one restart after the other: evaluations per second against the bounds.

Cases, batch 1, one FedSGD gradient of a bundled 32x32 image at the untrained weights, inverted
by vispriv's ``invert`` with R restarts and a fixed budget per restart:

* ``dlg-lenet``: DLG on DLG's LeNet (Zhu et al., NeurIPS 2019), a bundled digit,
  ``--dlg-steps`` L-BFGS steps per restart;
* ``ig-convnet16`` / ``ig-convnet64``: Inverting Gradients on its ConvNet at width 16 / the
  paper's 64 (Geiping et al., NeurIPS 2020), a bundled photo, TV 0.1, ``--ig-steps``
  signed-Adam steps per restart;
* ``ig-resnet18``: Inverting Gradients on ResNet-18 (CIFAR stem, untrained), the same photo.

Each R runs ``batched: off`` (the restarts one after the other) and ``batched: on`` (their
evaluations in one ``torch.func`` call, each restart with its own optimiser), alternating,
``--repeats`` times, on each of ``--devices`` (one torch thread on the CPU, as a matrix runs one
inversion per core). Two bounds, measured in the same process:

* the plain evaluation: the median time of one gradient-matching evaluation of one candidate
  written as plainly as possible (the model's forward, the gradient in the weights with a
  graph, the method's distance (+ TV), the backward to the image), i.e. the model's own
  forward + backward + double backward, measured before every inversion (the load of a shared
  machine moves it by 2x between measurements, so a case's bound is the median of all its
  measurements);
* the device's physical limit: its measured float32 matrix-product rate (TF32 off; 1024² on one
  CPU thread, 4096² on a GPU) against the FLOPs of one candidate's evaluation
  (``torch.utils.flop_counter``): the share of that rate the search achieves.

DLG's L-BFGS can be compared in the same run (``--lbfgs``): ``torch``, torch's L-BFGS with its
two-loop recursion compiled and the rest of its step on numpy where numba is installed (the
default); ``torch-eager``, torch's own step (the switch off); ``compact``, the compact representation's.
The first two must give the same reconstructions bit for bit; each run says whether they did.

Printed per device, case, R and mode: evaluations per second per candidate (all restarts'
evaluations over the inversion's wall time, optimiser included; median over the repeats), the
plain-evaluation bound and the ratio to it, the achieved share of the matrix-product rate, and
the PSNR of the reconstruction.

    .venv/bin/python benchmarks/inversion_batching.py --repeats 3
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/inversion_batching.py --cases dlg-lenet --restarts 1 8 \\
        --lbfgs torch torch-eager compact --repeats 5
    python benchmarks/inversion_batching.py --devices cpu cuda --cases dlg-lenet ig-convnet64 ig-resnet18 \\
        --restarts 1 8 32 --repeats 2                                           # a GPU machine
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import statistics
import time
from collections.abc import Iterator

import torch
from deep_inversion_devices import matmul_rate, sync  # the measured matmul rate, the same in both scripts
from skimage.metrics import peak_signal_noise_ratio
from torch.utils.flop_counter import FlopCounterMode

from vispriv.harness import torch_threads
from vispriv.plugins.federated.deep.inversion import (
    InversionSettings,
    cosine_distance,
    invert,
    l2_distance,
    total_variation,
)
from vispriv.plugins.federated.deep.lbfgs_two_loop import SWITCH, kernel_agrees
from vispriv.plugins.federated.deep.local import LocalWork, client_update, cross_entropy, trainable
from vispriv.plugins.federated.deep.models import build_model
from vispriv.plugins.federated.deep.sources import load_bundled_digits, load_bundled_photos

#: case -> (architecture, width, image source, method)
CASES = {
    "dlg-lenet": ("lenet", 16, "digits", "dlg"),
    "ig-convnet16": ("convnet", 16, "photos", "inverting-gradients"),
    "ig-convnet64": ("convnet", 64, "photos", "inverting-gradients"),
    "ig-resnet18": ("resnet18", 16, "photos", "inverting-gradients"),
}


def one_image(source: str, index: int = 0) -> tuple[torch.Tensor, torch.Tensor, int]:
    data = load_bundled_digits(32) if source == "digits" else load_bundled_photos(32)
    x = torch.as_tensor(data.images[index : index + 1]).permute(0, 3, 1, 2).contiguous()
    return x, torch.as_tensor(data.labels[index : index + 1]), len(data.class_names)


def threads_for(device: str) -> int:
    return 1 if device == "cpu" else torch.get_num_threads()


def plain_evaluation(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, target: list[torch.Tensor],
                     ig: bool):
    """One plain gradient-matching evaluation of one candidate, as a function of no arguments."""
    params = list(trainable(model).values())
    dummy = torch.rand_like(x).requires_grad_(True)
    std = getattr(model, "std", None)
    tv_scale = float(std.mean()) if isinstance(std, torch.Tensor) else 1.0

    def once() -> None:
        grads = torch.autograd.grad(cross_entropy(model(dummy), y), params, create_graph=True)
        if ig:
            loss = cosine_distance(list(grads), target) + 0.1 * total_variation(dummy) / tv_scale
        else:
            loss = l2_distance(list(grads), target)
        loss.backward(inputs=[dummy])
        dummy.grad = None

    return once


def bound_seconds(once, device: str, reps: int = 30) -> float:
    """Median seconds of one plain evaluation (synchronised on a GPU)."""
    times = []
    with torch_threads(threads_for(device)):
        for i in range(reps + 5):
            start = time.perf_counter()
            once()
            sync(device)
            if i >= 5:
                times.append(time.perf_counter() - start)
    return statistics.median(times)


def setup(case: str, device: str):
    arch, width, source, method = CASES[case]
    x, y, n_classes = one_image(source)
    model = build_model(arch, n_classes, x.shape[1], 32, width, 0)
    work = LocalWork()
    work.set_mode(model)
    target = client_update(model, x, y, work)
    on = copy.deepcopy(model).to(device)
    once = plain_evaluation(on, x.to(device), y.to(device), [t.to(device) for t in target],
                            method == "inverting-gradients")
    with FlopCounterMode(display=False) as counter:
        once()
    return x, y, n_classes, model, work, target, once, float(counter.get_total_flops())


@contextlib.contextmanager
def lbfgs_variant(variant: str) -> Iterator[str]:
    """The settings' ``lbfgs`` for a variant; ``torch-eager`` is torch's L-BFGS with its own
    step in Python (the compiled step turned off by its switch)."""
    if variant != "torch-eager":
        yield variant
        return
    before = os.environ.get(SWITCH)
    os.environ[SWITCH] = "0"
    try:
        yield "torch"
    finally:
        if before is None:
            del os.environ[SWITCH]
        else:
            os.environ[SWITCH] = before


def run(case: str, device: str, restarts: int, mode: str, steps: int, repeats: int, lbfgs: str = "torch") -> list[dict]:
    method = CASES[case][3]
    ig = method == "inverting-gradients"
    x, _, n_classes, model, work, target, once, flops = setup(case, device)
    rows = []
    for _ in range(repeats):
        bound = bound_seconds(once, device)
        with lbfgs_variant(lbfgs) as variant:
            settings = InversionSettings(method=method, steps=steps * restarts, restarts=restarts, tv=0.1 if ig else 0.0,
                                         init="randn" if ig else "uniform", batched=mode,  # type: ignore[arg-type]
                                         threads=threads_for(device), lbfgs=variant)  # type: ignore[arg-type]
            start = time.perf_counter()
            rec = invert(model, target, 1, tuple(x.shape[1:]), n_classes, settings, seed=0, work=work, device=device)
            seconds = time.perf_counter() - start
        psnr = float(peak_signal_noise_ratio(x[0].permute(1, 2, 0).numpy(), rec.images[0].permute(1, 2, 0).numpy(),
                                             data_range=1.0))
        rows.append(dict(rate=rec.evaluations / seconds, bound=1.0 / bound, psnr=psnr, evaluations=rec.evaluations,
                         seconds=seconds, loss=rec.loss, flops=flops, images=rec.images))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", nargs="*", default=["cpu"])
    parser.add_argument("--cases", nargs="*", default=["dlg-lenet", "ig-convnet16"], choices=sorted(CASES))
    parser.add_argument("--restarts", type=int, nargs="*", default=[1, 4, 8])
    parser.add_argument("--cpu-restarts", type=int, nargs="*", default=None,
                        help="restarts on the CPU when a GPU is also measured (default: --restarts)")
    parser.add_argument("--sequential-max", type=int, default=None,
                        help="run restarts one after the other only up to this R (their rate per candidate does not "
                             "depend on R); larger R run batched only")
    parser.add_argument("--dlg-steps", type=int, default=4, help="L-BFGS steps per restart")
    parser.add_argument("--ig-steps", type=int, default=40, help="signed-Adam steps per restart")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lbfgs", nargs="*", default=["torch"], choices=["torch", "torch-eager", "compact"],
                        help="DLG's L-BFGS: torch's (its step compiled where numba is installed), "
                             "torch's own step in Python, and/or the compact representation's")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    devices = [d for d in args.devices if d == "cpu" or torch.cuda.is_available()]
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    limits = {d: matmul_rate(d, 1024 if d == "cpu" else 4096, 20) for d in devices}
    print(f"torch {torch.__version__}; GPU: {gpu}; load average before {os.getloadavg()[0]:.2f}; float32 matmul: "
          + ", ".join(f"{d} {r / 1e12:.3f} TFLOP/s" for d, r in limits.items())
          + f"; L-BFGS step compiled: {'yes' if kernel_agrees() else 'no (torch eager)'}", flush=True)
    began = time.perf_counter()
    results = []
    for device in devices:
        for case in args.cases:
            steps = args.dlg_steps if case.startswith("dlg") else args.ig_steps
            lbfgs = args.lbfgs if case.startswith("dlg") else ["torch"]
            for variant in lbfgs:  # imports and first-call costs of every path
                run(case, device, 2, "on", 1, 1, variant)
                run(case, device, 1, "off", 1, 1, variant)
            restarts = args.cpu_restarts if device == "cpu" and args.cpu_restarts and len(devices) > 1 else args.restarts
            first = len(results)
            for r in restarts:
                batching = ("off",) if r == 1 else ("on",) if args.sequential_max and r > args.sequential_max else ("off", "on")
                modes = [(b, variant) for b in batching for variant in lbfgs]
                by_mode: dict[tuple[str, str], list[dict]] = {m: [] for m in modes}
                for _ in range(args.repeats):  # interleaved: every mode sees the same load
                    for mode in modes:
                        by_mode[mode] += run(case, device, r, mode[0], steps, 1, mode[1])
                    print(f"  {device} {case} R={r}: " + ", ".join(
                        f"{'/'.join(m)} {rows[-1]['rate']:.1f}/s (bound {rows[-1]['bound']:.1f}/s, {rows[-1]['psnr']:.2f} dB)"
                        for m, rows in by_mode.items()), flush=True)
                for (batched, variant), rows in by_mode.items():
                    reference = by_mode.get((batched, "torch-eager"))
                    if variant == "torch" and reference:
                        same = all(torch.equal(a["images"], b["images"]) for a, b in zip(rows, reference))
                        print(f"  {device} {case} R={r} {batched}: torch's L-BFGS compiled vs eager, the same "
                              f"reconstructions bit for bit: {'yes' if same else 'NO'}", flush=True)
                for mode, rows in by_mode.items():
                    med = {k: statistics.median(row[k] for row in rows) for k in ("rate", "psnr", "evaluations")}
                    med["flops"] = rows[0]["flops"]
                    results.append((device, case, r, mode, med, [row["psnr"] for row in rows],
                                    [row["bound"] for row in rows]))
            bounds = [b for *_, bs in results[first:] for b in bs]
            bound = statistics.median(bounds)
            print(f"  {device} {case}: bound {bound:.1f} evaluations/s (median of {len(bounds)}, "
                  f"{min(bounds):.0f}-{max(bounds):.0f}); {results[first][4]['flops'] / 1e9:.3f} GFLOP per evaluation")
            for row in results[first:]:
                row[4]["bound"] = bound
    print(f"load average after {os.getloadavg()[0]:.2f}; {time.perf_counter() - began:.0f} s in all")
    print("\n| device | case | R | restarts | evaluations / s per candidate | plain-evaluation bound / s | ratio | "
          "share of matmul rate | PSNR dB | evaluations |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for device, case, r, (mode, variant), med, psnrs, _ in results:
        how = ("one after the other" if mode == "off" else "batched") + {
            "compact": ", compact L-BFGS", "torch-eager": ", torch's L-BFGS eager"}.get(variant, "")
        spread = f" ({min(psnrs):.2f}-{max(psnrs):.2f})" if max(psnrs) - min(psnrs) > 0.005 else ""
        share = med["rate"] * med["flops"] / limits[device]
        print(f"| {device} | {case} | {r} | {how} | {med['rate']:.0f} | {med['bound']:.0f} | "
              f"{med['rate'] / med['bound']:.2f} | {share:.4f} | {med['psnr']:.2f}{spread} | {med['evaluations']:.0f} |")


if __name__ == "__main__":
    main()
