"""Rounds of federated averaging (DPHE (ICCV 2017) section 2.1, Figure 1), plaintext or with DPHE.

Round t: (1) the aggregator shares w̄_t; (2) each user updates it locally (eq. 10) and
sends w_t^(n) -- in plaintext, or DPHE-encrypted (Algorithm 1); (3) the aggregator
publishes w̄_{t+1} = (1/N) sum_n w_t^(n). w̄_0 is trained on the public initialisation set
(section 3.2). Everything runs in one process (as in the paper's own experiments,
section 3.1: "implemented in a single computer ... no transmissions"); bytes sent are
counted from the serialised messages.

Common random numbers: which sample a user's SGD step draws in round t comes from
``FederatedData.schedule_seed`` (set by the dataset from the cell's dataset seed) and
(t, n) alone, never from the defense's seed, so every defense of a scenario trains on
the same data order within a cell seed and utility differences are the defense's own.
The defense's seed (``ctx``) drives only the defense's own randomness (RA12's noise).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from vispriv.harness import CellContext
from vispriv.harness.errors import InputError
from vispriv.plugins.federated.linear import linear
from vispriv.plugins.federated.payloads import FederatedData, FederatedPublic
from vispriv.plugins.federated.protocol import paillier as pl
from vispriv.plugins.federated.protocol.roles import Aggregator, KeyGenerator, Message, User

#: A hook that perturbs a user's update (RA12's noise): (user, w_bar, w_new, rng) -> w_new.
Perturb = Callable[[int, np.ndarray, np.ndarray, np.random.Generator], np.ndarray]


@dataclass
class DpheSettings:
    """Algorithm 1's knobs: key size and encryption capacity M (section 3.1: M = ceil(0.1 D NC))."""

    key_bits: int = 1024
    capacity_fraction: float = 0.1
    workers: int | None = None
    fresh_permutations: bool = True


@dataclass
class FederatedRun:
    """Everything a defense needs to build its release, truth and utility.

    ``accuracy`` is the test score per round (round 0 is the start): classification accuracy,
    or the adjusted mutual information of a clustering run (:mod:`.cluster_rounds`).
    """

    averages: np.ndarray
    updates: np.ndarray
    targets: list[list[np.ndarray]]
    accuracy: list[float]
    sparsity: list[float]
    messages: list[list[Message]] = field(default_factory=list)
    modulus: int = 0
    ciphertext_width: int = 0
    capacity: int = 0
    encryption_seconds: float = 0.0
    offline_seconds: float = 0.0
    values_encrypted: int = 0
    bytes_per_user_round: float = 0.0
    secure_max_abs_error: float = float("nan")
    uncovered_slots: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), bool))
    permutation_groups: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


def initial_classifier(public: FederatedPublic, cfg: linear.LocalTraining) -> np.ndarray:
    """w̄_0 from the public initialisation set (section 3.2)."""
    return linear.train_full_batch(public.init_features, public.init_labels, public.n_classes, cfg, cfg.init_epochs)


def sample_schedule(schedule_seed: int, round_index: int, user: int) -> np.random.Generator:
    """The generator of user n's SGD sample choice in round t: a function of the data's seed, t and n only."""
    return np.random.default_rng([schedule_seed, round_index, user])


@dataclass
class Parties:
    """The DPHE roles of one run (absent for plaintext FedAvg); each user owns its obfuscator pool."""

    keygen: KeyGenerator
    aggregator: Aggregator
    users: list[User]

    @classmethod
    def create(cls, dim: int, n_users: int, settings: DpheSettings) -> Parties:
        capacity = max(1, min(dim, math.ceil(settings.capacity_fraction * dim)))
        keygen = KeyGenerator(dim, n_users, capacity, settings.key_bits, settings.fresh_permutations)
        keygen.start_round()
        aggregator = Aggregator(keygen.credentials_for_aggregator(), n_users)
        users = [User(keygen.credentials_for_user(n), settings.workers) for n in range(n_users)]
        return cls(keygen, aggregator, users)

    def next_round(self, t: int) -> None:
        """G opens round t (fresh permutations) and hands out this round's credentials."""
        if t > 0:
            self.keygen.start_round()
        self.aggregator.receive(self.keygen.credentials_for_aggregator())
        for n, user in enumerate(self.users):
            user.receive(self.keygen.credentials_for_user(n))

    @property
    def offline_seconds(self) -> float:
        return sum(u.offline_seconds for u in self.users)

    def close(self) -> None:
        for user in self.users:
            user.close()


