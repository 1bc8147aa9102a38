"""Calibrate the inversion's refinement on photos the attacker owns.

The refinement's settings (steps, weights, what a recovered release is matched against) were
first compared on Table 1's private test crops. An attacker can choose them without any
private image: split its own ``public`` photos in two, train the inversion network on one
half (``--train``), and on 128 px crops of the other half (``--held``; a 4 x 4
half-overlapping grid of each photo at 320 px, as Table 1) compare the settings for

* raw SIFT (``invert-raw`` against the released descriptors), and
* the clustering chain on a sub-hybrid lifting at m = 2 (W of ``--w-size`` rows, published
  as in Table 1; Z from the training half): matching the lifted subspace alone, the
  recovery's estimate or its nearest candidate besides it, a heavier subspace weight,
  more steps.

Prints SSIM per setting and the paired difference to the network alone (± s.e. over the
held-out crops, and the overlap-robust s.e. of ``vispriv report --paired``).

    .venv/bin/python benchmarks/probes/inversion_refine_calibration.py --cache-dir /tmp/s8/calib
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from vispriv.harness import Cache, CellContext, Images
from vispriv.harness.data.bundled import grid_crops, load_bundled
from vispriv.harness.report.paired import overlap_robust_se
from vispriv.plugins.attacks.clustering import ClusteringAttack
from vispriv.plugins.attacks.inversion import InvertRaw
from vispriv.plugins.defenses.affine_lifting import AffineLifting
from vispriv.plugins.descriptor_release.config import SiftConfig
from vispriv.plugins.descriptor_release.inversion import InversionConfig
from vispriv.plugins.descriptor_release.inversion.refine import RefineConfig
from vispriv.plugins.descriptor_release.payloads import DescriptorPublic
from vispriv.plugins.descriptor_release.sift import extract_features
from vispriv.plugins.descriptor_release.splits import load_split
from vispriv.plugins.metrics.image_quality import per_image_quality

SIDE, CROP, GRID = 320, 128, 4
#: (label, RefineConfig fields) compared on the clustering chain; the first is the default.
LIFTED = [
    ("subspace alone (default)", {}),
    ("estimate + subspace", {"points": "estimate"}),
    ("nearest candidate + subspace", {"points": "candidates"}),
    ("subspace, weight 3", {"subspace_weight": 3.0}),
    ("subspace, 200 steps", {"steps": 200}),
]
RAW = [("descriptors, 100 steps (default)", {}), ("descriptors, 200 steps", {"steps": 200})]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", default="flower,grass,clock,present", help="public photos the network trains on")
    ap.add_argument("--held", default="gravel,moon,immunohistochemistry,retina", help="public photos it is calibrated on")
    ap.add_argument("--steps", type=int, default=1200, help="training steps of the calibration network")
    ap.add_argument("--w-size", type=int, default=4096)
    ap.add_argument("--cache-dir", default=".vispriv-cache")
    a = ap.parse_args()
    ctx = CellContext(seed=0, cache=Cache(a.cache_dir), quiet=True)
    sift = SiftConfig(max_keypoints=2048)
    own = DescriptorPublic(lifting=load_split("lifting", SIDE), public=load_bundled(tuple(a.train.split(",")), SIDE), sift=sift)
    held = grid_crops(load_bundled(tuple(a.held.split(",")), SIDE), CROP, GRID)
    raw = extract_features(held, sift, ctx.cache)
    print(f"held-out crops: {len(held.ids)} ({raw.n_keypoints / len(held.ids):.0f} keypoints each); "
          f"network trained on {a.train} for {a.steps} steps", flush=True)

    def attack(**refine: object) -> InvertRaw:
        return InvertRaw(InvertRaw.Config(network=InversionConfig(steps=a.steps), refine=RefineConfig(**refine)))

    def ssim(images: np.ndarray) -> np.ndarray:
        rows = per_image_quality(held, Images(images, list(held.ids)), ("ssim",))
        return np.array([r["ssim"] for r in rows], float)

    def compare(what: str, release: object, settings: list[tuple[str, dict]]) -> None:
        x0 = attack(steps=0).attack(release, own, ctx).estimate["images"].images
        base = ssim(x0)
        print(f"\n{what}: network alone SSIM {base.mean():.3f}\n")
        print("| refinement | SSIM | paired vs network alone | gap / overlap-robust s.e. | seconds |")
        print("|---|---|---|---|---|")
        for label, fields in settings:
            start = time.perf_counter()
            out, _ = attack(**fields).refine(x0, release, ctx)
            d = ssim(out) - base
            se = d.std(ddof=1) / np.sqrt(len(d))
            robust = overlap_robust_se(list(held.ids), d) or se
            print(f"| {label} | {base.mean() + d.mean():.3f} | {d.mean():+.3f} ± {se:.3f} | {d.mean() / robust:.1f} "
                  f"| {time.perf_counter() - start:.0f} |", flush=True)

    compare("raw SIFT", raw, RAW)
    lifting = AffineLifting(AffineLifting.Config(mode="sub-hybrid", m=2, database_size=a.w_size, utility=False))
    release = lifting.protect(held, own, ctx).release
    recovered = ClusteringAttack(ClusteringAttack.Config()).attack(release, own, ctx).estimate["descriptors"]
    compare("clustering > invert-raw (sub-hybrid, m = 2)", recovered, LIFTED)


if __name__ == "__main__":
    main()
