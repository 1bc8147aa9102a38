"""The breaching half of ``benchmarks/peer_breaching.py``: run breaching 0.1.2's attack on cases
written by the benchmark. NOT part of vispriv and never imported by it.

It runs only under the side environment's Python (a separate venv with breaching 0.1.2, its own
torch and torchvision; ``peer_breaching.py --setup-side-env DIR`` makes it) as a subprocess::

    DIR/bin/python benchmarks/breaching_side.py CASES.npz OUT.npz

``CASES.npz`` holds, for every case ``k``: ``k/state/NAME`` (the state dict of the model *inside*
vispriv's input normalisation, i.e. the network that sees (x - mean) / std), ``k/image``
(1 or B images (B, C, H, W) in [0, 1]), ``k/label`` (B,), ``k/grad/J`` (the FedSGD update the
user sent: the gradient of the mean cross-entropy, one array per parameter in
``named_parameters`` order) and ``k/seed``; and ``settings`` (a JSON string: ``arch``,
``n_classes``, ``mean``, ``std``, ``attack`` = ``deepleakage`` | ``invertinggradients``,
``max_iterations`` (per restart), ``restarts``, ``threads``, ``give_labels``).

The network is vispriv's own definition, loaded from ``plugins/federated/deep/models.py`` by
file path (it needs torch alone; its state dict loads with ``strict=True``), the gradient is recomputed from it and compared to the one sent, and breaching's
attacker is built from breaching's own bundled preset (``breaching.get_attack_config``) with only
``optim.max_iterations`` and ``restarts.num_trials`` overridden. The server payload and the user's
shared data are built by hand, so none of breaching's datasets is constructed (nothing is
downloaded); breaching reconstructs in normalised space and the result is mapped back to pixels
(x = z * std + mean, clipped to [0, 1]). ``OUT.npz`` gets ``k/rec`` (B, C, H, W), ``k/labels``,
``k/seconds`` (wall time of ``attacker.reconstruct`` alone), ``k/evaluations`` (forward passes
of the attacked model during the reconstruction: one per objective evaluation, plus one per
restart for breaching's scoring), ``k/grad_error``, ``limit_seconds`` (median time of one
gradient-matching evaluation in this environment) and ``meta`` (JSON: versions, the attack's
resolved optimiser settings).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn


def _vispriv_models() -> Any:
    """vispriv's network definitions, loaded from their source file (it imports torch alone), so the
    side environment runs the very same architecture without installing vispriv."""
    path = Path(__file__).resolve().parents[1] / "plugins" / "federated" / "deep" / "models.py"
    spec = importlib.util.spec_from_file_location("vispriv_deep_models", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"breaching_side.py: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(arch: str, channels: int, n_classes: int, size: int, state: dict[str, torch.Tensor]) -> nn.Module:
    models = _vispriv_models()
    if arch == "lenet":
        model: nn.Module = models.LeNetDLG(channels, n_classes, size)
    elif arch == "convnet":
        width = int(state["features.conv0.weight"].shape[0])
        model = models.ConvNetIG(channels, n_classes, size, width)
    else:
        raise SystemExit(f"breaching_side.py: unknown architecture {arch!r} (lenet, convnet)")
    model.load_state_dict(state, strict=True)
    return model


class Counter:
    """A forward pre-hook counting the model's forward passes."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, _module: nn.Module, _args: tuple) -> None:
        self.n += 1

    def __deepcopy__(self, _memo: dict) -> Counter:
        return self  # breaching deep-copies the model: its copies must count here too


class Metadata(dict):
    """breaching reads the payload metadata both as ``m["task"]`` and as ``m.shape``."""

    __getattr__ = dict.__getitem__


