"""Rounds of federated mini-batch k-means, plaintext or with DPHE (DPHE (ICCV 2017) supplement A.3).

Round t, as the classifiers' section 2.1 with centroids for weights: (1) the aggregator
shares C̄_t (K, D); (2) each user runs ``local_steps`` mini-batch steps on its own data
(:func:`vispriv.plugins.federated.kmeans.local_update`) and sends its sparse centroids
C_t^(n) -- in plaintext, or DPHE-encrypted (Algorithm 1 on the K x D values); (3) the
aggregator publishes C̄_{t+1} = (1/N) sum_n C_t^(n). C̄_0 is k-means++ on the public
initialisation set (the supplement: "an aggregator first runs k-means++").

Choices the supplement leaves open: each user keeps its own per-centroid counts v^(n)
(Sculley's learning rates) across rounds and never sends them; the k-means++ seed and the
users' mini-batches come from the data's ``schedule_seed`` (and t, n), so every defense of
a cell clusters the same batches from the same start (common random numbers, as
:mod:`vispriv.plugins.federated.protocol`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vispriv.harness import CellContext
from vispriv.harness.errors import InputError
from vispriv.plugins.federated import kmeans
from vispriv.plugins.federated import paillier as pl
from vispriv.plugins.federated.payloads import FederatedData, FederatedPublic
from vispriv.plugins.federated.protocol import DpheSettings, FederatedRun, Parties, sample_schedule, secure_round


@dataclass(frozen=True)
class KMeansSettings:
    """The users' local k-means (public: part of the protocol)."""

    batch_size: int = 32
    local_steps: int = 1
    lam: float = 0.0


def run_federated_kmeans(
    private: FederatedData,
    public: FederatedPublic,
    settings: KMeansSettings,
    rounds: int,
    ctx: CellContext,
    dphe: DpheSettings | None = None,
) -> FederatedRun:
    """Run ``rounds`` rounds; with ``dphe`` every user's centroids go through Algorithm 1.

    The run's ``averages`` are the published centroids (T + 1, K, D), ``updates`` the users'
    (T, N, K, D) and ``accuracy`` the adjusted mutual information of the test split per round.
    """
    if rounds < 1:
        raise InputError(f"rounds must be >= 1; got {rounds}")
    if private.multilabel:
        raise InputError("clustering needs one class per sample to score against; got multi-label attributes")
    dim = private.n_classes * private.dim
    parties = Parties.create(dim, private.n_users, dphe) if dphe is not None else None
    try:
        return _rounds(private, public, settings, rounds, ctx, parties)
    finally:
        if parties is not None:
            parties.close()


def _rounds(
    private: FederatedData,
    public: FederatedPublic,
    settings: KMeansSettings,
    rounds: int,
    ctx: CellContext,
    parties: Parties | None,
) -> FederatedRun:
    n_users, shape = private.n_users, (private.n_classes, private.dim)
    width = pl.ciphertext_bytes(parties.keygen.public_key) if parties is not None else 0
    c_bar = kmeans.seed_centroids(public.init_features, private.n_classes, private.schedule_seed, settings.lam)
    counts = np.zeros((n_users, private.n_classes))
    averages, all_updates, targets, messages_log, sparsities = [c_bar], [], [], [], []
    ami = [kmeans.adjusted_mutual_information(c_bar, private.test_features, private.test_labels)]
    enc_seconds, values_encrypted, bytes_sent, max_err = 0.0, 0, 0, 0.0

    for t in ctx.progress(range(rounds), desc="federated k-means rounds", total=rounds):
        updates, used = [], []
        for n in range(n_users):
            rows = private.rows_of(n)
            schedule = sample_schedule(private.schedule_seed, t, n)
            c_new, counts[n], local_rows = kmeans.local_update(
                c_bar, counts[n], private.features[rows], settings.batch_size, settings.local_steps, settings.lam, schedule
            )
            updates.append(c_new)
            used.append(rows[local_rows])
        updates_arr = np.stack(updates)
        sparsities.append(float(np.mean(updates_arr == 0.0)))
        plain_mean = updates_arr.mean(axis=0)
        if parties is not None:
            secure = secure_round(parties, t, updates_arr.reshape(n_users, -1), width)
            enc_seconds += secure.encryption_seconds
            values_encrypted += secure.values_encrypted
            bytes_sent += secure.bytes_sent
            c_bar = secure.mean.reshape(shape)
            max_err = max(max_err, float(np.max(np.abs(c_bar - plain_mean))))
            messages_log.append(secure.messages)
        else:
            c_bar = plain_mean
            bytes_sent += n_users * int(np.prod(shape)) * 8
        averages.append(c_bar)
        all_updates.append(updates_arr)
        targets.append(used)
        ami.append(kmeans.adjusted_mutual_information(c_bar, private.test_features, private.test_labels))

    return FederatedRun(
        averages=np.stack(averages),
        updates=np.stack(all_updates),
        targets=targets,
        accuracy=ami,
        sparsity=sparsities,
        messages=messages_log,
        modulus=int(parties.keygen.public_key.n) if parties is not None else 0,
        ciphertext_width=width,
        capacity=parties.aggregator.capacity if parties is not None else 0,
        encryption_seconds=enc_seconds,
        offline_seconds=parties.offline_seconds if parties is not None else 0.0,
        values_encrypted=values_encrypted,
        bytes_per_user_round=bytes_sent / (n_users * rounds),
        secure_max_abs_error=max_err if parties is not None else float("nan"),
        uncovered_slots=np.stack(parties.aggregator.uncovered_log) if parties is not None else np.zeros((0, 0), bool),
        permutation_groups=(
            np.arange(rounds) if parties is not None and parties.keygen.fresh_permutations else np.zeros(rounds, np.int64)
        ),
    )
