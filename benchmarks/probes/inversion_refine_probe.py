"""Descriptor-matching refinement settings scored on Table 1's own test crops.

Loads (or trains) ``invert-raw``'s network for examples/table1_inversion.yaml's dataset block
(bundled-images, size 128, test_grid 4, SIFT max_keypoints 2048), takes its estimate of the
64 test crops, then refines it with each ``--settings`` entry (``[steps, lr, prior_weight,
tv_weight]``) and prints SSIM (the ``ssim`` metric's per_image_quality) with the paired
difference to the network alone (± s.e. over the 64 half-overlapping crops: the effective n
is smaller, see docs/results.md). Also prints how well the differentiable SIFT proxy agrees
with the released descriptors on the truth. Pass the cache of a Table 1 run to reuse its net:

    .venv/bin/python benchmarks/probes/inversion_refine_probe.py --cache /tmp/s6/t1cold/cache \
        --settings '[[100, 0.01, 1, 0], [100, 0.01, 20, 0], [100, 0.01, 1, 0.3], [100, 0.01, 5, 1]]'
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from vispriv.harness import Cache, CellContext, Images
from vispriv.plugins.attacks.inversion import InvertRaw
from vispriv.plugins.descriptor_release.datasets import BundledImages
from vispriv.plugins.descriptor_release.inversion.refine import RefineConfig, refine_to_descriptors, sift_at_frames
from vispriv.plugins.descriptor_release.patches import lafs_from_geometry
from vispriv.plugins.descriptor_release.sift import extract_features
from vispriv.plugins.metrics.image_quality import per_image_quality


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=".vispriv-cache")
    ap.add_argument("--settings", default="[[100, 0.01, 5, 1]]", help="JSON list of [steps, lr, prior_weight, tv_weight]")
    ap.add_argument("--patch-size", type=int, default=16)
    a = ap.parse_args()
    ctx = CellContext(seed=0, cache=Cache(a.cache), quiet=True)
    scene = BundledImages(BundledImages.Config(size=128, test_grid=4, sift={"max_keypoints": 2048})).load(ctx)
    test, public = scene.private, scene.public
    feats = extract_features(test, public.sift, ctx.cache)

    grey = torch.from_numpy(test.images.mean(axis=-1))[:, None].float()
    lafs = torch.from_numpy(lafs_from_geometry(feats.keypoints, feats.scales, feats.orientations))
    with torch.no_grad():
        proxy = sift_at_frames(grey, lafs, torch.from_numpy(feats.image_index), a.patch_size).numpy()
    cos = (proxy * feats.descriptors).sum(1) / (np.linalg.norm(proxy, axis=1) * np.linalg.norm(feats.descriptors, axis=1) + 1e-12)
    print(f"proxy SIFT vs released on the truth: median cosine {np.median(cos):.3f} ({len(cos)} keypoints, "
          f"{len(cos) / len(test.ids):.0f} per crop)")

    network = InvertRaw(InvertRaw.Config(refine=RefineConfig(steps=0))).attack(feats, public, ctx)
    x0 = network.estimate["images"].images

    def ssim(images: np.ndarray) -> np.ndarray:
        rows = per_image_quality(test, Images(images, list(test.ids)), ("ssim",))
        return np.array([r["ssim"] for r in rows], float)

    base = ssim(x0)
    print(f"network alone: SSIM {base.mean():.3f} (trained now: {bool(network.metrics.get('trained'))})")
    for steps, lr, prior, tv in json.loads(a.settings):
        cfg = RefineConfig(steps=steps, lr=lr, prior_weight=prior, tv_weight=tv, patch_size=a.patch_size)
        start = time.perf_counter()
        refined, losses = refine_to_descriptors(x0, feats.keypoints, feats.scales, feats.orientations,
                                                feats.descriptors, feats.image_index, cfg)
        s = ssim(refined)
        diff = s - base
        print(f"steps {steps} lr {lr} prior {prior} tv {tv}: SSIM {s.mean():.3f}, paired {diff.mean():+.3f} "
              f"+- {diff.std(ddof=1) / np.sqrt(len(diff)):.3f}, descriptor term {losses['descriptor_loss_before']:.3f} -> "
              f"{losses['descriptor_loss_after']:.3f}, {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