def main(cases_path: str, out_path: str) -> None:
    import breaching  # the side environment's breaching 0.1.2

    data = np.load(cases_path)
    settings = json.loads(str(data["settings"]))
    torch.set_num_threads(int(settings.get("threads", 1)))
    keys = sorted({k.split("/")[0] for k in data.files if "/" in k}, key=int)
    overrides = [f"optim.max_iterations={int(settings['max_iterations'])}",
                 f"restarts.num_trials={int(settings['restarts'])}"]
    # breaching prints a line on loading a preset: keep stdout for the benchmark's own use.
    with contextlib.redirect_stdout(sys.stderr):
        cfg = breaching.get_attack_config(settings["attack"], overrides=overrides)
    mean = torch.tensor(settings["mean"], dtype=torch.float32)[None, :, None, None]
    std = torch.tensor(settings["std"], dtype=torch.float32)[None, :, None, None]
    out: dict[str, np.ndarray] = {}
    limit = None
    for k in keys:
        images = torch.from_numpy(data[f"{k}/image"]).float()
        labels = torch.from_numpy(data[f"{k}/label"]).long()
        b, c, h, _w = images.shape
        state = {n[len(f"{k}/state/"):]: torch.from_numpy(data[n]) for n in data.files if n.startswith(f"{k}/state/")}
        model = build(settings["arch"], c, int(settings["n_classes"]), h, state)
        model.train()
        sent = [torch.from_numpy(data[f"{k}/grad/{j}"]) for j in range(len(list(model.parameters())))]
        loss_fn = nn.CrossEntropyLoss()
        own = torch.autograd.grad(loss_fn(model((images - mean) / std), labels), list(model.parameters()))
        if limit is None:
            limit = evaluation_seconds(model, (images - mean) / std, labels, sent)
        grad_error = max(float((a - s).abs().max() / s.abs().max().clamp_min(1e-30)) for a, s in zip(own, sent))

        calls = Counter()
        # The hook travels with breaching's deep copies of the model.
        handle = model.register_forward_pre_hook(calls)
        attacker = breaching.attacks.prepare_attack(model, loss_fn, cfg, dict(dtype=torch.float, device=torch.device("cpu")))
        handle.remove()
        metadata = Metadata(shape=(c, h, h), mean=list(settings["mean"]), std=list(settings["std"]),
                            classes=int(settings["n_classes"]), modality="vision", task="classification")
        server_payload = [dict(parameters=[p.detach().clone() for p in model.parameters()], buffers=None, metadata=metadata)]
        give = bool(settings.get("give_labels", False)) and cfg.attack_type != "joint-optimization"
        shared_data = [dict(gradients=[s.clone() for s in sent], buffers=None,
                            metadata=dict(num_data_points=b, labels=labels.clone() if give else None, local_hyperparams=None))]
        torch.manual_seed(int(data[f"{k}/seed"]))
        with contextlib.redirect_stdout(sys.stderr):
            start = time.perf_counter()
            rec, _stats = attacker.reconstruct(server_payload, shared_data, {}, dryrun=False)
            seconds = time.perf_counter() - start
        pixels = (rec["data"].detach().float() * std + mean).clamp(0, 1)
        out[f"{k}/rec"] = pixels.numpy()
        rec_labels = rec.get("labels")
        out[f"{k}/labels"] = (np.asarray(rec_labels.detach().cpu().numpy(), dtype=np.int64).reshape(-1)
                              if rec_labels is not None else np.full(b, -1, np.int64))
        out[f"{k}/seconds"] = np.float64(seconds)
        out[f"{k}/evaluations"] = np.int64(calls.n)
        out[f"{k}/grad_error"] = np.float64(grad_error)
        print(f"breaching {settings['attack']} case {k}: {seconds:.2f} s, {calls.n} evaluations", file=sys.stderr, flush=True)
    import torchvision

    meta = dict(breaching=getattr(breaching, "__version__", None) or _dist_version("breaching"),
                torch=torch.__version__, torchvision=torchvision.__version__,
                attack=settings["attack"], attack_type=str(cfg.attack_type),
                optim={k: (v if isinstance(v, (int, float, str, bool)) or v is None else str(v)) for k, v in cfg.optim.items()},
                objective=str(cfg.objective.type), restarts=int(cfg.restarts.num_trials),
                regularization=str(dict(cfg.regularization or {})), init=str(cfg.init))
    out["meta"] = np.array(json.dumps(meta))
    out["limit_seconds"] = np.float64(limit if limit is not None else np.nan)
    np.savez(out_path, **out)


def evaluation_seconds(model: nn.Module, x: torch.Tensor, labels: torch.Tensor, target: list[torch.Tensor],
                       reps: int = 200) -> float:
    """Median seconds of one gradient-matching evaluation (forward, gradient with graph, squared
    distance, backward to the image) in this environment's torch: the benchmark's physical limit."""
    params = list(model.parameters())
    x = x.clone().requires_grad_(True)
    times = []
    for i in range(reps + 10):
        t = time.perf_counter()
        loss = nn.functional.cross_entropy(model(x), labels)
        grads = torch.autograd.grad(loss, params, create_graph=True)
        dist = sum(((g - s) ** 2).sum() for g, s in zip(grads, target))
        torch.autograd.grad(dist, [x])
        if i >= 10:
            times.append(time.perf_counter() - t)
    return float(np.median(times))


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: SIDE_ENV/bin/python benchmarks/breaching_side.py CASES.npz OUT.npz")
    main(sys.argv[1], sys.argv[2])
