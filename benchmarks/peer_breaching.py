"""Deep gradient inversion, vispriv versus the peer tool breaching 0.1.2, on one shared case.

The case: DLG's LeNet (``build_model("lenet", 10, 3, 32)``: sigmoid activations, every weight
uniform in ±0.5, untrained, fixed seed), bundled photos (``vispriv.harness.data.bundled``)
resized to 32x32 RGB, batch size 1, one FedSGD update per photo (the gradient of the mean
cross-entropy, labels ``i % 10``). Both tools get the same update of the same network and the
same step budget per photo: ``--steps`` optimiser iterations over all ``--restarts`` (an L-BFGS
iteration is one ``LBFGS.step`` with torch's default 20 inner iterations, in both tools).

* ``dlg``: vispriv's ``dlg`` against breaching's ``deepleakage`` preset (joint image and label
  optimisation, L-BFGS, squared L2 gradient distance);
* ``inverting-gradients``: vispriv's ``inverting-gradients`` (TV weight ``--ig-tv``, 0.2 by
  default, breaching's preset value) against breaching's ``invertinggradients`` preset
  (cosine distance, signed Adam, TV 0.2, box constraint).

Each breaching preset is used as bundled, with only ``optim.max_iterations`` (= steps /
restarts) and ``restarts.num_trials`` overridden; breaching recovers the labels itself, as
vispriv does. Printed, in one run: per method and tool, the median / min / max PSNR over the
photos, labels recovered, median wall seconds per photo (the attack call alone, one torch thread
each), its ratio to vispriv's, the gradient evaluations per photo and per second, and the
physical limit measured in the same run: the time of one forward+backward of the model and of
one gradient-matching evaluation (forward, gradient with graph, distance, backward), which
bounds any tool's evaluations per second, in this process and in the side environment.

breaching is NOT a dependency of vispriv and none of its code is in vispriv: it lives in a
side virtual environment (its own torch 2.14.1 and torchvision 0.29.1: PyPI's torchvision
does not import beside the project's CPU-only torch) and runs in a subprocess,
``benchmarks/breaching_side.py``, which exchanges .npz files with this script. Make (or
reuse) that environment with ``--setup-side-env DIR``; it runs, printing each command::

    python -m venv DIR                     # with this interpreter's base Python 3.11
    DIR/bin/python -m pip install torch==2.14.1 torchvision==0.29.1      # ~5.5 GB (CUDA build, runs on CPU)
    DIR/bin/python -m pip install --no-deps breaching==0.1.2 hydra-core==1.3.8 omegaconf==2.4.0 \\
        antlr4-python3-runtime==4.9.3 scipy==1.17.1 pyyaml==6.0.4 packaging==26.4

(``--no-deps`` keeps pip off the pinned torch pair and leaves out ``lpips``, which breaching
declares but only its LPIPS metric imports; the list is what ``import breaching`` needs:
hydra-core with omegaconf, antlr4 and packaging, scipy, pyyaml.) About 5.6 GB and 3-4 minutes
where the wheels are on the local disk. Nothing is downloaded at run time: no breaching dataset is
constructed and LPIPS (whose AlexNet comes from the internet) is not used; PSNR is computed
here. The two tools run photo by photo in turn (breaching in one short subprocess per photo and
method, whose start-up is not timed), so both see the same load on a shared machine. Run::

    .venv/bin/python benchmarks/peer_breaching.py --setup-side-env /tmp/breaching-venv   # once
    .venv/bin/python benchmarks/peer_breaching.py --side-env /tmp/breaching-venv [--images 8 --steps 300]

Results go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from vispriv.harness.data.bundled import load_bundled
from vispriv.plugins.federated.deep.models import Normalised, build_model

#: Colour photos first (grey ones are replicated to three channels).
PHOTOS = ("astronaut", "chelsea", "coffee", "rocket", "china", "flower", "grace_hopper", "present",
          "motorcycle_left", "immunohistochemistry", "retina", "camera", "brick", "coins", "clock", "grass")
#: vispriv method -> breaching's bundled attack preset.
PRESETS = {"dlg": "deepleakage", "inverting-gradients": "invertinggradients"}
SIDE_TORCH = ("torch==2.14.1", "torchvision==0.29.1")
SIDE_PACKAGES = ("breaching==0.1.2", "hydra-core==1.3.8", "omegaconf==2.4.0", "antlr4-python3-runtime==4.9.3",
                 "scipy==1.17.1", "pyyaml==6.0.4", "packaging==26.4")
SIDE_SCRIPT = Path(__file__).with_name("breaching_side.py")
_WARM: set[str] = set()
N_CLASSES, SIZE, CHANNELS = 10, 32, 3


def _run(cmd: list[str]) -> None:
    print("+", shlex.join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def _side_ready(python: Path) -> bool:
    if not python.exists():
        return False
    probe = "import breaching, torch, torchvision; print(torch.__version__, torchvision.__version__)"
    done = subprocess.run([str(python), "-c", probe], check=False, capture_output=True, text=True)
    return done.returncode == 0


def setup_side_env(env: Path) -> Path:
    """Make (or reuse) the side venv with breaching 0.1.2; return its python."""
    python = env / "bin" / "python"
    if _side_ready(python):
        print(f"side environment {env}: breaching imports, reused", flush=True)
        return python
    start = time.perf_counter()
    if not python.exists():
        _run([sys.executable, "-m", "venv", str(env)])
    _run([str(python), "-m", "pip", "install", *SIDE_TORCH])
    _run([str(python), "-m", "pip", "install", "--no-deps", *SIDE_PACKAGES])
    if not _side_ready(python):
        raise SystemExit(f"side environment {env}: `import breaching` still fails; see the pip output above")
    print(f"side environment {env}: ready in {time.perf_counter() - start:.0f} s", flush=True)
    return python


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    """PSNR in dB of images in [0, 1] (peak 1)."""
    mse = float(np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2))
    return math.inf if mse == 0 else 10.0 * math.log10(1.0 / mse)


def fedsgd_gradient(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor) -> list[torch.Tensor]:
    """The user's FedSGD update: the gradient of the mean cross-entropy at the model's weights."""
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    loss = torch.nn.functional.cross_entropy(model(images), labels)
    return [g.detach() for g in torch.autograd.grad(loss, params)]


def physical_limit(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor, reps: int = 200) -> tuple[float, float]:
    """Median seconds of one forward+backward, and of one gradient-matching evaluation (the unit
    every optimisation-based inversion pays per objective evaluation), one thread."""
    params = [p for p in model.parameters() if p.requires_grad]
    target = fedsgd_gradient(model, images, labels)
    x = images.clone().requires_grad_(True)

    def plain() -> None:
        loss = torch.nn.functional.cross_entropy(model(x), labels)
        torch.autograd.grad(loss, params)

    def matching() -> None:
        loss = torch.nn.functional.cross_entropy(model(x), labels)
        grads = torch.autograd.grad(loss, params, create_graph=True)
        dist = torch.stack([((g - t) ** 2).sum() for g, t in zip(grads, target)]).sum()
        torch.autograd.grad(dist, [x])

    out = []
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for fn in (plain, matching):
            for _ in range(10):
                fn()
            times = []
            for _ in range(reps):
                t = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t)
            out.append(statistics.median(times))
    finally:
        torch.set_num_threads(before)
    return out[0], out[1]


def build_case(n_images: int, model_seed: int) -> tuple[Normalised, list[str], torch.Tensor, torch.Tensor]:
    names = list(PHOTOS[:n_images])
    if len(names) < n_images:
        raise SystemExit(f"only {len(PHOTOS)} bundled photos are listed; asked for {n_images}")
    photos = load_bundled(names, SIZE)
    images = torch.from_numpy(np.ascontiguousarray(photos.images.transpose(0, 3, 1, 2))).float()
    labels = torch.arange(n_images) % N_CLASSES
    model = build_model("lenet", N_CLASSES, CHANNELS, SIZE, seed=model_seed)
    return model, names, images, labels


def run_vispriv(method: str, model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor,
                args: argparse.Namespace, index: list[int]) -> list[dict] | str:
    try:
        from vispriv.plugins.federated.deep.inversion import InversionSettings, invert
    except ImportError as err:  # the lead's module may not be there yet
        return f"vispriv's inversion is not importable ({err})"
    if method not in _WARM:
        # One untimed step first: torch's functional_call imports modules on first use, as
        # breaching's side pays its imports before its timed call.
        invert(model, fedsgd_gradient(model, images[:1], labels[:1]), n_images=1, image_shape=(CHANNELS, SIZE, SIZE),
               n_classes=N_CLASSES, settings=InversionSettings(method=method, steps=1), seed=0)  # type: ignore[arg-type]
        _WARM.add(method)
    rows = []
    for i in index:
        x, y = images[i : i + 1], labels[i : i + 1]
        target = fedsgd_gradient(model, x, y)
        wanted = dict(method=method, steps=args.steps, restarts=args.restarts,
                      tv=args.ig_tv if method == "inverting-gradients" else 0.0, threads=args.threads)
        known = {f.name for f in dataclasses.fields(InversionSettings)}
        settings = InversionSettings(**{k: v for k, v in wanted.items() if k in known})  # type: ignore[arg-type]
        start = time.perf_counter()
        rec = invert(model, target, n_images=1, image_shape=(CHANNELS, SIZE, SIZE), n_classes=N_CLASSES,
                     settings=settings, seed=args.seed + i)
        seconds = time.perf_counter() - start
        rows.append(dict(psnr=psnr(rec.images.detach().numpy(), x.numpy()), seconds=seconds,
                         evaluations=int(getattr(rec, "evaluations", 0)), steps=int(rec.steps),
                         label_ok=bool(np.asarray(rec.labels).reshape(-1)[0] == int(y[0])),
                         stopped=str(getattr(rec, "stopped", ""))))
    return rows


def run_breaching(side_python: Path, method: str, model: Normalised, images: torch.Tensor, labels: torch.Tensor,
                  args: argparse.Namespace, workdir: Path, index: list[int]) -> tuple[list[dict], dict] | str:
    """breaching's attack on the photos ``index``, in one side-environment subprocess (its start-up
    is not timed: the seconds are those of ``attacker.reconstruct`` alone)."""
    net = model.net  # breaching's model sees the normalised image: the network inside the normalisation
    mean = [float(v) for v in torch.as_tensor(model.mean).flatten()]
    std = [float(v) for v in torch.as_tensor(model.std).flatten()]
    arrays: dict[str, np.ndarray] = {}
    for i in index:
        x, y = images[i : i + 1], labels[i : i + 1]
        for name, value in net.state_dict().items():
            arrays[f"{i}/state/{name}"] = value.detach().numpy()
        for j, g in enumerate(fedsgd_gradient(model, x, y)):
            arrays[f"{i}/grad/{j}"] = g.numpy()
        arrays[f"{i}/image"] = x.numpy()
        arrays[f"{i}/label"] = y.numpy()
        arrays[f"{i}/seed"] = np.int64(args.seed + i)
    restarts = max(1, min(args.restarts, args.steps))
    settings = dict(arch="lenet", n_classes=N_CLASSES, mean=mean, std=std, attack=PRESETS[method],
                    max_iterations=args.steps // restarts, restarts=restarts, threads=args.threads)
    arrays["settings"] = np.array(json.dumps(settings))
    cases, out, log = workdir / f"{method}-cases.npz", workdir / f"{method}-out.npz", workdir / f"{method}.log"
    np.savez(cases, **arrays)  # type: ignore[arg-type]
    with open(log, "w") as fh:
        done = subprocess.run([str(side_python), str(SIDE_SCRIPT), str(cases), str(out)],
                              check=False, stdout=fh, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-15:])
        return f"breaching side run failed (exit {done.returncode}):\n{tail}"
    res = np.load(out)
    rows = []
    for i in index:
        rows.append(dict(psnr=psnr(res[f"{i}/rec"], images[i : i + 1].numpy()), seconds=float(res[f"{i}/seconds"]),
                         evaluations=int(res[f"{i}/evaluations"]), steps=args.steps,
                         label_ok=bool(res[f"{i}/labels"].reshape(-1)[0] == int(labels[i])),
                         grad_error=float(res[f"{i}/grad_error"])))
    meta = json.loads(str(res["meta"]))
    meta["limit_seconds"] = float(res["limit_seconds"]) if "limit_seconds" in res.files else None
    return rows, meta


def fmt_row(method: str, tool: str, rows: list[dict], base_seconds: float | None) -> str:
    p = [r["psnr"] for r in rows]
    s = statistics.median(r["seconds"] for r in rows)
    ev = statistics.median(r["evaluations"] for r in rows)
    ratio = f"{s / base_seconds:.2f}" if base_seconds else "-"
    per_s = sum(r["evaluations"] for r in rows) / max(sum(r["seconds"] for r in rows), 1e-12)
    star = "*" if tool.endswith("deepleakage") else ""
    return (f"| {method} | {tool} | {statistics.median(p):.1f} | {min(p):.1f} / {max(p):.1f} | "
            f"{sum(r['label_ok'] for r in rows)}/{len(rows)}{star} | {s:.2f} | {ratio} | {ev:.0f} | {per_s:.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--side-env", type=Path, default=Path("/tmp/breaching-venv"), help="breaching's side venv")
    ap.add_argument("--setup-side-env", type=Path, default=None, metavar="DIR",
                    help="make (or reuse) the side venv in DIR, then run with it")
    ap.add_argument("--images", type=int, default=8)
    ap.add_argument("--steps", type=int, default=300, help="optimiser iterations per photo, restarts included")
    ap.add_argument("--restarts", type=int, default=1)
    ap.add_argument("--methods", default="dlg,inverting-gradients")
    ap.add_argument("--ig-tv", type=float, default=0.2, help="vispriv's TV weight for inverting-gradients")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for each tool")
    ap.add_argument("--seed", type=int, default=0, help="attack seed of photo i is seed + i")
    ap.add_argument("--model-seed", type=int, default=0)
    ap.add_argument("--per-image", action="store_true", help="also print every photo's PSNR and seconds")
    args = ap.parse_args()
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in PRESETS]
    if unknown:
        raise SystemExit(f"unknown methods {unknown}; choose from {', '.join(PRESETS)}")

    side_env = args.setup_side_env or args.side_env
    side_python: Path | None = side_env / "bin" / "python"
    if args.setup_side_env is not None:
        side_python = setup_side_env(args.setup_side_env)
    elif not _side_ready(side_env / "bin" / "python"):
        print(f"no usable breaching side environment at {side_env}: make it with --setup-side-env {side_env}; "
              "only vispriv's side runs", flush=True)
        side_python = None

    model, names, images, labels = build_case(args.images, args.model_seed)
    limits = [physical_limit(model, images[:1], labels[:1])]
    print(f"case: DLG LeNet ({sum(p.numel() for p in model.parameters())} parameters, seed {args.model_seed}), "
          f"{len(names)} bundled photos {SIZE}x{SIZE} ({', '.join(names)}), batch 1, FedSGD, "
          f"{args.steps} steps over {args.restarts} restart(s), {args.threads} thread(s); torch {torch.__version__}", flush=True)

    results: dict[tuple[str, str], list[dict]] = {}
    notes: list[str] = []
    side_limits: list[float] = []
    with tempfile.TemporaryDirectory(prefix="peer-breaching-") as tmp:
        for method in methods:
            vispriv_key, peer_key = (method, "vispriv"), (method, f"breaching {PRESETS[method]}")
            meta: dict = {}
            # Photo by photo, the two tools in turn, so both see the same load on a shared machine.
            for i in range(len(names)):
                got = run_vispriv(method, model, images, labels, args, [i])
                if isinstance(got, str):
                    if got not in notes:
                        notes.append(got)
                else:
                    results.setdefault(vispriv_key, []).extend(got)
                if side_python is not None:
                    side = run_breaching(side_python, method, model, images, labels, args, Path(tmp), [i])
                    if isinstance(side, str):
                        notes.append(side)
                        side_python = None
                    else:
                        results.setdefault(peer_key, []).extend(side[0])
                        meta = side[1]
                        if meta.get("limit_seconds"):
                            side_limits.append(meta["limit_seconds"])
                done = [(k[1], results[k][-1]) for k in (vispriv_key, peer_key) if len(results.get(k, [])) == i + 1]
                print(f"{method} {names[i]}: " + "; ".join(f"{tool} {r['psnr']:.1f} dB {r['seconds']:.1f} s" for tool, r in done),
                      flush=True)
            if meta:
                worst = max(r["grad_error"] for r in results[peer_key])
                notes.append(f"breaching {meta.get('breaching')} {PRESETS[method]} (torch {meta.get('torch')}): "
                             f"{meta.get('attack_type')}, objective {meta.get('objective')}, init {meta.get('init')}, "
                             f"optim {meta.get('optim')}, regularisation {meta.get('regularization')}; "
                             f"its recomputed gradient differs from the one sent by at most {worst:.1e} (relative)")
    limits.append(physical_limit(model, images[:1], labels[:1]))
    t_fb, t_eval = min(t[0] for t in limits), min(t[1] for t in limits)
    side_limit = min(side_limits) if side_limits else None

    print()
    print("| method | tool | median PSNR dB | min / max PSNR | labels right | median s / photo | ratio to vispriv "
          "| evaluations / photo | evaluations / s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for method in methods:
        base = results.get((method, "vispriv"))
        base_s = statistics.median(r["seconds"] for r in base) if base else None
        for (m, tool), rows in results.items():
            if m == method:
                print(fmt_row(method, tool, rows, base_s), flush=True)
    print()
    line = (f"physical limit (best of start and end; this process, torch {torch.__version__}, 1 thread): "
            f"one forward+backward {t_fb * 1e3:.2f} ms; "
            f"one gradient-matching evaluation {t_eval * 1e3:.2f} ms = at most {1 / t_eval:.0f} evaluations / s")
    if side_limit:
        line += f"; in the side environment (best of its runs) one evaluation {side_limit * 1e3:.2f} ms = at most {1 / side_limit:.0f} / s"
    print(line)
    if args.per_image:
        print()
        for (m, tool), rows in results.items():
            cells = ", ".join(f"{n} {r['psnr']:.1f} dB {r['seconds']:.1f} s" + (f" ({r['stopped']})" if r.get("stopped") else "")
                              for n, r in zip(names, rows))
            print(f"{m} / {tool}: {cells}")
    if any(tool.endswith("deepleakage") for _m, tool in results):
        notes.append("* breaching 0.1.2's joint (deepleakage) attacker returns the argmax of its initial, random label "
                     "template, not of the labels it optimised (OptimizationJointAttacker.reconstruct), so its "
                     "labels are right by chance only; its images are what it optimised")
    for note in notes:
        print(f"note: {note}")


if __name__ == "__main__":
    main()
