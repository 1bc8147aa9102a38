"""Training throughput of inversion-network variants, as ratios to the [30]-like baseline.

All variants run in this one process on the same synthetic batches (8 crops, ~200
keypoints each), interleaved over several rounds, and each variant's best round counts,
so the ratios hold roughly whatever else loads the machine; absolute images/s do not. Run::

    .venv/bin/python benchmarks/probes/inversion_speed.py
"""

from __future__ import annotations

import time

import torch

from vispriv.plugins.descriptor_release.inversion.module import InversionModule

VARIANTS = {
    "base: crop 64, depth 4, width 32, head 2, proj 32": dict(crop=64, depth=4, width=32, head_layers=2, projection=32),
    "head 0": dict(crop=64, depth=4, width=32, head_layers=0, projection=32),
    "width 16": dict(crop=64, depth=4, width=16, head_layers=2, projection=32),
    "width 16, head 0": dict(crop=64, depth=4, width=16, head_layers=0, projection=32),
    "no projection (129-ch map)": dict(crop=64, depth=4, width=32, head_layers=2, projection=0),
    "crop 128, depth 5, width 32": dict(crop=128, depth=5, width=32, head_layers=2, projection=32),
    "crop 128, depth 5, width 16, head 0": dict(crop=128, depth=5, width=16, head_layers=0, projection=32),
}


def images_per_second(crop: int, depth: int, width: int, head_layers: int, projection: int, batch: int = 8, reps: int = 3) -> tuple[float, int]:
    torch.manual_seed(0)
    net = dict(depth=depth, width=width, max_width=256, projection=projection, feature_scale=8.0, head_layers=head_layers)
    m = InversionModule(128, 1, net, 1e-3, 10, 1.0, 1.0, 7)
    opt = torch.optim.AdamW(m.parameters())
    k = 200 * batch
    data = {"target": torch.rand(batch, 1, crop, crop), "features": torch.rand(k, 128),
            "index": torch.randint(0, batch * crop * crop, (k,))}
    for i in range(reps + 1):
        if i == 1:
            start = time.perf_counter()
        loss = m.loss(m(data), data["target"])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return batch * reps / (time.perf_counter() - start), sum(p.numel() for p in m.parameters())


def main(rounds: int = 3) -> None:
    best: dict[str, float] = {}
    params: dict[str, int] = {}
    for _ in range(rounds):
        for name, v in VARIANTS.items():
            ips, params[name] = images_per_second(**v)
            best[name] = max(best.get(name, 0.0), ips)
    base = best[next(iter(VARIANTS))]
    print("| variant | parameters | images/s (best of rounds) | ratio to base |")
    print("|---|---|---|---|")
    for name in VARIANTS:
        print(f"| {name} | {params[name] / 1e6:.2f}M | {best[name]:.1f} | {best[name] / base:.2f} |", flush=True)


if __name__ == "__main__":
    main()
