"""Levers of the inversion attack, measured on 2 CPU cores.

Trains the sparse-SIFT inversion U-Net on the bundled ``public`` (+ ``lifting``) photos of
vispriv.plugins.descriptor_release.splits (real photos, nothing simulated) under several
settings and scores reconstructions of every crop (a quarter crop apart) of the held-out ``test`` photos (SSIM, scikit-image, data_range=1). Every condition
is compared against the baseline condition on the same test crops (paired difference and
its standard error) and against the mean-image predictor (the mean public crop).

Run (each condition trains at most ``--minutes``; trained nets are cached in
.vispriv-cache, so a rerun only evaluates)::

    nice -n 10 .venv/bin/python benchmarks/probes/inversion_levers.py --steps 250 --minutes 6 \
        --conditions base,dense-step4 --reference base
    nice -n 10 .venv/bin/python benchmarks/probes/inversion_levers.py --steps 250 --minutes 6 \
        --conditions dense-step4,dense-step4-l1-only,dense-step4-no-augment,dense-step8 \
        --reference dense-step4 --long 14
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from vispriv.harness import Cache, CellContext, Images
from vispriv.plugins.descriptor_release.inversion import InversionConfig, SparseFeatures, reconstruct, train_or_load
from vispriv.plugins.descriptor_release.inversion.data import variant_sets
from vispriv.plugins.descriptor_release.sift import SiftConfig, extract_features
from vispriv.plugins.descriptor_release.splits import load_split
from vispriv.plugins.metrics.image_quality import per_image_quality


def split(name: str, side: int) -> Images:
    """A split of the bundled photos (the matrix's own split)."""
    return load_split(name, side)


def to_sparse(raw) -> SparseFeatures:
    return SparseFeatures(raw.keypoints, raw.descriptors, raw.image_index, raw.image_ids, raw.image_size)


def test_crops(side: int, crop: int, stride: int) -> Images:
    """Every ``crop`` x ``crop`` window (``stride`` apart) of the held-out test photos."""
    crops, ids = [], []
    test = split("test", side)
    for name, im in zip(test.ids, test.images):
        for top in range(0, side - crop + 1, stride):
            for left in range(0, side - crop + 1, stride):
                crops.append(im[top : top + crop, left : left + crop])
                ids.append(f"{name}-{top}-{left}")
    return Images(np.stack(crops), ids)


DENSE4 = {"detector": "dense", "dense_step": 4, "max_keypoints": 20000}
BOTH = ("public", "lifting")
CONDITIONS = {
    # name: (sift overrides, inversion overrides, photo side, crop, training splits)
    "base": ({}, {}, 128, 64, BOTH),
    "l1-only": ({}, {"ssim_weight": 0.0}, 128, 64, BOTH),
    "no-augment": ({}, {"flip": False, "keep_min": 1.0}, 128, 64, BOTH),
    "public-only": ({}, {}, 128, 64, ("public",)),
    "res-256": ({}, {"crop": 128, "depth": 5, "width": 16}, 256, 128, BOTH),
    "dense-step4": (DENSE4, {}, 128, 64, BOTH),
    "dense-step8": ({**DENSE4, "dense_step": 8}, {}, 128, 64, BOTH),
    "dense-step4-l1-only": (DENSE4, {"ssim_weight": 0.0}, 128, 64, BOTH),
    "dense-step4-no-augment": (DENSE4, {"flip": False, "keep_min": 1.0}, 128, 64, BOTH),
    "dense-step4-width16": (DENSE4, {"width": 16}, 128, 64, BOTH),
}


def run(name: str, minutes: float, steps: int, cache: Cache) -> dict:
    sift_over, inv_over, side, crop, splits = CONDITIONS[name]
    sift = SiftConfig(**{"max_keypoints": 2000, **sift_over})
    cfg = InversionConfig(**{"crop": crop, "steps": steps, "max_minutes": minutes, **inv_over})
    ctx = CellContext(seed=0, cache=cache, quiet=True)
    t0 = time.perf_counter()
    sets = []
    train = [split(s, side) for s in splits]
    train = Images(np.concatenate([t.images for t in train]), [i for t in train for i in t.ids])
    for variant in variant_sets(train, cfg.scales, cfg.flip):
        sets.append((variant, to_sparse(extract_features(variant, sift, cache))))
    test = test_crops(side, crop, crop // 4)
    test_feats = to_sparse(extract_features(test, sift, cache))
    t_extract = time.perf_counter() - t0
    trained = train_or_load(sets, cfg, ctx, tag="levers")
    recon = reconstruct(trained.net, test_feats)
    ssim = np.array([r["ssim"] for r in per_image_quality(test, Images(recon, test.ids))])
    grey_public = np.concatenate([s[0].images.mean(-1).reshape(-1) for s in sets])
    const = np.full_like(recon, float(np.mean(grey_public)))
    ssim_mean = np.array([r["ssim"] for r in per_image_quality(test, Images(const, test.ids))])
    kp = np.bincount(test_feats.image_index, minlength=test_feats.n_images)
    return {
        "name": name, "ssim": ssim, "ssim_mean_image": ssim_mean, "kp_per_image": float(kp.mean()),
        "extract_s": t_extract, "info": trained.info, "test": test, "recon": recon, "net": trained.net,
        "test_feats": test_feats,
    }


def positions_only(result: dict) -> np.ndarray:
    f = result["test_feats"]
    blank = SparseFeatures(f.keypoints, np.full_like(f.features, 1 / np.sqrt(128)), f.image_index, f.image_ids, f.image_size)
    rec = reconstruct(result["net"], blank)
    return np.array([r["ssim"] for r in per_image_quality(result["test"], Images(rec, result["test"].ids))])


def kmeans_nearest(result: dict, k: int = 256) -> np.ndarray:
    import faiss

    f = result["test_feats"]
    km = faiss.Kmeans(128, k, niter=20, seed=0, spherical=True)
    km.train(np.ascontiguousarray(f.features))
    _, idx = km.index.search(np.ascontiguousarray(f.features), 1)
    q = SparseFeatures(f.keypoints, km.centroids[idx[:, 0]], f.image_index, f.image_ids, f.image_size)
    rec = reconstruct(result["net"], q)
    return np.array([r["ssim"] for r in per_image_quality(result["test"], Images(rec, result["test"].ids))])


def paired(a: np.ndarray, b: np.ndarray) -> str:
    d = a - b
    return f"{d.mean():+.4f} ± {d.std(ddof=1) / np.sqrt(len(d)):.4f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--conditions", default=",".join(CONDITIONS))
    ap.add_argument("--minutes", type=float, default=6.0)
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--cache", default=".vispriv-cache")
    ap.add_argument("--reference", default="base", help="condition the others are paired against (run it first)")
    ap.add_argument("--long", type=float, default=0.0, help="if > 0: train the reference again for this many minutes, same steps x 3")
    args = ap.parse_args()
    cache = Cache(args.cache)
    base = None
    print(f"| condition | keypoints/crop | test crops | SSIM | − mean-image (paired) | − {args.reference} (paired) | images seen | images/s | train s |")
    print("|---|---|---|---|---|---|---|---|---|")
    runs = [(name, args.steps, args.minutes) for name in args.conditions.split(",")]
    if args.long > 0:
        runs.append((args.reference, 3 * args.steps, args.long))
    for i, (name, steps, minutes) in enumerate(runs):
        r = run(name, minutes, steps, cache)
        label = name if i < len(runs) - 1 or args.long <= 0 else f"{name}, {steps} steps (<= {minutes:g} min)"
        info = r["info"]
        vs_base = paired(r["ssim"], base["ssim"]) if base is not None and base["test"].ids == r["test"].ids else "n/a"
        print(f"| {label} | {r['kp_per_image']:.0f} | {len(r['ssim'])} | {r['ssim'].mean():.4f} ± {r['ssim'].std(ddof=1)/np.sqrt(len(r['ssim'])):.4f} "
              f"| {paired(r['ssim'], r['ssim_mean_image'])} | {vs_base} | {info.get('train_images_seen', float('nan')):.0f} "
              f"| {info.get('train_images_per_second', float('nan')):.1f} | {info.get('train_seconds', float('nan')):.0f} |", flush=True)
        if name == args.reference:
            base = base or r
            po, km = positions_only(r), kmeans_nearest(r)
            print(f"| {label}: mean image | | | {r['ssim_mean_image'].mean():.4f} | | | | | |")
            print(f"| {label}: positions only (constant descriptor) | | | {po.mean():.4f} | | {paired(po, r['ssim'])} (vs itself) | | | |")
            print(f"| {label}: k-means(256)-nearest descriptors | | | {km.mean():.4f} | | {paired(km, r['ssim'])} (vs itself) | | | |", flush=True)


if __name__ == "__main__":
    main()
