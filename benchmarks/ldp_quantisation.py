"""LDP-Feat step 1 (LDP-Feat (ICCV 2023) section 5.2): nearest-neighbour quantisation to |K| = 256k x 128.

Measures, in one process and with the same thread count, descriptors per second of exact
brute force (faiss IndexFlatL2) and of fixed IVF and HNSW indexes (vispriv.plugins.descriptor_release.
ldp.Quantiser; each graph built once on one thread, then searched at several efSearch), and
how often each picks the same dictionary entry as brute force ("agree real": on the real
SIFT queries only, the issue's criterion).

Data: queries are REAL SIFT descriptors (kornia, via vispriv.plugins.descriptor_release.sift) of
bundled scikit-image photos; the 256k dictionary is SIMULATED -- jittered copies of real
SIFT descriptors of *other* bundled photos (ldp.jittered_dictionary), because the bundled
images cannot support 256k k-means centroids. Then the omega-subset sampling itself.

    .venv/bin/python benchmarks/ldp_quantisation.py [--size 262144] [--queries 20000] [--threads 2]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from vispriv.harness import Images
from vispriv.plugins.descriptor_release import ldp
from vispriv.plugins.descriptor_release.sift import SiftConfig, extract_features

QUERY_IMAGES = ["astronaut", "camera", "coffee", "chelsea", "rocket", "motorcycle_left"]
DICT_IMAGES = ["brick", "grass", "gravel", "coins", "moon", "page", "text", "horse", "hubble_deep_field",
               "immunohistochemistry", "retina", "colorwheel", "logo", "clock", "motorcycle_right"]


def load(names: list[str], size: int) -> Images:
    from skimage import color, data, transform

    out, ids = [], []
    for name in names:
        try:
            img = data.stereo_motorcycle()[0 if name.endswith("left") else 1] if name.startswith("motorcycle") else getattr(data, name)()
        except Exception as exc:  # noqa: BLE001 -- an image missing from this scikit-image build is skipped
            print(f"skipped {name}: {type(exc).__name__}")
            continue
        img = np.asarray(img, np.float32)
        img = img / 255.0 if img.max() > 1.5 else img
        if img.ndim == 3:
            img = color.rgb2gray(img[..., :3])
        out.append(transform.resize(img, (size, size), anti_aliasing=True).astype(np.float32))
        ids.append(name)
    return Images(np.stack(out)[..., None], ids)


def rate(fn, n: int) -> tuple[float, np.ndarray]:
    t = time.perf_counter()
    out = fn()
    return n / (time.perf_counter() - t), out


def main() -> None:
    import faiss

    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=262144)
    ap.add_argument("--queries", type=int, default=20000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sigma", type=float, default=0.02)
    args = ap.parse_args()
    faiss.omp_set_num_threads(args.threads)

    cfg = SiftConfig(max_keypoints=4000)
    queries = extract_features(load(QUERY_IMAGES, 512), cfg).descriptors
    base = extract_features(load(DICT_IMAGES, 512), cfg).descriptors
    reps = math.ceil(args.queries / len(queries))
    rng = np.random.default_rng(0)
    q = np.concatenate([queries] + [ldp.jittered_dictionary(queries, len(queries), 0.01, seed=i) for i in range(1, reps)])
    real = np.zeros(len(q), bool)
    real[: len(queries)] = True
    order = rng.permutation(len(q))[: args.queries]
    q, real = q[order], real[order]
    k = ldp.jittered_dictionary(base, args.size, args.sigma, seed=0)
    print(f"queries: {len(q)} ({len(queries)} real SIFT of {len(QUERY_IMAGES)} images"
          f"{', the rest real + 0.01 jitter' if reps > 1 else ''}); dictionary: SIMULATED {len(k)} x 128 "
          f"(jitter sigma {args.sigma} around {len(base)} real SIFT of other images); threads: {args.threads}")

    exact = ldp.Quantiser(k)
    brute_rate, brute = rate(lambda: exact.assign(q), len(q))
    print(f"{'index':<28}{'desc/s':>10}{'x brute':>9}{'agree':>9}{'agree real':>11}{'build s':>9}")
    print(f"{'exact IndexFlatL2':<28}{brute_rate:>10.0f}{1.0:>9.2f}{1.0:>9.4f}{1.0:>11.4f}{0:>9.1f}")
    def row(label: str, quant: ldp.Quantiser, build: float) -> None:
        r, ids = rate(lambda: quant.assign(q), len(q))
        agree, agree_real = float(np.mean(ids == brute)), float(np.mean(ids[real] == brute[real]))
        print(f"{label:<28}{r:>10.0f}{r / brute_rate:>9.2f}{agree:>9.4f}{agree_real:>11.4f}{build:>9.1f}", flush=True)

    t = time.perf_counter()
    quant = ldp.Quantiser(k, ldp.QuantiserConfig("ivf", 1024, 16, seed=0))
    build = time.perf_counter() - t
    for nprobe in (16, 8):
        quant.index.nprobe = nprobe
        row(f"IVF nlist=1024 nprobe={nprobe}", quant, build)
    for m, ef_construction, efs in [(32, 80, (64,)), (32, 200, (48, 64, 80, 96, 128))]:
        t = time.perf_counter()
        quant = ldp.Quantiser(k, ldp.QuantiserConfig("hnsw", hnsw_m=m, ef_search=efs[0], ef_construction=ef_construction))
        build = time.perf_counter() - t
        for ef in efs:
            quant.index.hnsw.efSearch = ef
            row(f"HNSW M={m} efC={ef_construction} ef={ef}", quant, build)
    n = 200_000
    r, _ = rate(lambda: ldp.omega_subset(rng.integers(0, len(k), n), len(k), 4, 10.0, rng), n)
    print(f"omega-subset sampling (m=4, |K|={len(k)}): {r:,.0f} descriptors/s")


if __name__ == "__main__":
    main()
