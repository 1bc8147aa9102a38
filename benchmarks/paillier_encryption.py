"""Paillier encryption cost of one user's update: plain ``phe`` versus the DPHE fast path.

Prints, in one run and one process:
* ms per value with plain ``phe`` + gmpy2 (``public_key.encrypt``), the baseline;
* the offline cost per value of obfuscators r^n mod n^2 (pool filled on 1 core and on
  all cores, wall-clock);
* the online cost per value (fixed-point encoding + one product mod n^2) and its ratio
  to the baseline;
* for D = 2048 features x 101 classes (DPHE (ICCV 2017) Table 2) at 0 %, 80 % and 95 % sparsity
  with M = ceil(0.1 D NC): values encrypted (shards x M), the *measured* online time of
  the whole update, and offline / plain-phe totals *extrapolated* from the per-value
  costs above (state so when quoting them; pass --full to measure the offline pool for
  the 95 % case too).

The online timing of the full update cycles a pool of real obfuscators because the cost
of a product mod n^2 does not depend on which obfuscator it uses; a real run must never
reuse one (the protocol code never does).

    .venv/bin/python benchmarks/paillier_encryption.py [--bits 1024] [--full]
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np

from vispriv.plugins.federated.protocol import paillier as pl


def per_value(fn, count: int) -> float:
    start = time.perf_counter()
    fn(count)
    return (time.perf_counter() - start) / count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bits", type=int, default=1024)
    ap.add_argument("--baseline-values", type=int, default=300)
    ap.add_argument("--pool-values", type=int, default=2000)
    ap.add_argument("--full", action="store_true", help="also fill a real pool for the 95%% update")
    args = ap.parse_args()

    pk, sk = pl.generate_keypair(args.bits)
    cores = os.cpu_count() or 1
    rng = np.random.default_rng(0)
    print(f"key {args.bits} bits, {cores} cores")

    values = rng.normal(size=args.baseline_values)
    t_phe = per_value(lambda k: [pk.encrypt(float(v)) for v in values[:k]], args.baseline_values)

    one = pl.ObfuscatorPool(pk, workers=1)
    t_off_1 = per_value(one.fill, args.baseline_values)
    with pl.ObfuscatorPool(pk, workers=cores) as allc:
        t_off_all = per_value(allc.fill, args.pool_values)
        obf = allc.take(args.pool_values)

    v = rng.normal(size=args.pool_values)
    enc = pl.encode(v, pk)
    t_mul = per_value(lambda k: pl.encrypt_encoded(enc[:k], pk, obf[:k]), args.pool_values)
    t_online = per_value(lambda k: pl.encrypt_encoded(pl.encode(v[:k], pk), pk, obf[:k]), args.pool_values)
    check = pl.decrypt_decode(pl.encrypt_encoded(pl.encode(v[:5], pk), pk, obf[:5]), sk)
    assert np.allclose(check, v[:5], atol=1e-9)

    print(f"plain phe.encrypt              {t_phe * 1e3:8.3f} ms/value   (baseline)")
    print(f"offline r^n, 1 core            {t_off_1 * 1e3:8.3f} ms/value   ratio {t_off_1 / t_phe:6.2f}x baseline")
    print(f"offline r^n, {cores:2d} cores (wall)   {t_off_all * 1e3:8.3f} ms/value   ratio {t_off_all / t_phe:6.2f}x baseline")
    print(f"online product only            {t_mul * 1e6:8.2f} us/value   {t_phe / t_mul:8.0f}x faster than baseline")
    print(f"online encode + product        {t_online * 1e6:8.2f} us/value   {t_phe / t_online:8.0f}x faster than baseline")

    d, classes = 2048, 101
    dim = d * classes
    cap = math.ceil(0.1 * dim)
    print(f"\nD={d}, {classes} classes: {dim} weights, M={cap}")
    print("sparsity  values  online(measured)  offline 1 core(extrap.)  offline all cores(extrap.)  plain phe(extrap.)")
    for sp in (0.0, 0.8, 0.95):
        nz = int(round((1 - sp) * dim))
        n_values = max(1, math.ceil(nz / cap)) * cap
        w = rng.normal(size=n_values)
        cyc = [obf[i % len(obf)] for i in range(n_values)]
        start = time.perf_counter()
        pl.encrypt_encoded(pl.encode(w, pk), pk, cyc)
        online = time.perf_counter() - start
        print(
            f"{sp * 100:6.0f} %  {n_values:7d}  {online:10.2f} s      {n_values * t_off_1:12.1f} s"
            f"            {n_values * t_off_all:12.1f} s               {n_values * t_phe:10.1f} s"
        )
    if args.full:
        n_values = cap
        with pl.ObfuscatorPool(pk, workers=cores) as pool:
            start = time.perf_counter()
            pool.fill(n_values)
            print(f"\n--full: measured offline pool for the 95 % update ({n_values} values, {cores} cores): "
                  f"{time.perf_counter() - start:.1f} s")
    print("\npaper (Table 2, one 2017 core, plain phe): 620 s / 186 s / 62 s at 0 / 79 / 96 % sparsity")


if __name__ == "__main__":
    main()
