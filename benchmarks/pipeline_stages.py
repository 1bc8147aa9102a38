"""Cost of every stage of the three papers' pipelines, per item, at the papers' sizes, on this machine.

Each stage is timed in this one process beside two baselines measured in the same process:
a float32 1024 x 1024 x 1024 matmul (torch, all threads; its GFLOP/s is the machine's
practical compute roof) and a 256 MiB memcpy (numpy; GB/s, the memory roof). Every stage is
printed as seconds per item AND as "x mm": its time divided by one such matmul, so a
reader on another machine scales the table by their own matmul time (GPU rows excepted:
see docs/paper-scale.md). Where a stage has a known FLOP count (faiss brute force, the
point-to-subspace kernel, the U-Net) the share of the matmul roof is printed too.

Stages (the papers' sizes; where the full size would take minutes the stage runs smaller
and is extrapolated LINEARLY, which the row says):

* SIFT (kornia, vispriv.plugins.descriptor_release.sift) of one photo at 256 px and at 1024 px;
* affine lifting (sub-hybrid, m = 2) of one image's 1,000 descriptors;
* localisation of one query: 1,024 query descriptors matched (faiss, mutual NN) against the
  20 retrieved reference images' 4,096 descriptors each, then pycolmap's
  ``estimate_and_refine_absolute_pose`` (LO-RANSAC + refinement) on SYNTHETIC 2D-3D
  correspondences at 30 % inliers (early stop) and at 2 % inliers with 10k trials (the
  per-trial cost, extrapolated to the 100k-10M trials of the LDP-Feat ablation);
* database attack (section 4.1) and clustering attack (section 4.2) of 1,000 subspaces
  against |W| = 4,096 and 262,144 rows, at m = 2 and m = 16 with the plugins' default |V|
  (|W| / 8 for the database attack) and the mean over Table 1's m (run on 128 subspaces at
  256k, scaled to 1,000); ``--device cuda`` runs them where the matrix's ``device: cuda`` would;
* faiss spherical k-means, per iteration, per (point x centroid) -- the dictionaries W, Z, K;
  and the two-level k-means (``kmeans_method: hierarchical``), per iteration, per
  (point x (top clusters + words per top cluster)): the same dictionaries ~sqrt(k)/2 times cheaper;
* inversion U-Net (default config) inference on one 256 px image with 1,000 keypoints, and
  one training step (batch 8, 64 px crops, the default);
* descriptor-matching refinement, per Adam step, one 256 px image with 1,000 keypoints;
* LDP-Feat: exact nearest-neighbour quantisation against |K| = 262,144 (faiss brute force)
  and the omega-subset sampling, per 1,000 descriptors;
* Paillier (phe) encryption of one value with a 2048-bit key, and the package's online path
  (pre-computed obfuscator x encoded value);
* album-photos ``features: network``: one CNN training step, the feature pass per photo, the
  EXIF scan of one 1024 px JPEG, and its thumbnail with ``network_decode: full`` and ``draft``;
* album pruning at 512 places: the fast exact MILP (plugins/album/milp.py) on ONE hard
  synthetic R-32 album (logits N(0, 2^2), +3 on the true place), top-5 and budget 25 %.

Usage (about 3-4 minutes on 2 cores)::

    .venv/bin/python benchmarks/pipeline_stages.py [--quick] [--only NAME ...] [--device cuda]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

MM_N = 1024


@dataclass
class Row:
    stage: str
    item: str
    seconds: float
    note: str = ""
    gflop: float | None = None
    key: str = ""  # the name the per-table estimates use


def best_of(fn: Callable[[], object], repeats: int) -> float:
    """Best wall time of ``repeats`` calls (the machine is shared; the best is the least disturbed)."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def baselines(repeats: int) -> tuple[float, float]:
    """(seconds of one 1024^3 float32 matmul, seconds of one 256 MiB memcpy)."""
    import torch

    a, b = torch.randn(MM_N, MM_N), torch.randn(MM_N, MM_N)
    out = torch.empty(MM_N, MM_N)
    torch.mm(a, b, out=out)
    t_mm = best_of(lambda: torch.mm(a, b, out=out), repeats)
    src = np.ones(256 * 2**20 // 8)
    dst = np.empty_like(src)
    t_copy = best_of(lambda: np.copyto(dst, src), repeats)
    return t_mm, t_copy


def photo(side: int, index: int = 0) -> np.ndarray:
    """A bundled scikit-image photo, grey, ``side`` x ``side`` in [0, 1]."""
    from skimage import color, data, transform

    img = [data.astronaut, data.coffee, data.chelsea, data.rocket][index % 4]()
    grey = color.rgb2gray(img[..., :3]).astype(np.float32)
    return transform.resize(grey, (side, side), anti_aliasing=True).astype(np.float32)


def stage_sift(repeats: int) -> list[Row]:
    from vispriv.harness import Images
    from vispriv.plugins.descriptor_release.sift import SiftConfig, extract_features

    rows = []
    for side, reps in ((256, repeats), (1024, max(1, repeats // 2))):
        cfg = SiftConfig(max_keypoints=8192 if side == 1024 else 2048)
        imgs = [Images(photo(side, i)[None, ..., None], [f"p{i}"]) for i in range(reps)]
        extract_features(imgs[0], cfg)  # warm-up (kernels, allocator)
        t, kps = float("inf"), 0
        for im in imgs:
            t0 = time.perf_counter()
            feats = extract_features(im, cfg)
            t = min(t, time.perf_counter() - t0)
            kps = max(kps, feats.n_keypoints)
        rows.append(Row(f"SIFT {side} px", "photo", t, f"{kps} keypoints (cap {cfg.max_keypoints})", key=f"sift{side}"))
    return rows


def _unit_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    x = np.abs(rng.normal(size=(n, 128))).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def stage_lifting(repeats: int) -> list[Row]:
    from vispriv.plugins.descriptor_release.subspace import N_SUB_DATABASES, lift

    rng = np.random.default_rng(0)
    desc, db = _unit_rows(rng, 1000), _unit_rows(rng, 4096)
    subs = rng.integers(0, N_SUB_DATABASES, 1000)
    t = best_of(lambda: lift(desc, 2, "sub-hybrid", np.random.default_rng(1), database=db, sub_database=subs), repeats)
    return [Row("affine lifting, m = 2", "image (1,000 desc.)", t, "sub-hybrid, W of 4,096 rows", key="lift")]


def stage_localisation(repeats: int) -> list[Row]:
    import faiss

    rng = np.random.default_rng(0)
    query, refs = _unit_rows(rng, 1024), _unit_rows(rng, 20 * 4096)

    def mutual_nn() -> int:
        fwd, bwd = faiss.IndexFlatIP(128), faiss.IndexFlatIP(128)
        fwd.add(refs)
        bwd.add(query)
        _, q2r = fwd.search(query, 1)
        _, r2q = bwd.search(refs, 1)
        return int(np.sum(r2q[q2r[:, 0], 0] == np.arange(len(query))))

    t_match = best_of(mutual_nn, repeats)
    flops = 2 * 2 * 1024 * 20 * 4096 * 128
    rows = [Row("localisation: matching", "query (1,024 x 20 x 4,096)", t_match, "faiss brute force, mutual NN", flops / 1e9, key="loc_match")]
    try:
        import pycolmap
    except ImportError:
        print("localisation RANSAC skipped: pycolmap is not installed (pip install pycolmap)")
        return rows

    cam = pycolmap.Camera(model="SIMPLE_PINHOLE", width=1024, height=768, params=[800.0, 512.0, 384.0])

    def correspondences(n: int, inlier_share: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
        r = np.random.default_rng(seed)
        pts3 = np.column_stack([r.uniform(-5, 5, n), r.uniform(-4, 4, n), r.uniform(8, 30, n)])
        pix = pts3[:, :2] / pts3[:, 2:] * 800.0 + np.array([512.0, 384.0])
        pix += r.normal(0, 0.7, pix.shape)
        out = r.random(n) >= inlier_share
        pix[out] = np.column_stack([r.uniform(0, 1024, out.sum()), r.uniform(0, 768, out.sum())])
        return pix, pts3

    def ransac(n: int, share: float, trials: int) -> Callable[[], object]:
        pix, pts3 = correspondences(n, share, 1)
        opts = pycolmap.AbsolutePoseEstimationOptions()
        opts.ransac.max_error = 8.0
        opts.ransac.max_num_trials = trials
        opts.ransac.min_num_trials = min(1000, trials)
        return lambda: pycolmap.estimate_and_refine_absolute_pose(pix, pts3, cam, opts)

    t_easy = best_of(ransac(1024, 0.3, 100_000), repeats)
    rows.append(Row("localisation: LO-RANSAC + refine", "query, 30 % inliers", t_easy, "early stop (>= 1,000 trials)", key="loc_ransac"))
    t_hard = best_of(ransac(1024, 0.02, 10_000), max(1, repeats // 2))
    rows.append(Row("localisation: LO-RANSAC + refine", "query, 2 %, 10k trials", t_hard,
                    f"per trial {t_hard / 1e4 * 1e6:.1f} us: x10 per decade of trials (100k, 1M, 10M)", key="loc_ransac_10k"))
    return rows


#: Table 1 sweeps m = 2, 4, 8, 16; the attacks' cost is linear in m (the kernel's m + 1 rows,
#: the database attack's m / 2 adversarial rows), so their mean is the cost at m = 7.5.
TABLE1_MEAN_M = (2 + 4 + 8 + 16) / 4


def stage_attacks(repeats: int, quick: bool, device: str = "cpu") -> list[Row]:
    """The database and clustering attacks with their plugins' default |V| (and |U| = 1), at m = 2 and 16, on ``device``."""
    from vispriv.plugins.attacks.clustering import default_cluster_v_size
    from vispriv.plugins.attacks.database import default_v_size
    from vispriv.plugins.descriptor_release.recovery import cluster_candidates, database_attack
    from vispriv.plugins.descriptor_release.subspace import lift

    rng = np.random.default_rng(0)
    rows = []
    for size in (4096, 262_144):
        db = _unit_rows(rng, size)
        n_sub = 1000 if size <= 4096 else (32 if quick else 128)
        scaled = "" if n_sub == 1000 else f"; run on {n_sub} subspaces, scaled linearly"
        per_m: dict[str, dict[int, float]] = {"db": {}, "cl": {}}
        for m in (2, 16):
            n_adv = m // 2
            lifted = lift(_unit_rows(rng, n_sub), m, "hybrid", np.random.default_rng(2), database=db)
            v_db, v_cl = default_v_size(size, n_adv), default_cluster_v_size(n_adv + 1, size)
            per_m["db"][m] = best_of(lambda db=db, o=lifted.offsets, b=lifted.bases, n=n_adv, v=v_db: database_attack(db, o, b, n, v, 1, device),
                                     max(1, repeats - 1)) * 1000 / n_sub
            per_m["cl"][m] = best_of(lambda db=db, o=lifted.offsets, b=lifted.bases, n=n_adv, v=v_cl: cluster_candidates(db, o, b, n + 1, v, device=device),
                                     max(1, repeats - 1)) * 1000 / n_sub
            flops = 2.0 * 1000 * (m + 1) * 128 * size
            rows.append(Row(f"database attack, W = {size:,}, m = {m}", "image (1,000 subspaces)", per_m["db"][m],
                            f"V of {v_db:,} rows, U of 1{scaled}", (flops + 2.0 * 1000 * n_adv * 128 * size) / 1e9))
            rows.append(Row(f"clustering attack, Z = {size:,}, m = {m}", "image (1,000 subspaces)", per_m["cl"][m],
                            f"V of {v_cl} rows, k = {n_adv + 1}{scaled}", flops / 1e9))
        for kind, label in (("db", "database attack, W"), ("cl", "clustering attack, Z")):
            t2, t16 = per_m[kind][2], per_m[kind][16]
            rows.append(Row(f"{label} = {size:,}, mean over m = 2, 4, 8, 16", "image (1,000 subspaces)",
                            t2 + (t16 - t2) * (TABLE1_MEAN_M - 2) / 14, "interpolated linearly in m (Table 1's sweep)",
                            key=f"{kind}{size}"))
    return rows


def stage_kmeans(repeats: int, quick: bool) -> list[Row]:
    import faiss

    rng = np.random.default_rng(0)
    n, k = (32_768, 512) if quick else (65_536, 1024)
    x = _unit_rows(rng, n)

    def one_iter() -> None:
        km = faiss.Kmeans(128, k, niter=2, spherical=True, seed=1, verbose=False, max_points_per_centroid=n)
        km.train(x)

    t = best_of(one_iter, max(2, repeats // 2)) / 2
    per = t / (n * k)
    return [Row("spherical k-means (faiss)", "iteration per 1e9 point x centroid", per * 1e9,
                f"measured at {n:,} x {k:,}; 10M x 256k x 20 iter = {per * 1e7 * 262_144 * 20 / 3600:.0f} h",
                256.0, key="kmeans")]  # 1e9 pairs x 2 x 128 flops


def stage_hkmeans(repeats: int, quick: bool) -> list[Row]:
    from vispriv.plugins.descriptor_release.dictionary import hierarchical_kmeans

    rng = np.random.default_rng(0)
    n, k = (65_536, 4_096) if quick else (262_144, 16_384)
    x = _unit_rows(rng, n)
    branching = int(round(np.sqrt(k)))
    t2 = best_of(lambda: hierarchical_kmeans(x, k, seed=1, niter=2), max(1, repeats // 2))
    t6 = best_of(lambda: hierarchical_kmeans(x, k, seed=1, niter=6), max(1, repeats // 2))
    per = max(t6 - t2, 0.0) / 4 / (n * 2 * branching)  # per iteration: top level n x b, second level n x ~k/b = n x b
    fixed = max(t2 - 2 * per * n * 2 * branching, 0.0) / n  # dedupe, assignment to the top level, normalising
    total = (per * 2 * 512 * 20 + fixed) * 1e7 / 3600
    return [Row("two-level spherical k-means (faiss)", "iteration per 1e9 point x (b + k/b)", per * 1e9,
                f"measured at {n:,} points, k = {k:,}, b = {branching} (marginal: t(6 iter) - t(2 iter)); "
                f"+ {fixed * 1e6:.1f} us per point once; 10M x 256k x 20 iter = {total:.2f} h", 256.0, key="hkmeans")]


def stage_inversion(repeats: int) -> list[Row]:
    import torch

    from vispriv.plugins.descriptor_release.inversion.config import InversionConfig
    from vispriv.plugins.descriptor_release.inversion.featuremap import flat_pixel_index
    from vispriv.plugins.descriptor_release.inversion.module import InversionModule
    from vispriv.plugins.descriptor_release.inversion.unet import SparseUNet

    cfg = InversionConfig()
    torch.manual_seed(0)
    net = SparseUNet(128, 1, **cfg.network_params()).eval()
    rng = np.random.default_rng(0)
    k, side = 1000, 256
    feats = torch.from_numpy(_unit_rows(rng, k))
    index = torch.from_numpy(flat_pixel_index(np.zeros(k, np.int64), rng.integers(0, side, k), rng.integers(0, side, k), side, side))

    def infer() -> None:
        with torch.no_grad():
            net(feats, index, 1, side, side)

    infer()
    rows = [Row("inversion U-Net inference", "256 px image", best_of(infer, repeats), f"default network (depth {cfg.depth}, width {cfg.width})", key="infer")]
    module = InversionModule(128, 1, cfg.network_params(), cfg.lr, cfg.steps, cfg.l1_weight, cfg.ssim_weight, cfg.ssim_window,
                             cfg.gradient_weight)
    opt = torch.optim.AdamW(module.parameters(), lr=cfg.lr)
    b, crop, kb = cfg.batch_size, cfg.crop, 200 * cfg.batch_size
    batch = {"target": torch.rand(b, 1, crop, crop), "features": torch.from_numpy(_unit_rows(rng, kb)),
             "index": torch.randint(0, b * crop * crop, (kb,))}

    def step() -> None:
        loss = module.loss(module(batch), batch["target"])
        opt.zero_grad()
        loss.backward()
        opt.step()

    step()
    t = best_of(step, repeats)
    rows.append(Row("inversion U-Net training", f"step (batch {b}, {crop} px)", t,
                    f"default {cfg.steps} steps = {t * cfg.steps / 60:.1f} min", key="train"))
    return rows


def stage_refinement(repeats: int) -> list[Row]:
    from vispriv.plugins.descriptor_release.inversion.config import RefineConfig
    from vispriv.plugins.descriptor_release.inversion.refine import refine_to_descriptors

    rng = np.random.default_rng(0)
    k, side = 1000, 256
    img = photo(side)[None, ..., None]
    kps = rng.uniform(16, side - 16, (k, 2)).astype(np.float32)
    scales, ori = rng.uniform(2, 8, k).astype(np.float32), rng.uniform(0, 360, k).astype(np.float32)
    target, index = _unit_rows(rng, k), np.zeros(k, np.int64)

    def run(steps: int) -> float:
        return best_of(lambda: refine_to_descriptors(img, kps, scales, ori, target, index, RefineConfig(steps=steps)), repeats)

    per = (run(6) - run(1)) / 5
    return [Row("refinement (descriptor matching)", "Adam step, 256 px, 1,000 kp", per, "(t(6 steps) - t(1 step)) / 5; default 100 steps", key="refine")]


def stage_ldp(repeats: int) -> list[Row]:
    from vispriv.plugins.descriptor_release import ldp

    rng = np.random.default_rng(0)
    size = 262_144
    dictionary, queries = _unit_rows(rng, size), _unit_rows(rng, 1000)
    quant = ldp.Quantiser(dictionary)
    quant.assign(queries[:10])
    t_q = best_of(lambda: quant.assign(queries), repeats)
    ids = quant.assign(queries)
    t_s = best_of(lambda: ldp.omega_subset(ids, size, 2, 10.0, np.random.default_rng(3)), repeats)
    flops = 2.0 * 1000 * size * 128
    return [
        Row("LDP-Feat quantisation, K = 262,144", "image (1,000 desc.)", t_q, "exact (faiss IndexFlatL2); HNSW ~22x faster", flops / 1e9, key="quant"),
        Row("LDP-Feat omega-subset, m = 2, eps 10", "image (1,000 desc.)", t_s, "Eq. (4) via Eq. (5)", key="omega"),
    ]


def stage_paillier(repeats: int, quick: bool) -> list[Row]:
    import gmpy2
    from phe import paillier

    from vispriv.plugins.federated.protocol import paillier as pl

    rows = []
    n = 5 if quick else 20
    values = np.random.default_rng(0).normal(size=n)
    for bits in (1024, 2048):
        t0 = time.perf_counter()
        pk, sk = paillier.generate_paillier_keypair(n_length=bits)
        t_key = time.perf_counter() - t0
        t_phe = best_of(lambda pk=pk: [pk.encrypt(float(v)) for v in values], max(1, repeats // 2)) / n
        t_off = best_of(lambda pk=pk: pl.fresh_obfuscators(pk.n, n), max(1, repeats // 2)) / n
        obf = [gmpy2.mpz(r) for r in pl.fresh_obfuscators(pk.n, n)]
        t_on = best_of(lambda pk=pk, obf=obf: pl.encrypt_encoded(pl.encode(values, pk), pk, obf), repeats) / n
        cts = pl.encrypt_encoded(pl.encode(values, pk), pk, obf)
        t_dec = best_of(lambda cts=cts, sk=sk: pl.decrypt_decode(cts, sk), repeats) / n
        rows += [
            Row(f"Paillier keygen, {bits} bit", "key", t_key, "once per run"),
            Row(f"Paillier encrypt (phe), {bits} bit", "value", t_phe, "plain phe.encrypt", key=f"phe{bits}"),
            Row(f"Paillier offline r^n, {bits} bit", "value", t_off, "obfuscator, one core (the pool uses all cores)",
                key=f"offline{bits}"),
            Row(f"Paillier online, {bits} bit", "value", t_on, "encode + (1 + n m) r^n mod n^2", key=f"online{bits}"),
            Row(f"Paillier decrypt + decode (G), {bits} bit", "value", t_dec, "phe raw_decrypt (CRT), one core",
                key=f"decrypt{bits}"),
        ]
    return rows


def stage_album_network(repeats: int) -> list[Row]:
    """album-photos with ``features: network``: one training step at the paper-scale config, and reading one photo.

    The photos are colour JPEGs (quality 90) 1024 px on the long side like the paper's Flickr
    downloads: 1024 x 683 (scikit-image's coffee; 3:2, so the reduced-scale decode stops at
    1/4 and a real resize follows; the per-table estimates use this one) and 1024 x 1024
    (astronaut; 1/8 scale is exactly 128 px).
    """
    import tempfile
    from pathlib import Path

    import torch
    from PIL import Image
    from skimage import data

    from vispriv.plugins.album.photo_network import PhotoModule, as_input, decode_thumbnail
    from vispriv.plugins.album.photos import read_exif

    module = PhotoModule(32, 512, 1e-3)
    opt = module.configure_optimizers()
    x, y = torch.randint(0, 256, (32, 128, 128, 3), dtype=torch.uint8), torch.randint(0, 512, (32,))

    def step() -> None:
        loss = module.training_step((x, y), 0)
        opt.zero_grad()
        loss.backward()
        opt.step()

    step()
    rows = [Row("album photo CNN training", "step (batch 32, 128 px)", best_of(step, repeats),
                "features: network (uint8 batch, converted in the step)", key="photo_step")]
    chunk = torch.randint(0, 256, (64, 128, 128, 3), dtype=torch.uint8)

    def features() -> None:
        with torch.no_grad():
            module.net.body(as_input(chunk))

    module.net.eval()
    rows.append(Row("album photo CNN features", "photo (chunks of 64, 128 px)", best_of(features, repeats) / 64,
                    "extract_features: on the CPU after training, as the code runs it", key="photo_features"))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.jpg"  # rewritten for each shape
        for name, image, size, keyed in (("1024 x 683", data.coffee, (1024, 683), True),
                                         ("1024 x 1024", data.astronaut, (1024, 1024), False)):
            Image.fromarray(image()).resize(size, Image.LANCZOS).save(path, quality=90)
            if keyed:
                rows.append(Row("album photo scan (EXIF GPS + time)", f"{name} JPEG", best_of(lambda: read_exif(path), repeats),
                                "scan_photos: read_exif decodes the whole photo once (unreadable-file check)", key="scan"))
            t_full = best_of(lambda: decode_thumbnail(path, 128, "full"), repeats)
            t_draft = best_of(lambda: decode_thumbnail(path, 128, "draft"), max(repeats, 10))
            rows.append(Row("photo decode + resize, network_decode: full", f"{name} JPEG -> 128 px", t_full,
                            "full-size decode + skimage anti-aliased resize (the reader before 2026-11-25)",
                            key="decode_full" if keyed else ""))
            rows.append(Row("photo decode + resize, network_decode: draft", f"{name} JPEG -> 128 px", t_draft,
                            "default: reduced-scale JPEG decode (Image.draft) + PIL bilinear", key="decode" if keyed else ""))
    return rows


def stage_album(limit: float) -> list[Row]:
    from vispriv.plugins.album import milp
    from vispriv.plugins.album.pruning import advantage

    rng = np.random.default_rng([0, 32])
    S = rng.normal(0.0, 2.0, (32, 512))
    S[:, 0] += 3.0
    A, _ = advantage(S, 0)
    rows = []
    for label, solve in (
        ("top-5", lambda: milp.fast_topk(A, 5, time_limit=limit)),
        ("budget 25 %", lambda: milp.fast_budget(A, 8, np.zeros(32), time_limit=limit)),
    ):
        t0 = time.perf_counter()
        res = solve()
        rows.append(Row(f"album MILP, 512 places, {label}", "album (hard R-32)", time.perf_counter() - t0,
                        f"status {res.status} (limit {limit:g} s)", key="milp_topk" if label == "top-5" else "milp_budget"))
    return rows

#: Assumed sustained fp32 throughput of ONE data-centre GPU (an H100's peak is ~67 TFLOP/s fp32;
#: small convolutions and k-means reach a fraction). An ASSUMPTION, not a measurement: no GPU
#: was available where this was written. GPU time of a movable stage = CPU time x (this
#: machine's matmul GFLOP/s / GPU_GFLOPS).
GPU_GFLOPS = 10_000.0

#: The paper configs' work at full scale, in the stage units above: (stage key, count, where).
#: where: "gpu" = the code runs it on a GPU today (Lightning ``accelerator``; the attacks'
#: point-to-subspace kernels with the matrix's ``device: cuda``, not yet run on a GPU in this
#: project); "port" = the library has a GPU path the code does not use yet (faiss-gpu, a
#: torch device for SIFT); "cpu" = stays on the CPU (big-integer Paillier, HiGHS,
#: JPEG decoding, HNSW search). Counts follow the configs as written (docs/paper-scale.md):
#: scene-trees ``limit: 2000`` images per split at 256 px (~1,000 SIFT each, x4 views for the
#: dictionaries, x2 flips for the networks), 20,000 training steps per network, the test split
#: twice (:data:`TEST_PHOTOS`: the paper's 10 photos, and 2,000); Caltech101 at
#: 45 x 45 px (D = 2,026 with the bias), 101 classes, 5 users, 20 rounds, capacity M = 0.1 D NC;
#: 750k photos, 1,000 collections per type.
#: Test photos of LDP-Feat Tables 1 and 4: the paper's 10 Flickr holiday photos (section 6.1),
#: and as many as the configs' ``limit`` lets a larger private set give (2,000).
TEST_PHOTOS = {"10 test photos (the paper's)": 10, "2,000 test photos": 2000}
DPHE_M = int(np.ceil(0.1 * 2026 * 101))  # values per DPHE message (one shard at the paper's >= 90 % sparsity)
WORKLOADS: dict[str, list[tuple[str, float, str]]] = {
    **{f"LDP-Feat Table 1 (paper/ldp_feat_table1_inversion), {label}": [
        ("sift256", 20_000 + test, "port"),  # W and Z photos x4 views, training x2 flips, the test photos
        ("kmeans", 8e6 * (262_144 + 131_072) * 20 / 1e9, "port"),  # W and Z: 8M descriptors, 20 iterations
        ("lift", (2000 + test) * 4, "cpu"),  # DIA's training photos and the test photos, each m
        ("db262144", test * 4, "gpu"),  # the test photos' releases, mean over Table 1's m; `device: cuda`
        ("cl262144", test * 4 * 0.5 * 2, "gpu"),  # clustering + nearest, Z = 131,072; `device: cuda`
        ("train", 5 * 20_000, "gpu"),  # Raw + 4 DIA networks
        ("infer", test * 17, "gpu"),
    ] for label, test in TEST_PHOTOS.items()},
    **{f"LDP-Feat Table 4 (paper/ldp_feat_table4_ldp_inversion), {label}": [
        ("sift256", 12_000 + test, "port"),
        ("kmeans", 8e6 * (262_144 + 524_288) * 20 / 1e9, "port"),
        ("quant", (4000 + test) * 16 * 1.25 / 22, "cpu"),  # training x2 flips and test; HNSW ~22x exact; 512k rows cost 2x
        ("omega", (4000 + test) * 16, "cpu"),
        ("train", 16 * 20_000, "gpu"),
        ("infer", test * 16, "gpu"),
    ] for label, test in TEST_PHOTOS.items()},
    # Localisation (Tables 2, 3; their configs belong to the localisation scenario): Aachen's 824
    # day queries at 1024 px, 23 + 7 rows, each query matched to 20 retrieved reference images and
    # LO-RANSAC run to a 100k-trial budget (low inlier ratios at small epsilon do not stop early);
    # the dictionaries |K| = 128k ... 1024k by k-means of 10M reference descriptors.
    "LDP-Feat Tables 2-3, Aachen (localisation; assumptions above)": [
        ("sift1024", 824, "port"),
        ("kmeans", 10e6 * (131_072 + 262_144 + 524_288 + 1_048_576) * 20 / 1e9, "port"),
        ("quant", 824 * 8 * 30 / 22, "cpu"),  # ~8,000 keypoints per query, HNSW
        ("loc_match", 824 * 30, "port"),
        ("loc_ransac_10k", 824 * 30 * 10, "cpu"),
    ],
    "DPHE Table 1, Caltech101 (paper/dphe_table1_caltech)": [
        ("offline1024", (5 * 20 * DPHE_M + 5 * 2026 * 101) / 2, "cpu"),  # DPHE + PRR10 (dense); pool on 2 cores
        ("online1024", 5 * 20 * DPHE_M + 5 * 2026 * 101, "cpu"),
    ],
    "DPHE Table 2 (paper/dphe_table2_sparsity)": [
        ("offline1024", 5 * 20 * DPHE_M * (10 + 5 + 2 + 1) / 2, "cpu"),  # 4 reg values: 10, 5, 2, 1 shards
        ("online1024", 5 * 20 * DPHE_M * 18, "cpu"),
    ],
    # DPHE Tables 3-6 on deep features, the configs as written (5 users, 20 rounds, M = ceil(0.1 x values),
    # 1024-bit keys): per user-round ceil(nz / M) shards of M values at the paper's reported sparsity;
    # PRR10 encrypts each user's dense model once; G decrypts all D values of the sum every DPHE round.
    "DPHE Table 3, CelebA (paper/dphe_table3_celeba)": [  # 513 x 40 weights, 75 % sparse: 3 shards of 2,052
        ("offline1024", (5 * 20 * 3 * 2052 + 5 * 20_520) / 2, "cpu"),
        ("online1024", 5 * 20 * 3 * 2052 + 5 * 20_520, "cpu"),
        ("decrypt1024", 20 * 20_520 + 20_520, "cpu"),
    ],
    "DPHE Table 4, life-logging (paper/dphe_table4_sensitive_places)": [  # 4,097 weights, 95 % sparse: 1 shard of 410
        ("offline1024", (5 * 20 * 410 + 5 * 4097) / 2, "cpu"),
        ("online1024", 5 * 20 * 410 + 5 * 4097, "cpu"),
        ("decrypt1024", 20 * 4097 + 4097, "cpu"),
    ],
    "DPHE Table 5, YouTube-8M (paper/dphe_table5_video_attributes)": [  # 2,049 x 100, 65 % sparse: 4 shards of 20,490
        ("offline1024", (5 * 20 * 4 * 20_490 + 5 * 204_900) / 2, "cpu"),
        ("online1024", 5 * 20 * 4 * 20_490 + 5 * 204_900, "cpu"),
        ("decrypt1024", 20 * 204_900 + 204_900, "cpu"),
    ],
    **{f"DPHE Table 6, {name} (paper/dphe_table6_clustering)": [  # K x 2,048 centroids, > 90 % sparse: 1 shard
        ("offline1024", 5 * 20 * int(np.ceil(0.1 * k * 2048)) / 2, "cpu"),
        ("online1024", 5 * 20 * int(np.ceil(0.1 * k * 2048)), "cpu"),
        ("decrypt1024", 20 * k * 2048, "cpu"),
    ] for name, k in (("Caltech101", 101), ("Caltech256", 256))},
    "Album Table 1 (paper/album_table1_geolocation)": [
        ("scan", 750_000, "cpu"),  # read_exif of every photo (a full decode: the unreadable-file check)
        ("decode", 750_000, "cpu"),  # network_decode: draft (the default)
        ("photo_step", 3000, "gpu"),
        ("photo_features", 750_000, "cpu"),  # the feature pass runs on the CPU after training
    ],
    "Album Table 2 (paper/album_table2_min_deletions)": [
        ("milp_topk", 5 * 1000 * 2, "cpu"),  # features and classifiers cached from Table 1
    ],
    "Album Table 3 (paper/album_table3_budget)": [
        ("milp_budget", 5 * 1000 * 4, "cpu"),
    ],
    "Album Table 4 (paper/album_table4_budget_deletions)": [
        ("milp_budget", 4 * 1000 * 3, "cpu"),  # R-16 ... R-128 at 12.5, 25, 50 %; greedy and the report are negligible
    ],
}


#: The LDP-Feat tables again with every dictionary built by ``kmeans_method: hierarchical``:
#: per iteration N x (b + k/b) with b = sqrt(k), i.e. N x 2 sqrt(k) point-centroid pairs.
HIERARCHICAL_KMEANS = {
    "LDP-Feat Table 1": 8e6 * 2 * (512 + 362) * 20 / 1e9,
    "LDP-Feat Table 4": 8e6 * 2 * (512 + 724) * 20 / 1e9,
    "LDP-Feat Tables 2-3, Aachen": 10e6 * 2 * (362 + 512 + 724 + 1024) * 20 / 1e9,
}
#: Album Table 1 as read before 2026-11-25 (and with ``network_decode: full``): the full-size decode.
WORKLOADS["Album Table 1, network_decode: full"] = [
    ("decode_full", n, where) if key == "decode" else (key, n, where)
    for key, n, where in WORKLOADS["Album Table 1 (paper/album_table1_geolocation)"]
]
for _table in [t for t in WORKLOADS if t.startswith(tuple(HIERARCHICAL_KMEANS))]:
    _prefix = next(p for p in HIERARCHICAL_KMEANS if _table.startswith(p))
    _suffix = _table.split("), ")[1] + ", " if "), " in _table else ""
    WORKLOADS[f"{_prefix}, {_suffix}kmeans_method: hierarchical"] = [
        *(w for w in WORKLOADS[_table] if w[0] != "kmeans"), ("hkmeans", HIERARCHICAL_KMEANS[_prefix], "port")
    ]


def estimates(rows: list[Row], t_mm: float) -> None:
    """Expected wall time of every paper config here and on one GPU (see GPU_GFLOPS)."""
    per = {r.key: r.seconds for r in rows if r.key}
    speed_up = GPU_GFLOPS / (2 * MM_N**3 / t_mm / 1e9)
    print()
    print(f"Per-table estimates (hours; GPU = CPU time / {speed_up:.0f} for movable stages, ASSUMED {GPU_GFLOPS / 1e3:g} TFLOP/s):")
    print("| config | here (CPU) | largest stage here | one GPU, code as is | one GPU + faiss-gpu / torch-device ports |")
    print("|---|---|---|---|---|")
    for table, work in WORKLOADS.items():
        missing = [k for k, _, _ in work if k not in per]
        if missing:
            print(f"| {table} | not estimated: stages {missing} not run | | | |")
            continue
        hours = {k: per[k] * n / 3600 for k, n, _ in work}
        cpu = sum(hours.values())
        gpu_now = sum(h / speed_up if where == "gpu" else h for (k, _, where), h in zip(work, hours.values()))
        gpu_port = sum(h / speed_up if where != "cpu" else h for (k, _, where), h in zip(work, hours.values()))
        top = max(hours, key=hours.get)
        print(f"| {table} | {hrs(cpu)} | {top} {hrs(hours[top])} | {hrs(gpu_now)} | {hrs(gpu_port)} |")


def hrs(hours: float) -> str:
    return f"{hours:,.1f}" if hours >= 1 else f"{hours:.2g}"


STAGES = ("sift", "lifting", "localisation", "attacks", "kmeans", "hkmeans", "inversion", "refinement", "ldp", "paillier", "album",
          "album_network")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="smaller extrapolation bases (about a minute)")
    ap.add_argument("--only", nargs="*", choices=STAGES, default=list(STAGES))
    ap.add_argument("--album-limit", type=float, default=60.0, help="MILP time limit per album (s)")
    ap.add_argument("--device", default="cpu", help="torch device of the attacks' kernels (cpu, cuda, cuda:N), as the matrix's device:")
    args = ap.parse_args()
    from vispriv.harness.devices import check_device
    from vispriv.harness.errors import ConfigError

    try:
        check_device(args.device, "--device")
    except ConfigError as exc:
        ap.exit(2, f"error: {exc}\n")

    import torch

    r = args.repeats
    t_mm, t_copy = baselines(max(5, r))
    print(f"torch threads {torch.get_num_threads()}; baseline matmul {MM_N}^3 float32: {t_mm * 1e3:.2f} ms "
          f"= {2 * MM_N**3 / t_mm / 1e9:.1f} GFLOP/s; memcpy 256 MiB: {t_copy * 1e3:.1f} ms = {2 * 256 / 1024 / t_copy:.2f} GB/s (read + write)")
    runs = {
        "sift": lambda: stage_sift(r),
        "lifting": lambda: stage_lifting(r),
        "localisation": lambda: stage_localisation(r),
        "attacks": lambda: stage_attacks(r, args.quick, args.device),
        "kmeans": lambda: stage_kmeans(r, args.quick),
        "hkmeans": lambda: stage_hkmeans(r, args.quick),
        "inversion": lambda: stage_inversion(r),
        "refinement": lambda: stage_refinement(r),
        "ldp": lambda: stage_ldp(r),
        "paillier": lambda: stage_paillier(r, args.quick),
        "album": lambda: stage_album(args.album_limit),
        "album_network": lambda: stage_album_network(r),
    }
    rows: list[Row] = []
    for name in args.only:
        t0 = time.perf_counter()
        got = runs[name]()
        rows.extend(got)
        print(f"  {name}: {len(got)} rows in {time.perf_counter() - t0:.1f} s", flush=True)
    # re-measure the baseline after the stages: the ratio uses the better of the two
    t_after = baselines(max(5, r))[0]
    print(f"baseline matmul again after the stages: {t_after * 1e3:.2f} ms = {2 * MM_N**3 / t_after / 1e9:.1f} GFLOP/s "
          "(the ratios below use the faster of the two)")
    t_mm = min(t_mm, t_after)
    print()
    print("| stage | per | seconds | x mm | % of matmul roof | note |")
    print("|---|---|---|---|---|---|")
    peak = 2 * MM_N**3 / t_mm / 1e9
    for row in rows:
        roof = f"{row.gflop / row.seconds / peak:.0%}" if row.gflop else ""
        print(f"| {row.stage} | {row.item} | {fmt(row.seconds)} | {ratio(row.seconds / t_mm)} | {roof} | {row.note} |")
    estimates(rows, t_mm)


def ratio(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def fmt(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} us"


if __name__ == "__main__":
    main()
