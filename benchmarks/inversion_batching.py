"""Batched restarts against one restart after the other: evaluations per second against the bound.

Two cases, batch 1, one FedSGD gradient of a bundled 32x32 image at the untrained weights,
inverted by vispriv's ``invert`` with R = 1, 4, 8 restarts and a fixed budget per restart:

* ``dlg-lenet``: DLG on DLG's LeNet (Zhu et al., NeurIPS 2019), a bundled digit,
  ``--dlg-steps`` L-BFGS steps per restart;
* ``ig-convnet16``: Inverting Gradients on its ConvNet at width 16 (Geiping et al., NeurIPS
  2020), a bundled photo, TV 0.1, ``--ig-steps`` signed-Adam steps per restart.

Each R runs ``batched: off`` (the restarts one after the other) and ``batched: on`` (their
evaluations in one ``torch.func`` call, each restart with its own optimiser), alternating,
``--repeats`` times, one torch thread. The bound is measured in the same process between the
runs: the median time of one gradient-matching evaluation of one candidate written as plainly
as possible (the model's forward, the gradient in the weights with a graph, the method's
distance (+ TV), the backward to the image), i.e. the model's own forward + backward + double
backward; the load of a shared machine moves it by 2x between measurements, so a case's bound
is the median of all its measurements (one before every inversion). Printed per case, R and
mode: evaluations per second per candidate (all restarts' evaluations over the inversion's
wall time, optimiser included; median over the repeats), the bound, their ratio, and the PSNR
of the reconstruction.

    .venv/bin/python benchmarks/inversion_batching.py --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from skimage.metrics import peak_signal_noise_ratio

from vispriv.harness import torch_threads
from vispriv.plugins.federated.deep.inversion import (
    InversionSettings,
    cosine_distance,
    invert,
    l2_distance,
    total_variation,
)
from vispriv.plugins.federated.deep.local import LocalWork, client_update, cross_entropy, trainable
from vispriv.plugins.federated.deep.models import build_model
from vispriv.plugins.federated.deep.sources import load_bundled_digits, load_bundled_photos


def one_image(source: str, index: int = 0) -> tuple[torch.Tensor, torch.Tensor, int]:
    data = load_bundled_digits(32) if source == "digits" else load_bundled_photos(32)
    x = torch.as_tensor(data.images[index : index + 1]).permute(0, 3, 1, 2).contiguous()
    return x, torch.as_tensor(data.labels[index : index + 1]), len(data.class_names)


def bound_seconds(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, target: list[torch.Tensor],
                  ig: bool, reps: int = 30) -> float:
    """Median seconds of one plain gradient-matching evaluation of one candidate (one thread)."""
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
        torch.autograd.grad(loss, [dummy])

    times = []
    for i in range(reps + 5):
        start = time.perf_counter()
        once()
        if i >= 5:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def run(case: str, restarts: int, mode: str, steps: int, repeats: int) -> list[dict]:
    ig = case.startswith("ig")
    x, y, n_classes = one_image("photos" if ig else "digits")
    model = build_model("convnet" if ig else "lenet", n_classes, x.shape[1], 32, 16, 0)
    work = LocalWork()
    work.set_mode(model)
    target = client_update(model, x, y, work)
    settings = InversionSettings(method="inverting-gradients" if ig else "dlg", steps=steps * restarts,
                                 restarts=restarts, tv=0.1 if ig else 0.0, init="randn" if ig else "uniform",
                                 batched=mode)  # type: ignore[arg-type]
    rows = []
    for _ in range(repeats):
        with torch_threads(1):
            bound = bound_seconds(model, x, y, target, ig)
        start = time.perf_counter()
        rec = invert(model, target, 1, tuple(x.shape[1:]), n_classes, settings, seed=0, work=work)
        seconds = time.perf_counter() - start
        psnr = float(peak_signal_noise_ratio(x[0].permute(1, 2, 0).numpy(), rec.images[0].permute(1, 2, 0).numpy(),
                                             data_range=1.0))
        rows.append(dict(rate=rec.evaluations / seconds, bound=1.0 / bound, psnr=psnr, evaluations=rec.evaluations,
                         seconds=seconds, loss=rec.loss))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--restarts", type=int, nargs="*", default=[1, 4, 8])
    parser.add_argument("--dlg-steps", type=int, default=4, help="L-BFGS steps per restart")
    parser.add_argument("--ig-steps", type=int, default=40, help="signed-Adam steps per restart")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    cases: list[tuple[str, int]] = [("dlg-lenet", args.dlg_steps), ("ig-convnet16", args.ig_steps)]
    cases = [c for c in cases if args.only is None or c[0] in args.only]
    print(f"torch {torch.__version__}; load average before {os.getloadavg()[0]:.2f}", flush=True)
    began = time.perf_counter()
    results = []
    for case, steps in cases:
        run(case, 2, "on", 1, 1)  # imports and first-call costs of both paths
        run(case, 1, "off", 1, 1)
        for r in args.restarts:
            by_mode: dict[str, list[dict]] = {"off": [], "on": []}
            for _ in range(args.repeats):  # interleaved: both modes see the same load
                for mode in ("off", "on"):
                    by_mode[mode] += run(case, r, mode, steps, 1)
                print(f"  {case} R={r}: " + ", ".join(f"{m} {rows[-1]['rate']:.1f}/s (bound {rows[-1]['bound']:.1f}/s)"
                                                       for m, rows in by_mode.items()), flush=True)
            for mode, rows in by_mode.items():
                med = {k: statistics.median(row[k] for row in rows) for k in ("rate", "psnr", "evaluations")}
                results.append((case, r, mode, med, [row["psnr"] for row in rows], [row["bound"] for row in rows]))
        bounds = [b for c, *_, bs in results if c == case for b in bs]
        bound = statistics.median(bounds)
        print(f"  {case}: bound {bound:.1f} evaluations/s (median of {len(bounds)}, {min(bounds):.0f}-{max(bounds):.0f})")
        for row in results:
            if row[0] == case:
                row[3]["bound"] = bound
    print(f"load average after {os.getloadavg()[0]:.2f}; {time.perf_counter() - began:.0f} s in all")
    print("\n| case | R | restarts | evaluations / s per candidate | bound / s | ratio | PSNR dB | evaluations |")
    print("|---|---|---|---|---|---|---|---|")
    for case, r, mode, med, psnrs, _ in results:
        how = "one after the other" if mode == "off" else "batched"
        spread = f" ({min(psnrs):.2f}-{max(psnrs):.2f})" if max(psnrs) - min(psnrs) > 0.005 else ""
        print(f"| {case} | {r} | {how} | {med['rate']:.0f} | {med['bound']:.0f} | {med['rate'] / med['bound']:.2f} | "
              f"{med['psnr']:.2f}{spread} | {med['evaluations']:.0f} |")


if __name__ == "__main__":
    main()
