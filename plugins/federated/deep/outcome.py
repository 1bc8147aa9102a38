"""Truth, release and utility of a deep federated run (what every deep defense returns)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from vispriv.harness import CellContext, Images, Labels, Protected
from vispriv.harness.artifacts import save_csv
from vispriv.plugins.federated.deep.payloads import (
    CapturedUpdate,
    DeepFederatedData,
    DeepFederatedPublic,
    DeepPlaintextUpdates,
    DeepRelease,
    batch_truth_ids,
    require_deep_public,
)

if TYPE_CHECKING:
    from vispriv.plugins.federated.deep.rounds import DeepRun, LocalFn, ProtectFn


def deep_protocol(private: DeepFederatedData, public: DeepFederatedPublic, **extra: Any) -> dict[str, Any]:
    """The public protocol of the attacked round (copied into every release)."""
    return {**public.work, "n_users": private.n_users, "batch_size": private.batch_size, **extra}


def deep_truth(private: DeepFederatedData) -> dict[str, Images | Labels]:
    """Each user's attacked batch (round 0), with ids ``u{n}-i{k}`` and the user as the set."""
    ids = batch_truth_ids(private)
    rows = np.concatenate([private.batch_rows(n, 0) for n in range(private.n_users)])
    flat = [i for user in ids for i in user]
    sets = [f"u{n}" for n, user in enumerate(ids) for _ in user]
    return {
        "images": Images(private.images[rows], flat, sets=sets),
        "labels": Labels(private.labels[rows], flat, sets=sets),
    }


def deep_protected(
    private: DeepFederatedData,
    run: DeepRun,
    release: DeepRelease,
    ctx: CellContext,
    extra_utility: dict[str, float] | None = None,
    extra_directions: dict[str, bool] | None = None,
) -> Protected:
    """The defense's return value: release, truth, and utility (test accuracy after the rounds)."""
    if ctx.artifact_dir is not None:
        save_csv(ctx.artifact("accuracy_per_round.csv"), [{"round": t, "accuracy": a} for t, a in enumerate(run.accuracy)])
    utility = {
        "test_accuracy": float(run.accuracy[-1]),
        "test_accuracy_init": float(run.accuracy[0]),
        "update_sparsity": run.sparsity(),
        "bytes_per_user_round": float(run.sent.shape[1] * 4),
        **(extra_utility or {}),
    }
    directions = {
        "test_accuracy": True,
        "test_accuracy_init": True,
        "update_sparsity": True,
        "bytes_per_user_round": False,
        **(extra_directions or {}),
    }
    return Protected(release, deep_truth(private), utility, directions)


def deep_plaintext_protected(
    private: DeepFederatedData,
    public: object,
    rounds: int,
    ctx: CellContext,
    local: LocalFn | None = None,
    protect: ProtectFn | None = None,
    protocol_extra: dict[str, Any] | None = None,
    utility: dict[str, float] | None = None,
    directions: dict[str, bool] | None = None,
) -> Protected:
    """Run the rounds with a defense's hooks and release every user's update as sent (plaintext
    FedAvg, pruning, DP-SGD): the shared body of the defenses whose aggregator sees each update."""
    from vispriv.plugins.federated.deep.rounds import plain_local, run_deep_rounds

    deep_public = require_deep_public(public)
    run = run_deep_rounds(private, deep_public, rounds, ctx, local=local or plain_local, protect=protect)
    release = DeepPlaintextUpdates(
        protocol=deep_protocol(private, deep_public, **(protocol_extra or {})),
        target_ids=batch_truth_ids(private),
        updates=run.sent,
    )
    return deep_protected(private, run, release, ctx, utility, directions)


def captured_protected(private: CapturedUpdate, public: DeepFederatedPublic) -> Protected:
    """A captured update released as it was sent (one user), with the true batch as truth when given."""
    ids = [f"u0-i{k}" for k in range(private.batch_size)]
    release = DeepPlaintextUpdates(
        protocol={**public.work, "n_users": 1, "batch_size": private.batch_size},
        target_ids=[ids],
        updates=private.update[None, :],
    )
    truth: dict[str, Images | Labels] = {}
    if len(private.images):
        sets = ["u0"] * len(ids)
        truth = {"images": Images(private.images, ids, sets=sets), "labels": Labels(private.labels, ids, sets=sets)}
    return Protected(release, truth, {}, {})
