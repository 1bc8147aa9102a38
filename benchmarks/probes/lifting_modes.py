"""Database and clustering attacks in every lifting mode, with the adversarial-row count the
release implies versus the old default floor(m/2).

Per mode: median cosine of the estimate with the true descriptor, and the share of
estimates that *are* an adversarial row (cosine > 0.99 with one of them). Bundled images
(``size`` px), W and Z of ``database_size`` rows, m = ``--m``.

    .venv/bin/python benchmarks/probes/lifting_modes.py --m 4 --size 96 --database-size 256
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from vispriv.harness import Cache, CellContext
from vispriv.plugins.attacks.clustering import ClusteringAttack
from vispriv.plugins.attacks.database import DatabaseAttack
from vispriv.plugins.defenses.affine_lifting import AffineLifting
from vispriv.plugins.descriptor_release.datasets import BundledImages


def quality(estimate: np.ndarray, truth: np.ndarray, adversarial: np.ndarray) -> tuple[float, float]:
    est = estimate / np.linalg.norm(estimate, axis=1, keepdims=True)
    adv = adversarial / np.linalg.norm(adversarial, axis=2, keepdims=True)
    is_row = np.einsum("kd,kad->ka", est, adv).max(axis=1) > 0.99 if adv.shape[1] else np.zeros(len(est), bool)
    return float(np.median(np.sum(est * truth, axis=1))), float(is_row.mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=4)
    parser.add_argument("--size", type=int, default=96)
    parser.add_argument("--database-size", type=int, default=256)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ctx = CellContext(seed=0, cache=Cache(Path(tmp) / "cache"), artifact_dir=None, quiet=True)
        scene = BundledImages(BundledImages.Config(size=args.size)).load(ctx)
        z = dict(database_size=args.database_size, database_augment=1)
        print("| mode | attack | n_adv | median cosine with d | share = an adversarial row |")
        print("|---|---|---|---|---|")
        for mode in ("random", "adversarial", "hybrid", "sub-hybrid"):
            cfg = AffineLifting.Config(mode=mode, m=args.m, database_size=args.database_size, database_augment=1, utility=False)
            lifted = AffineLifting(cfg).protect(scene.private, scene.public, ctx)
            truth = lifted.truth["descriptors"].descriptors
            adv = lifted.truth["lifting"].adversarial
            for count, label in ((None, "from the release"), (args.m // 2, "floor(m/2) (old default)")):
                attacks = [ClusteringAttack(ClusteringAttack.Config(n_adversarial=count, **z))]
                if lifted.release.database is not None:
                    attacks.insert(0, DatabaseAttack(DatabaseAttack.Config(n_adversarial=count)))
                for attack in attacks:
                    est = attack.attack(lifted.release, scene.public, ctx).estimate["descriptors"].descriptors
                    cos, share = quality(est, truth, adv)
                    print(f"| {mode} | {attack.name} | {label} | {cos:.3f} | {share:.2f} |")


if __name__ == "__main__":
    main()
