"""Calibrate |V| and |U| of the database attack (LDP-Feat (ICCV 2023) section 4.1) on photos the attacker owns.

The paper fixes neither |V| (the W rows nearest to D after the adversarial ones) nor |U|
(how many of them, the farthest from the adversarial rows, enter Eq. (1)). An attacker
who holds W can choose them without any private image: lift descriptors of its own
photos with W exactly as the defense does (sub-hybrid, m), run the attack for each
(|V|, |U|) and keep the pair with the smallest error. This script does that on the bundled
``public`` split -- disjoint from W's ``lifting`` photos and from the private ``test``
photos -- and prints, per m, the mean L2 distance between the L2-normalised estimate and
the true descriptor, and its ratio to the paper-sized baseline (|V| 16, |U| 4) measured in
the same run. ``--split test`` repeats it on the private photos as a check only.

    .venv/bin/python benchmarks/probes/database_attack_calibration.py --w-size 4096 --m 2,4,8
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np

from vispriv.harness import Cache
from vispriv.plugins.descriptor_release.config import SiftConfig
from vispriv.plugins.descriptor_release.dictionary import build_dictionary
from vispriv.plugins.descriptor_release.recovery import database_attack
from vispriv.plugins.descriptor_release.sift import extract_features, l2_normalise
from vispriv.plugins.descriptor_release.splits import load_split
from vispriv.plugins.descriptor_release.subspace import lift_features, n_adversarial

BASELINE = (16, 4)


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", default="public", choices=["public", "test"])
    ap.add_argument("--side", type=int, default=320, help="photo side (Table 1's photos are 320 px)")
    ap.add_argument("--max-keypoints", type=int, default=2048)
    ap.add_argument("--w-size", type=int, default=4096)
    ap.add_argument("--m", default="2,4,8")
    ap.add_argument("--v", default="16,64,128,256,512,1024")
    ap.add_argument("--u", default="1,2,4,8")
    ap.add_argument("--cache-dir", default=None)
    args = ap.parse_args()

    cache = Cache(args.cache_dir)
    sift = SiftConfig(max_keypoints=args.max_keypoints)
    w = build_dictionary(load_split("lifting", args.side), args.w_size, sift, 0, 3, 20, cache)
    raw = extract_features(load_split(args.split, args.side), sift, cache)
    truth = l2_normalise(raw.descriptors).astype(np.float64)
    print(f"split {args.split}: {raw.n_keypoints} descriptors; W {len(w)} rows (lifting photos)")
    for m in _ints(args.m):
        release, _ = lift_features(raw, m, "sub-hybrid", 123, w, True)
        n_adv = n_adversarial(m, "sub-hybrid")

        def error(v: int, u: int, release=release, n_adv=n_adv) -> float:
            est = database_attack(w, release.offsets, release.bases, n_adv, v, u).estimates
            return float(np.linalg.norm(l2_normalise(est) - truth, axis=1).mean())

        base = error(*BASELINE)
        print(f"\nm = {m} (sub-hybrid, {n_adv} adversarial rows): baseline |V| {BASELINE[0]} |U| {BASELINE[1]} L2 {base:.3f}")
        print("| |V| | |U| | mean L2 | / baseline |")
        print("|---|---|---|---|")
        for v, u in itertools.product(_ints(args.v), _ints(args.u)):
            if u <= v and n_adv + v <= len(w):
                e = error(v, u)
                print(f"| {v} | {u} | {e:.3f} | {e / base:.2f} |", flush=True)


if __name__ == "__main__":
    main()