@dataclass
class SecureRound:
    """One round of Algorithm 1 on flat updates: the decrypted mean and what it cost the users."""

    mean: np.ndarray
    messages: list[Message]
    encryption_seconds: float
    values_encrypted: int
    bytes_sent: int


def secure_round(parties: Parties, t: int, updates: np.ndarray, width: int) -> SecureRound:
    """Round t of Algorithm 1 on N flat updates (N, D): G opens the round, every user fills its
    own obfuscator pool (offline), encrypts (online, timed) and A averages with G's help."""
    parties.next_round(t)
    # Offline phase: each user computes its own obfuscators r^n before encrypting anything.
    for n, user in enumerate(parties.users):
        user.precompute(user.values_needed(updates[n]))
    messages: list[Message] = []
    seconds, values, sent = 0.0, 0, 0
    for n, user in enumerate(parties.users):
        start = time.perf_counter()
        msgs = user.encrypt(updates[n])
        seconds += time.perf_counter() - start
        values += sum(len(m.ciphertexts) for m in msgs)
        sent += sum(len(m.ciphertexts) * (width + 8) for m in msgs)
        messages.extend(msgs)
    return SecureRound(parties.aggregator.average(messages, parties.keygen), messages, seconds, values, sent)


@dataclass
class RoundLedger:
    """The record every federated learner keeps round by round (classifiers here, k-means in
    :mod:`.cluster_rounds`): the published averages, the users' updates and the rows each used,
    the test score per round, and what Algorithm 1 cost. :meth:`publish` averages one round's
    updates, through ``parties`` (Algorithm 1) or in plaintext; :meth:`run` is the result."""

    parties: Parties | None
    averages: list[np.ndarray]
    scores: list[float]
    updates: list[np.ndarray] = field(default_factory=list)
    targets: list[list[np.ndarray]] = field(default_factory=list)
    messages: list[list[Message]] = field(default_factory=list)
    sparsity: list[float] = field(default_factory=list)
    encryption_seconds: float = 0.0
    values_encrypted: int = 0
    bytes_sent: int = 0
    max_error: float = 0.0

    @property
    def width(self) -> int:
        """Bytes of one ciphertext (0 in plaintext)."""
        return pl.ciphertext_bytes(self.parties.keygen.public_key) if self.parties is not None else 0

    def publish(self, t: int, updates: np.ndarray, used: list[np.ndarray]) -> np.ndarray:
        """Round ``t``'s published average of the users' updates (N, *shape), recorded."""
        self.sparsity.append(float(np.mean(updates == 0.0)))
        plain_mean = updates.mean(axis=0)
        if self.parties is not None:
            secure = secure_round(self.parties, t, updates.reshape(len(updates), -1), self.width)
            self.encryption_seconds += secure.encryption_seconds
            self.values_encrypted += secure.values_encrypted
            self.bytes_sent += secure.bytes_sent
            mean = secure.mean.reshape(updates.shape[1:])
            self.max_error = max(self.max_error, float(np.max(np.abs(mean - plain_mean))))
            self.messages.append(secure.messages)
        else:
            mean = plain_mean
            self.bytes_sent += updates.size * 8
        self.averages.append(mean)
        self.updates.append(updates)
        self.targets.append(used)
        return mean

    def run(self, rounds: int, n_users: int) -> FederatedRun:
        """The rounds as one :class:`FederatedRun`."""
        parties = self.parties
        return FederatedRun(
            averages=np.stack(self.averages),
            updates=np.stack(self.updates),
            targets=self.targets,
            accuracy=self.scores,
            sparsity=self.sparsity,
            messages=self.messages,
            modulus=int(parties.keygen.public_key.n) if parties is not None else 0,
            ciphertext_width=self.width,
            capacity=parties.aggregator.capacity if parties is not None else 0,
            encryption_seconds=self.encryption_seconds,
            offline_seconds=parties.offline_seconds if parties is not None else 0.0,
            values_encrypted=self.values_encrypted,
            bytes_per_user_round=self.bytes_sent / (n_users * rounds),
            secure_max_abs_error=self.max_error if parties is not None else float("nan"),
            uncovered_slots=(np.stack(parties.aggregator.uncovered_log) if parties is not None
                             else np.zeros((0, 0), bool)),
            permutation_groups=(np.arange(rounds) if parties is not None and parties.keygen.fresh_permutations
                                else np.zeros(rounds, np.int64)),
        )


