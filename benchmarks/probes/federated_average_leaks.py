"""Two leaks of the published average that DPHE's encryption does not cover.

1. ``isolation`` -- how often the ``average-isolation`` attack recovers a user's training
   sample from the published averages alone: per (N, reg), the share of rounds it claims
   (one-sample test passed), the share of claimed rounds whose sample is right (SSIM >
   0.99 with one of that round's targets), and the share of all (round, user) targets
   recovered with SSIM > 0.99. The averages of ``none`` and ``dphe`` are equal to < 1e-8
   (tests/federated: common random numbers), so ``--defense none`` measures the same
   leak faster; ``--defense dphe`` runs the real protocol.
2. ``slots`` -- the aggregator's candidates for the plain origin of a phi-slot
   (plugins/federated/linear/slot_leak.py) after T rounds of DPHE, permutations fixed versus
   fresh every round: mean over all D slots and over the slots it ever saw uncovered.

Digits (sklearn 8x8), ``max_per_user`` images per user, hinge loss, one SGD sample per
round, lr 0.05, one cell seed per repetition.

    .venv/bin/python benchmarks/probes/federated_average_leaks.py isolation --users 3 5 --reg 0 0.01 --rounds 40 --seeds 5
    .venv/bin/python benchmarks/probes/federated_average_leaks.py slots --rounds 40 --reg 0.01 --users 5
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from vispriv.harness import Cache, CellContext
from vispriv.plugins.attacks.average_isolation import AverageIsolation
from vispriv.plugins.defenses.dphe import Dphe
from vispriv.plugins.defenses.fedavg_plain import PlainFedAvg
from vispriv.plugins.federated.datasets import FederatedImages
from vispriv.plugins.federated.linear.linear import LocalTraining
from vispriv.plugins.federated.linear.slot_leak import origin_candidates
from vispriv.plugins.federated.protocol.rounds import DpheSettings, run_federated
from vispriv.plugins.metrics.image_quality import per_image_quality


def scene(n_users: int, per_user: int, seed: int, tmp: Path):
    ctx = CellContext(seed=seed, cache=Cache(tmp / "cache"), artifact_dir=None, quiet=True)
    cfg = FederatedImages.Config(source="digits", n_users=n_users, max_per_user=per_user)
    return FederatedImages(cfg).load(ctx), ctx


def isolation(args: argparse.Namespace, tmp: Path) -> None:
    print("| N | reg | defense | rounds claimed | claims right | targets recovered (SSIM > .99) |")
    print("|---|---|---|---|---|---|")
    for n_users in args.users:
        for reg in args.reg:
            claimed = right = recovered = targets = rounds = 0
            for seed in range(args.seeds):
                sc, ctx = scene(n_users, args.per_user, seed, tmp)
                common = dict(rounds=args.rounds, reg=reg, mode="sgd")
                defense = (
                    PlainFedAvg(PlainFedAvg.Config(**common))
                    if args.defense == "none"
                    else Dphe(Dphe.Config(key_bits=512, workers=1, **common))
                )
                protected = defense.protect(sc.private, sc.public, ctx)
                result = AverageIsolation().attack(protected.release, sc.public, ctx)
                ssim = np.array([r["ssim"] for r in per_image_quality(protected.truth["images"], result.estimate["images"])])
                ssim = ssim.reshape(args.rounds, n_users)
                hit = ssim > 0.99
                n_claimed = round(result.metrics["isolated_rounds"] * args.rounds)
                claimed += n_claimed
                right += int(hit.any(axis=1).sum())
                recovered += int(hit.sum())
                targets += hit.size
                rounds += args.rounds
            print(
                f"| {n_users} | {reg:g} | {args.defense} | {claimed}/{rounds} = {claimed / rounds:.0%} "
                f"| {right}/{claimed} | {recovered}/{targets} = {recovered / targets:.1%} |"
            )


def slots(args: argparse.Namespace, tmp: Path) -> None:
    print("| N | reg | rounds | permutations | D | mean candidates, all slots | mean, slots seen uncovered |")
    print("|---|---|---|---|---|---|---|")
    for n_users in args.users:
        for reg in args.reg:
            sc, ctx = scene(n_users, args.per_user, 0, tmp)
            for perms in ("fixed", "per-round"):
                settings = DpheSettings(key_bits=512, workers=1, fresh_permutations=perms == "per-round")
                run = run_federated(sc.private, sc.public, LocalTraining(reg=reg), args.rounds, ctx, dphe=settings)
                zero = run.averages[1:].reshape(args.rounds, -1) == 0.0
                counts = origin_candidates(run.uncovered_slots, zero, run.permutation_groups)
                seen = run.uncovered_slots[run.permutation_groups == run.permutation_groups[-1]].any(axis=0)
                print(
                    f"| {n_users} | {reg:g} | {args.rounds} | {perms} | {zero.shape[1]} | {counts.mean():.0f} "
                    f"| {counts[seen].mean():.0f} ({seen.sum()} slots) |"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["isolation", "slots"])
    parser.add_argument("--users", type=int, nargs="+", default=[3, 5])
    parser.add_argument("--reg", type=float, nargs="+", default=[0.0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--per-user", type=int, default=120)
    parser.add_argument("--defense", choices=["none", "dphe"], default="none")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        (isolation if args.what == "isolation" else slots)(args, Path(tmp))


if __name__ == "__main__":
    main()
