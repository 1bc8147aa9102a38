"""The three parties of DPHE as separate objects (DPHE (ICCV 2017) section 2, Algorithm 1).

* :class:`KeyGenerator` (G) -- makes the Paillier key pair, the user-shared (U-S)
  permutation phi and the user-aggregator (U-A) permutations phi^(n); hands each party
  only what Algorithm 1 line 2 gives it; decrypts and reorders the aggregated sum once
  per round (line 6) and nothing else (semi-honest, section 2.5). The round counter lives
  inside G: :meth:`KeyGenerator.start_round` opens a round, and G decrypts at most one
  vector per opened round whatever the caller says.
* :class:`User` (U^(n)) -- holds its data, the public key, phi, its own phi^(n), M and
  its *own* obfuscator pool (its randomness r^n: whoever holds r^n opens the ciphertext,
  so no other party ever sees it); decomposes its update w = K v (eq. 3), shards it when
  nz(w) > M (section 2.3), doubly permutes the indices Phi(K) = phi^(n) phi K (eq. 7) and
  encrypts v (lines 3-4).
* :class:`Aggregator` (A) -- holds the public key, every phi^(n) and one encryption of
  zero Enc0 made from its own randomness; never phi, the private key or a user's r^n.
  It validates every message (indices, ciphertexts, messages per user, replays), undoes
  phi^(n) (eq. 8), fills zeros with powers of Enc0 (eqs. 5-6), multiplies ciphertexts
  (eq. 4) and asks G for the sum (lines 5-6).

A permutation is an index map p: entry i of a vector moves to position p[i], so the
permuted index of i is p[i] and phi^(n) phi maps i to p_n[p[i]]. Every permutation is
drawn independently from the operating system's CSPRNG (``random.SystemRandom``, i.e.
``os.urandom``; Fisher-Yates), never from a seeded generator. Algorithm 1 averages once;
a run of T rounds is T runs of it, so by default G issues fresh phi and phi^(n) every
round (``fresh_permutations``): reusing them lets A intersect, across rounds, the slots
that no user covered with the zeros of the published averages (see
:mod:`vispriv.plugins.federated.linear.slot_leak` and docs/federated.md).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import gmpy2
import numpy as np
from phe import paillier

from vispriv.harness.errors import InputError
from vispriv.plugins.federated.protocol import paillier as pl

#: The operating system's CSPRNG (os.urandom); the only source of the protocol's permutations.
_CSPRNG = random.SystemRandom()


def secret_permutation(dim: int) -> np.ndarray:
    """A uniform permutation of range(dim) drawn from the OS CSPRNG (Fisher-Yates via ``SystemRandom.shuffle``)."""
    perm = list(range(dim))
    _CSPRNG.shuffle(perm)
    return np.asarray(perm, dtype=np.int64)


@dataclass(frozen=True)
class UserCredentials:
    """What G gives user n for one round: encryption key, phi, phi^(n), capacity M (Algorithm 1 line 2)."""

    user: int
    public_key: paillier.PaillierPublicKey
    shared_perm: np.ndarray
    own_perm: np.ndarray
    capacity: int
    n_users: int
    round_index: int


@dataclass(frozen=True)
class AggregatorCredentials:
    """What G gives A for one round: encryption key and every phi^(n) (Algorithm 1 line 2)."""

    public_key: paillier.PaillierPublicKey
    user_perms: tuple[np.ndarray, ...]
    capacity: int
    round_index: int


@dataclass
class Message:
    """One encrypted (shard of an) update: zeta(v) and Phi(K) as an index vector, for one round."""

    user: int
    ciphertexts: list[gmpy2.mpz]
    permuted_indices: np.ndarray
    modulus: int
    round_index: int


class KeyGenerator:
    """G: issues keys and permutations, decrypts only aggregated sums, one per round it opened."""

    def __init__(self, dim: int, n_users: int, capacity: int, key_bits: int, fresh_permutations: bool = True) -> None:
        if not 1 <= capacity <= dim:
            raise InputError(f"encryption capacity M must be in [1, D={dim}]; got {capacity}")
        if n_users < 1:
            raise InputError(f"DPHE needs at least one user; got {n_users}")
        self.dim, self.n_users, self.capacity = dim, n_users, capacity
        self.fresh_permutations = fresh_permutations
        self._public_key, self._private_key = pl.generate_keypair(key_bits)
        self._round = -1
        self._decrypted = True
        self._draw_permutations()

    def _draw_permutations(self) -> None:
        """phi and every phi^(n), each drawn independently from the OS CSPRNG."""
        self._shared_perm = secret_permutation(self.dim)
        self._user_perms = tuple(secret_permutation(self.dim) for _ in range(self.n_users))

    @property
    def public_key(self) -> paillier.PaillierPublicKey:
        return self._public_key

    @property
    def round_index(self) -> int:
        """The round G has open (-1 before the first)."""
        return self._round

    def start_round(self) -> int:
        """Open the next round (fresh phi and phi^(n) unless ``fresh_permutations`` is off); returns its index."""
        self._round += 1
        self._decrypted = False
        if self.fresh_permutations and self._round > 0:
            self._draw_permutations()
        return self._round

    def _require_open(self) -> None:
        if self._round < 0:
            raise InputError("no round is open; the key generator issues credentials after start_round()")

    def credentials_for_user(self, n: int) -> UserCredentials:
        self._require_open()
        if not 0 <= n < self.n_users:
            raise InputError(f"unknown user {n}; users are 0..{self.n_users - 1}")
        return UserCredentials(
            n, self._public_key, self._shared_perm, self._user_perms[n], self.capacity, self.n_users, self._round
        )

    def credentials_for_aggregator(self) -> AggregatorCredentials:
        self._require_open()
        return AggregatorCredentials(self._public_key, self._user_perms, self.capacity, self._round)

    def decrypt_and_reorder(self, permuted_sum: list[gmpy2.mpz]) -> np.ndarray:
        """w_sum from phi zeta(w_sum) (Algorithm 1 line 6): at most one request per round G opened."""
        self._require_open()
        if self._decrypted:
            raise InputError(
                f"round {self._round} was already decrypted; the key generator decrypts one aggregated sum per round"
            )
        if len(permuted_sum) != self.dim:
            raise InputError(f"expected {self.dim} aggregated ciphertexts; got {len(permuted_sum)}")
        pl.check_ciphertexts(permuted_sum, self._public_key, "key generator")
        self._decrypted = True
        values = pl.decrypt_decode(permuted_sum, self._private_key)
        return values[self._shared_perm]


class User:
    """U^(n): decomposes, shards, doubly permutes and encrypts its update with its own randomness."""

    def __init__(self, credentials: UserCredentials, workers: int | None = 1) -> None:
        self.index = credentials.user
        self.public_key = credentials.public_key
        self.credentials = credentials
        self._pool = pl.ObfuscatorPool(credentials.public_key, workers)

    def receive(self, credentials: UserCredentials) -> None:
        """This round's phi and phi^(n) from G."""
        if credentials.user != self.index or credentials.public_key != self.public_key:
            raise InputError(f"credentials for user {credentials.user} handed to user {self.index}")
        self.credentials = credentials

    def close(self) -> None:
        self._pool.close()

    @property
    def max_messages(self) -> int:
        """Upper bound on messages per round from all users (for the encoding's overflow bound)."""
        c = self.credentials
        return c.n_users * math.ceil(len(c.shared_perm) / c.capacity)

    def values_needed(self, w: np.ndarray) -> int:
        """How many values (hence obfuscators) encrypting ``w`` takes: M per shard."""
        nz = int(np.count_nonzero(w))
        return max(1, math.ceil(nz / self.credentials.capacity)) * self.credentials.capacity

    def precompute(self, count: int) -> float:
        """The offline phase: fill this user's own pool up to ``count`` obfuscators; returns seconds spent."""
        return self._pool.fill(count - len(self._pool))

    @property
    def offline_seconds(self) -> float:
        return self._pool.offline_seconds

    def decompose(self, w: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Shards (indices, values) of exactly M entries each with sum_f w^(n,f) = w (eq. 3, section 2.3).

        Each shard holds at most M non-zeros, padded with zeros at random positions so
        that every message carries M values and nz(w) stays hidden.
        """
        w = np.asarray(w, dtype=np.float64).reshape(-1)
        dim, cap = len(w), self.credentials.capacity
        if dim != len(self.credentials.shared_perm):
            raise InputError(f"update has {dim} entries but the protocol's dimension is {len(self.credentials.shared_perm)}")
        nz = np.flatnonzero(w).tolist()
        _CSPRNG.shuffle(nz)
        chunks = [nz[i : i + cap] for i in range(0, len(nz), cap)] or [nz]
        shards = []
        for chunk in chunks:
            free = np.setdiff1d(np.arange(dim), np.asarray(chunk, np.int64), assume_unique=True).tolist()
            idx = chunk + _CSPRNG.sample(free, cap - len(chunk))
            _CSPRNG.shuffle(idx)
            idx_arr = np.asarray(idx, dtype=np.int64)
            vals = np.where(np.isin(idx_arr, chunk), w[idx_arr], 0.0)
            shards.append((idx_arr, vals))
        return shards

    def encrypt(self, w: np.ndarray) -> list[Message]:
        """zeta(v^(n,f)) and Phi(K^(n,f)) for every shard (Algorithm 1 lines 3-4)."""
        w = np.asarray(w, dtype=np.float64).reshape(-1)
        if not np.all(np.isfinite(w)):
            raise InputError(f"user {self.index}'s update contains NaN or infinite values; cannot encrypt it")
        c = self.credentials
        messages = []
        for idx, vals in self.decompose(w):
            enc = pl.encode(vals, self.public_key, max_summands=self.max_messages)
            cts = pl.encrypt_encoded(enc, self.public_key, self._pool.take(len(enc)))
            messages.append(
                Message(self.index, cts, c.own_perm[c.shared_perm[idx]], int(self.public_key.n), c.round_index)
            )
        return messages


class Aggregator:
    """A: averages encrypted, doubly permuted updates without the private key, phi or any user's randomness."""

    def __init__(self, credentials: AggregatorCredentials, n_users: int) -> None:
        self.public_key = credentials.public_key
        self.n_users = n_users
        self.capacity = credentials.capacity
        self.dim = len(credentials.user_perms[0])
        self.max_messages_per_user = math.ceil(self.dim / self.capacity)
        #: Per round, the phi-slots no user covered: A's own intermediate result, which a
        #: semi-honest party keeps (section 2.5); see :mod:`vispriv.plugins.federated.linear.slot_leak`.
        self.uncovered_log: list[np.ndarray] = []
        self.receive(credentials)
        # Enc0 (eq. 5) from A's own randomness: r_A^n, never one of a user's obfuscators.
        (self._enc0,) = pl.encrypt_encoded([0], self.public_key, [gmpy2.mpz(v) for v in pl.fresh_obfuscators(int(self.public_key.n), 1)])

    def receive(self, credentials: AggregatorCredentials) -> None:
        """This round's phi^(n) from G."""
        if credentials.public_key != self.public_key or len(credentials.user_perms) != self.n_users:
            raise InputError("aggregator credentials for another key or another number of users")
        self.round_index = credentials.round_index
        self._inverse_user_perms = tuple(np.argsort(p) for p in credentials.user_perms)

    def enc0(self) -> gmpy2.mpz:
        """Enc0: one encryption of zero (eq. 5)."""
        return self._enc0

    def check(self, message: Message) -> None:
        """One message: this key, a known user, this round, M indices in [0, D) and M valid ciphertexts."""
        if message.modulus != int(self.public_key.n):
            raise InputError(
                f"message from user {message.user} is encrypted under a {message.modulus.bit_length()}-bit key "
                f"that is not the protocol's {int(self.public_key.n).bit_length()}-bit key"
            )
        if not 0 <= message.user < self.n_users:
            raise InputError(f"message from unknown user {message.user}; users are 0..{self.n_users - 1}")
        if message.round_index != self.round_index:
            raise InputError(
                f"message from user {message.user} belongs to round {message.round_index}; this is round {self.round_index}"
            )
        idx = np.asarray(message.permuted_indices)
        if len(message.ciphertexts) != len(idx) or len(idx) != self.capacity:
            raise InputError(f"every message must carry M={self.capacity} ciphertexts and indices")
        if idx.dtype.kind not in "iu" or idx.ndim != 1:
            raise InputError(f"message from user {message.user}: permuted indices must be a vector of integers")
        bad = idx[(idx < 0) | (idx >= self.dim)]
        if len(bad):
            raise InputError(
                f"message from user {message.user} has permuted index {int(bad[0])}; allowed are 0 <= i < D={self.dim}"
            )
        pl.check_ciphertexts(message.ciphertexts, self.public_key, f"message from user {message.user}")

    def check_round(self, messages: list[Message]) -> None:
        """A round's messages: every user sends 1..ceil(D/M) of them and no ciphertext arrives twice (a replay)."""
        counts = np.bincount([m.user for m in messages if 0 <= m.user < self.n_users], minlength=self.n_users)
        for user, count in enumerate(counts.tolist()):
            if not 1 <= count <= self.max_messages_per_user:
                raise InputError(
                    f"user {user} sent {count} messages this round; allowed are 1..ceil(D/M) = {self.max_messages_per_user}"
                )
        seen: set[int] = set()
        for m in messages:
            for c in m.ciphertexts:
                if int(c) in seen:
                    raise InputError(
                        f"message from user {m.user} repeats a ciphertext already received this round (a replay); "
                        "every ciphertext carries fresh randomness and is summed once"
                    )
                seen.add(int(c))

    def unpermute(self, message: Message) -> np.ndarray:
        """phi K^(n) = (phi^(n))^T Phi(K^(n)) as positions (eq. 8): what A learns of the support, in phi-space."""
        return self._inverse_user_perms[message.user][np.asarray(message.permuted_indices)]

    def encrypted_permuted_sum(self, messages: list[Message]) -> list[gmpy2.mpz]:
        """phi zeta(w_sum) = prod_n (Y^(n) + Enc0 Z^(n)) (eqs. 4-6, with eq. 8 for phi K)."""
        for msg in messages:
            self.check(msg)
        self.check_round(messages)
        n2 = gmpy2.mpz(self.public_key.nsquare)
        acc = [gmpy2.mpz(1)] * self.dim
        zeros = np.full(self.dim, len(messages), dtype=np.int64)
        for msg in messages:
            positions = self.unpermute(msg)
            if len(np.unique(positions)) != len(positions):
                raise InputError(f"message from user {msg.user} repeats an index; K must have one 1 per row")
            for p, c in zip(positions.tolist(), msg.ciphertexts):
                acc[p] = (acc[p] * c) % n2
            zeros[positions] -= 1
        self.uncovered_log.append(zeros == len(messages))
        enc0 = self.enc0()
        return [(a * gmpy2.powmod(enc0, int(z), n2)) % n2 if z else a for a, z in zip(acc, zeros.tolist())]

    def average(self, messages: list[Message], keygen: KeyGenerator) -> np.ndarray:
        """w̄ = w_sum / N with G's help (Algorithm 1 lines 5-6)."""
        return keygen.decrypt_and_reorder(self.encrypted_permuted_sum(messages)) / self.n_users
