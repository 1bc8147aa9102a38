"""One inversion setting scored on Table 1's own test crops (a lever probe).

Trains the sparse-SIFT U-Net of ``invert-raw`` on the bundled ``public`` photos (the
attacker's set; ``--sets public,lifting`` for the stronger opt-in attacker) at side
``--public-size``, then scores SSIM (scikit-image, data_range=1, grey = channel mean, as the
``ssim`` metric) on the ``--grid`` x ``--grid`` half-overlapping crops of side ``--size`` of
the held-out test photos, i.e. the private images of examples/table1_inversion.yaml.
Prints the mean SSIM with its standard error over crops (crops overlap: the effective n is
smaller) and writes a truth / reconstruction grid with ``--png``. Trained nets are cached.

    nice -n 10 .venv/bin/python benchmarks/probes/inversion_table1_probe.py --public-size 320 \
        --geometry 1 --net '{"steps": 600, "gradient_weight": 1.0}' --png /tmp/probe.png
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from vispriv.harness import Cache, CellContext, Images
from vispriv.harness.data.bundled import crop_source_size, grid_crops
from vispriv.plugins.attacks.inversion import InvertRaw
from vispriv.plugins.descriptor_release.config import SiftConfig
from vispriv.plugins.descriptor_release.inversion import InversionConfig
from vispriv.plugins.descriptor_release.inversion.data import variant_sets
from vispriv.plugins.descriptor_release.inversion.train import reconstruct, train_or_load
from vispriv.plugins.descriptor_release.sift import extract_features
from vispriv.plugins.descriptor_release.splits import load_split
from vispriv.plugins.metrics.image_quality import per_image_quality


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--public-size", type=int, default=320)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--grid", type=int, default=4)
    ap.add_argument("--sets", default="public")
    ap.add_argument("--geometry", type=int, default=1, help="1: keypoint scale/orientation channels")
    ap.add_argument("--net", default="{}", help="InversionConfig fields as JSON")
    ap.add_argument("--cache", default=".vispriv-cache")
    ap.add_argument("--png", default="")
    a = ap.parse_args()
    cache = Cache(a.cache)
    ctx = CellContext(seed=0, cache=cache)
    sift = SiftConfig()
    parts = [load_split(s, a.public_size) for s in a.sets.split(",")]
    images = Images(np.concatenate([p.images for p in parts]), [i for p in parts for i in p.ids])
    cfg = InversionConfig(**json.loads(a.net))
    attack = InvertRaw(InvertRaw.Config(geometry=bool(a.geometry), network=cfg))
    sets = [(v, attack.release_features(extract_features(v, sift, cache))) for v in variant_sets(images, cfg.scales, cfg.flip)]
    start = time.perf_counter()
    trained = train_or_load(sets, cfg, ctx, "table1-probe")
    print(f"training: {time.perf_counter() - start:.0f} s, {trained.info.get('train_images_per_second', 0):.1f} images/s")
    test = grid_crops(load_split("test", crop_source_size(a.size, a.grid)), a.size, a.grid)
    feats = extract_features(test, sift, cache)
    recon = Images(reconstruct(trained.net, attack.release_features(feats)), list(test.ids))
    ssim = np.array([row["ssim"] for row in per_image_quality(test, recon, ("ssim",))], dtype=float)
    print(f"SSIM {ssim.mean():.3f} +- {ssim.std(ddof=1) / np.sqrt(len(ssim)):.3f} over {len(ssim)} crops; "
          f"{len(feats.keypoints) / len(test.ids):.0f} keypoints per crop")
    if a.png:
        from vispriv.harness.artifacts import save_image_grid

        idx = list(range(0, len(test.ids), max(1, len(test.ids) // 8)))[:8]
        grey = test.images.mean(axis=-1, keepdims=True)
        save_image_grid(a.png, [grey[idx], recon.images[idx]], ["truth", "reconstruction"], [test.ids[i] for i in idx])


if __name__ == "__main__":
    main()
