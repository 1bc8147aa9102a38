"""Rounds of federated mini-batch k-means, plaintext or with DPHE (DPHE (ICCV 2017) supplement A.3).

Round t, as the classifiers' section 2.1 with centroids for weights: (1) the aggregator
shares C̄_t (K, D); (2) each user runs ``local_steps`` mini-batch steps on its own data
(:func:`vispriv.plugins.federated.clustering.kmeans.local_update`) and sends its sparse centroids
C_t^(n) -- in plaintext, or DPHE-encrypted (Algorithm 1 on the K x D values); (3) the
aggregator publishes C̄_{t+1} = (1/N) sum_n C_t^(n). C̄_0 is k-means++ on the public
initialisation set (the supplement: "an aggregator first runs k-means++").

Choices the supplement leaves open: each user keeps its own per-centroid counts v^(n)
(Sculley's learning rates) across rounds and never sends them; the k-means++ seed and the
users' mini-batches come from the data's ``schedule_seed`` (and t, n), so every defense of
a cell clusters the same batches from the same start (common random numbers, as
:mod:`vispriv.plugins.federated.protocol.rounds`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vispriv.harness import CellContext
from vispriv.harness.errors import InputError
from vispriv.plugins.federated.clustering import kmeans
from vispriv.plugins.federated.payloads import FederatedData, FederatedPublic
from vispriv.plugins.federated.protocol.rounds import DpheSettings, FederatedRun, Parties, RoundLedger, sample_schedule


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
    n_users = private.n_users
    c_bar = kmeans.seed_centroids(public.init_features, private.n_classes, private.schedule_seed, settings.lam)
    counts = np.zeros((n_users, private.n_classes))
    ledger = RoundLedger(parties, [c_bar], [kmeans.adjusted_mutual_information(c_bar, private.test_features,
                                                                                private.test_labels)])

    for t in ctx.progress(range(rounds), desc="federated k-means", total=rounds, unit="round"):
        updates, used = [], []
        for n in range(n_users):
            rows = private.rows_of(n)
            schedule = sample_schedule(private.schedule_seed, t, n)
            c_new, counts[n], local_rows = kmeans.local_update(
                c_bar, counts[n], private.features[rows], settings.batch_size, settings.local_steps, settings.lam, schedule
            )
            updates.append(c_new)
            used.append(rows[local_rows])
        c_bar = ledger.publish(t, np.stack(updates), used)
        ledger.scores.append(kmeans.adjusted_mutual_information(c_bar, private.test_features, private.test_labels))
    return ledger.run(rounds, n_users)