def secure_mean(updates: np.ndarray, settings: DpheSettings) -> tuple[np.ndarray, dict[str, float]]:
    """One averaging of N flat update vectors (N, D) through Algorithm 1 with fresh parties, and what it cost.

    The costs are per user: online encryption seconds, offline (obfuscator) seconds, values
    encrypted (shards padded to M), and the largest difference from the plaintext mean.
    """
    n_users = len(updates)
    vectors = np.asarray(updates, dtype=np.float64)
    parties = Parties.create(vectors.shape[1], n_users, settings)
    try:
        parties.next_round(0)
        for n, user in enumerate(parties.users):
            user.precompute(user.values_needed(vectors[n]))
        start = time.perf_counter()
        messages = [m for n, user in enumerate(parties.users) for m in user.encrypt(vectors[n])]
        encryption = time.perf_counter() - start
        secure = parties.aggregator.average(messages, parties.keygen)
        offline = parties.offline_seconds
    finally:
        parties.close()
    return secure, {
        "encryption_seconds_per_user_round": encryption / n_users,
        "offline_seconds_per_user_round": offline / n_users,
        "values_encrypted_per_user_round": sum(len(m.ciphertexts) for m in messages) / n_users,
        # Against the mean in the updates' own precision (float32 for deep models).
        "secure_sum_max_abs_error": float(np.max(np.abs(secure - np.asarray(updates).mean(axis=0)))),
    }


def run_federated(
    private: FederatedData,
    public: FederatedPublic,
    cfg: linear.LocalTraining,
    rounds: int,
    ctx: CellContext,
    dphe: DpheSettings | None = None,
    perturb: Perturb | None = None,
) -> FederatedRun:
    """Run ``rounds`` rounds; with ``dphe`` every update goes through Algorithm 1."""
    if rounds < 1:
        raise InputError(f"rounds must be >= 1; got {rounds}")
    shape = (private.n_classes, private.dim + 1)
    parties = Parties.create(int(np.prod(shape)), private.n_users, dphe) if dphe is not None else None
    try:
        return _run_rounds(private, public, cfg, rounds, ctx, parties, perturb)
    finally:
        if parties is not None:
            parties.close()


def _run_rounds(
    private: FederatedData,
    public: FederatedPublic,
    cfg: linear.LocalTraining,
    rounds: int,
    ctx: CellContext,
    parties: Parties | None,
    perturb: Perturb | None,
) -> FederatedRun:
    n_users = private.n_users
    noise_rng = ctx.rng("federated-rounds")
    w_bar = initial_classifier(public, cfg)
    ledger = RoundLedger(parties, [w_bar], [linear.accuracy(w_bar, private.test_features, private.test_labels)])

    for t in ctx.progress(range(rounds), desc="federated", total=rounds, unit="round"):
        updates, used = [], []
        for n in range(n_users):
            rows = private.rows_of(n)
            schedule = sample_schedule(private.schedule_seed, t, n)
            w_new, local_rows = linear.local_update(w_bar, private.features[rows], private.labels[rows], cfg, schedule)
            if perturb is not None:
                w_new = perturb(n, w_bar, w_new, noise_rng)
            updates.append(w_new)
            used.append(rows[local_rows])
        w_bar = ledger.publish(t, np.stack(updates), used)
        ledger.scores.append(linear.accuracy(w_bar, private.test_features, private.test_labels))
    return ledger.run(rounds, n_users)
