"""DPHE's encryption cost of multi-label attributes against the number of attributes L.

DPHE (ICCV 2017) section 3.3 trains one one-vs-rest row per attribute, so the weights are
(L, D + 1) and Algorithm 1 runs with M = ceil(0.1 L (D + 1)) values per shard; a user whose
update has nz non-zeros sends max(1, ceil(nz / M)) shards of M values. With the update's
density fixed, the values encrypted per user therefore grow linearly with L.

For every L the benchmark builds a SIMULATED multi-label feature problem (Gaussian features,
attribute j is the sign of a random projection plus noise; fixed seed, the same features for
every L), runs ``--rounds`` rounds of the project's own federated averaging with DPHE
(:func:`vispriv.plugins.federated.protocol.rounds.run_federated`, real Paillier keys) and reads the
costs the ``dphe`` defense reports (:func:`vispriv.plugins.defenses.dphe.dphe_costs`), per
user and round:

* values encrypted, and the cost model's count from the users' non-zeros (must be equal);
* online encryption seconds (``User.encrypt``: shard, permute, encode, one product mod n^2
  with a precomputed obfuscator) and offline seconds (the obfuscators r^n mod n^2);
* the bare ``phe`` cost in the same process: the median seconds of one
  ``paillier.PaillierPublicKey.encrypt`` of one value with this L's key, times the values
  encrypted, and each measured cost over it.

    .venv/bin/python benchmarks/dphe_attribute_cost.py [--attributes 1 2 4 8 16 32] [--dim 32]
        [--users 4] [--rounds 5] [--key-bits 512] [--seed 0] [--reg LAM]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from dataclasses import dataclass

import numpy as np
from phe import paillier

from vispriv.harness import CellContext
from vispriv.plugins.defenses.dphe import dphe_costs
from vispriv.plugins.federated.data import LabelledImages, split_users
from vispriv.plugins.federated.linear import linear
from vispriv.plugins.federated.protocol.rounds import DpheSettings, run_federated

CAPACITY_FRACTION = 0.1


def simulated_attributes(n_attributes: int, dim: int, n_samples: int, seed: int) -> LabelledImages:
    """SIMULATED features (n_samples, 1, dim) in [0, 1] with L 0/1 attributes.

    The features depend on ``seed`` only, so every L trains on the same features; attribute j
    is the sign of the projection of the features on a random direction, plus noise.
    """
    x = np.random.default_rng([seed, 0]).normal(size=(n_samples, dim))
    rng = np.random.default_rng([seed, n_attributes])
    directions = rng.normal(size=(dim, n_attributes))
    labels = (x @ directions + rng.normal(scale=0.5 * math.sqrt(dim), size=(n_samples, n_attributes)) > 0)
    strips = (x - x.min(axis=0)) / (x.max(axis=0) - x.min(axis=0))
    return LabelledImages(strips[:, None, :], labels.astype(np.int64), [f"attr{j}" for j in range(n_attributes)])


def model_values(nonzeros: np.ndarray, capacity: int) -> int:
    """The cost model's values encrypted for updates with ``nonzeros`` non-zeros each: M per shard."""
    return int(sum(max(1, math.ceil(int(nz) / capacity)) * capacity for nz in np.ravel(nonzeros)))


@dataclass
class AttributeCost:
    """One L's costs per user and round, and the bare ``phe`` encryption in the same process."""

    attributes: int
    weights: int
    capacity: int
    density: float
    values: float
    model_values: float
    online_seconds: float
    offline_seconds: float
    phe_seconds_per_value: float

    @property
    def phe_seconds(self) -> float:
        """Bare ``phe`` encryption of this user's values: seconds per value times values encrypted."""
        return self.phe_seconds_per_value * self.values


def bare_phe_seconds(public_key: paillier.PaillierPublicKey, samples: int, seed: int) -> float:
    """Median seconds of one ``phe`` encryption of one value (python-paillier's ``PublicKey.encrypt``),
    after ten untimed ones."""
    values = np.random.default_rng(seed).normal(scale=0.1, size=samples).tolist()
    for v in values[:10]:
        public_key.encrypt(v)
    times = []
    for v in values:
        start = time.perf_counter()
        public_key.encrypt(v)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def attribute_cost(
    n_attributes: int,
    dim: int = 32,
    n_users: int = 4,
    rounds: int = 5,
    key_bits: int = 512,
    seed: int = 0,
    samples_per_user: int = 60,
    phe_samples: int = 200,
    reg: float | None = None,
) -> AttributeCost:
    """Run ``rounds`` DPHE rounds on the SIMULATED problem with L = ``n_attributes`` and return the costs.

    ``reg`` is the users' elastic-net strength (default: :class:`LocalTraining`'s, whose
    updates are dense here; a larger one makes them sparse and the shards fewer).
    """
    n_samples = int(samples_per_user * n_users / 0.65) + 1
    private, public = split_users(
        simulated_attributes(n_attributes, dim, n_samples, seed),
        n_users,
        np.random.default_rng(seed),
        max_per_user=samples_per_user,
        schedule_seed=seed,
    )
    settings = DpheSettings(key_bits=key_bits, capacity_fraction=CAPACITY_FRACTION, workers=1)
    training = linear.LocalTraining() if reg is None else linear.LocalTraining(reg=reg)
    run = run_federated(private, public, training, rounds, CellContext(seed=seed, quiet=True), dphe=settings)
    costs, _ = dphe_costs(run, n_users, rounds)
    nonzeros = np.count_nonzero(run.updates.reshape(rounds, n_users, -1), axis=2)
    weights = n_attributes * (dim + 1)
    return AttributeCost(
        attributes=n_attributes,
        weights=weights,
        capacity=run.capacity,
        density=float(nonzeros.mean() / weights),
        values=costs["values_encrypted_per_user_round"],
        model_values=model_values(nonzeros, run.capacity) / (n_users * rounds),
        online_seconds=costs["encryption_seconds_per_user_round"],
        offline_seconds=costs["offline_seconds_per_user_round"],
        phe_seconds_per_value=bare_phe_seconds(paillier.PaillierPublicKey(run.modulus), phe_samples, seed),
    )


def linear_fit(xs: list[float], ys: list[float]) -> tuple[float, float, float]:
    """Least-squares line y = a x + b through the points, and its R^2."""
    a, b = np.polyfit(xs, ys, 1)
    pred = a * np.asarray(xs) + b
    resid = float(np.sum((np.asarray(ys) - pred) ** 2))
    total = float(np.sum((np.asarray(ys) - np.mean(ys)) ** 2))
    return float(a), float(b), 1.0 - resid / total if total > 0 else 1.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--attributes", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32], help="the values of L")
    ap.add_argument("--dim", type=int, default=32, help="feature dimension D")
    ap.add_argument("--users", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5, help="rounds averaged per L")
    ap.add_argument("--key-bits", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reg", type=float, default=None, help="elastic-net strength lam (default: LocalTraining's)")
    ap.add_argument("--phe-samples", type=int, default=200, help="bare phe encryptions timed per L (median)")
    args = ap.parse_args()

    print(
        f"SIMULATED multi-label features: D = {args.dim}, {args.users} users, {args.rounds} rounds per L, "
        f"{args.key_bits}-bit Paillier keys, seed {args.seed}, {os.cpu_count()} cores, obfuscators on 1 process"
    )
    print("M = ceil(0.1 L (D + 1)); values = M x max(1, ceil(nz / M)) per user; every cost is per user and round\n")
    results = [
        attribute_cost(n, args.dim, args.users, args.rounds, args.key_bits, args.seed, phe_samples=args.phe_samples,
                       reg=args.reg)
        for n in args.attributes
    ]
    base = results[0]
    print(
        f"{'L':>3} {'L(D+1)':>6} {'M':>4} {'nz/dim':>6} {'values':>7} {'model':>7} {'x L1':>6} {'val/L':>6} "
        f"{'online s':>9} {'x L1':>6} {'offline s':>9} {'x L1':>6} {'phe s/val':>9} {'phe x val':>9} "
        f"{'on/phe':>7} {'(on+off)/phe':>12}"
    )
    for r in results:
        print(
            f"{r.attributes:3d} {r.weights:6d} {r.capacity:4d} {r.density:6.3f} {r.values:7.1f} {r.model_values:7.1f} "
            f"{r.values / base.values:6.2f} {r.values / r.attributes:6.1f} "
            f"{r.online_seconds:9.5f} {r.online_seconds / base.online_seconds:6.2f} "
            f"{r.offline_seconds:9.4f} {r.offline_seconds / base.offline_seconds:6.2f} "
            f"{r.phe_seconds_per_value:9.6f} {r.phe_seconds:9.4f} "
            f"{r.online_seconds / r.phe_seconds:7.4f} {(r.online_seconds + r.offline_seconds) / r.phe_seconds:12.2f}"
        )
    ls = [float(r.attributes) for r in results]
    if len(ls) > 1:
        print()
        for name, ys in (
            ("values", [r.values for r in results]),
            ("online s", [r.online_seconds for r in results]),
            ("offline s", [r.offline_seconds for r in results]),
        ):
            a, b, r2 = linear_fit(ls, ys)
            sign = "+" if b >= 0 else "-"
            print(f"least-squares line {name:>9} = {a:.4g} L {sign} {abs(b):.4g}   R^2 = {r2:.4f}")
    exact = all(r.values == r.model_values for r in results)
    print(f"\nvalues encrypted equal the cost model's count for every L: {exact}")


if __name__ == "__main__":
    main()
