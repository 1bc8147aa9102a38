"""The three parties of DPHE as separate objects (dphe.md section 2, Algorithm 1).

* :class:`KeyGenerator` (G) -- makes the Paillier key pair, the user-shared (U-S)
  permutation phi and the user-aggregator (U-A) permutations phi^(n); hands each party
  only what Algorithm 1 line 2 gives it; decrypts and reorders the aggregated sum once
  per round (line 6) and nothing else (semi-honest, section 2.5).
* :class:`User` (U^(n)) -- holds its data, the public key, phi, its own phi^(n) and M;
  decomposes its update w = K v (eq. 3), shards it when nz(w) > M (section 2.3), doubly
  permutes the indices Phi(K) = phi^(n) phi K (eq. 7) and encrypts v (lines 3-4).
* :class:`Aggregator` (A) -- holds the public key and every phi^(n), never phi nor the
  private key; undoes phi^(n) (eq. 8), fills zeros with one encryption of zero Enc0
  (eqs. 5-6), multiplies ciphertexts (eq. 4) and asks G for the sum (line 5-6).

A permutation is an index map p: entry i of a vector moves to position p[i], so the
permuted index of i is p[i] and phi^(n) phi maps i to p_n[p[i]]. Permutations are drawn
from a cryptographically seeded generator, not from the cell's seed (which is logged).
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass

import gmpy2
import numpy as np
from phe import paillier

from vispriv.harness.errors import InputError
from vispriv.plugins.federated import paillier as pl


def _secret_rng() -> np.random.Generator:
    return np.random.default_rng(secrets.randbits(128))


@dataclass(frozen=True)
class UserCredentials:
    """What G gives user n: encryption key, phi, phi^(n), capacity M (Algorithm 1 line 2)."""

    user: int
    public_key: paillier.PaillierPublicKey
    shared_perm: np.ndarray
    own_perm: np.ndarray
    capacity: int
    n_users: int


@dataclass(frozen=True)
class AggregatorCredentials:
    """What G gives A: encryption key and every phi^(n) (Algorithm 1 line 2)."""

    public_key: paillier.PaillierPublicKey
    user_perms: tuple[np.ndarray, ...]
    capacity: int


@dataclass
class Message:
    """One encrypted (shard of an) update: zeta(v) and Phi(K) as an index vector."""

    user: int
    ciphertexts: list[gmpy2.mpz]
    permuted_indices: np.ndarray
    modulus: int


class KeyGenerator:
    """G: issues keys and permutations, decrypts only aggregated sums."""

    def __init__(self, dim: int, n_users: int, capacity: int, key_bits: int) -> None:
        if not 1 <= capacity <= dim:
            raise InputError(f"encryption capacity M must be in [1, D={dim}]; got {capacity}")
        self.dim, self.n_users, self.capacity = dim, n_users, capacity
        self._public_key, self._private_key = pl.generate_keypair(key_bits)
        rng = _secret_rng()
        self._shared_perm = rng.permutation(dim)
        self._user_perms = tuple(rng.permutation(dim) for _ in range(n_users))
        self._decrypted_rounds: set[int] = set()

    @property
    def public_key(self) -> paillier.PaillierPublicKey:
        return self._public_key

    def credentials_for_user(self, n: int) -> UserCredentials:
        return UserCredentials(n, self._public_key, self._shared_perm, self._user_perms[n], self.capacity, self.n_users)

    def credentials_for_aggregator(self) -> AggregatorCredentials:
        return AggregatorCredentials(self._public_key, self._user_perms, self.capacity)

    def decrypt_and_reorder(self, permuted_sum: list[gmpy2.mpz], round_index: int) -> np.ndarray:
        """w_sum from phi zeta(w_sum) (Algorithm 1 line 6); one request per round."""
        if round_index in self._decrypted_rounds:
            raise InputError(f"round {round_index} was already decrypted; G decrypts one aggregated sum per round")
        if len(permuted_sum) != self.dim:
            raise InputError(f"expected {self.dim} aggregated ciphertexts; got {len(permuted_sum)}")
        self._decrypted_rounds.add(round_index)
        values = pl.decrypt_decode(permuted_sum, self._private_key)
        return values[self._shared_perm]


class User:
    """U^(n): decomposes, shards, doubly permutes and encrypts its update."""

    def __init__(self, credentials: UserCredentials) -> None:
        self.credentials = credentials
        self.index = credentials.user
        self.public_key = credentials.public_key
        self._rng = _secret_rng()

    @property
    def max_messages(self) -> int:
        """Upper bound on messages per round from all users (for the encoding's overflow bound)."""
        c = self.credentials
        return c.n_users * math.ceil(len(c.shared_perm) / c.capacity)

    def values_needed(self, w: np.ndarray) -> int:
        """How many values (hence obfuscators) encrypting ``w`` takes: M per shard."""
        nz = int(np.count_nonzero(w))
        return max(1, math.ceil(nz / self.credentials.capacity)) * self.credentials.capacity

    def decompose(self, w: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Shards (indices, values) of exactly M entries each with sum_f w^(n,f) = w (eq. 3, section 2.3).

        Each shard holds at most M non-zeros, padded with zeros at random positions so
        that every message carries M values and nz(w) stays hidden.
        """
        w = np.asarray(w, dtype=np.float64).reshape(-1)
        dim, cap = len(w), self.credentials.capacity
        if dim != len(self.credentials.shared_perm):
            raise InputError(f"update has {dim} entries but the protocol's dimension is {len(self.credentials.shared_perm)}")
        nz = self._rng.permutation(np.flatnonzero(w))
        chunks = [nz[i : i + cap] for i in range(0, len(nz), cap)] or [nz]
        shards = []
        for chunk in chunks:
            free = np.setdiff1d(np.arange(dim), chunk, assume_unique=True)
            pad = self._rng.choice(free, size=cap - len(chunk), replace=False)
            idx = self._rng.permutation(np.concatenate([chunk, pad]).astype(np.int64))
            vals = np.where(np.isin(idx, chunk), w[idx], 0.0)
            shards.append((idx, vals))
        return shards

    def encrypt(self, w: np.ndarray, pool: pl.ObfuscatorPool) -> list[Message]:
        """zeta(v^(n,f)) and Phi(K^(n,f)) for every shard (Algorithm 1 lines 3-4)."""
        w = np.asarray(w, dtype=np.float64).reshape(-1)
        if not np.all(np.isfinite(w)):
            raise InputError(f"user {self.index}'s update contains NaN or infinite values; cannot encrypt it")
        c = self.credentials
        messages = []
        for idx, vals in self.decompose(w):
            enc = pl.encode(vals, self.public_key, max_summands=self.max_messages)
            cts = pl.encrypt_encoded(enc, self.public_key, pool.take(len(enc)))
            messages.append(Message(self.index, cts, c.own_perm[c.shared_perm[idx]], int(self.public_key.n)))
        return messages


class Aggregator:
    """A: averages encrypted, doubly permuted updates without the private key or phi."""

    def __init__(self, credentials: AggregatorCredentials, n_users: int, pool: pl.ObfuscatorPool) -> None:
        self.public_key = credentials.public_key
        self.n_users = n_users
        self.capacity = credentials.capacity
        self._inverse_user_perms = tuple(np.argsort(p) for p in credentials.user_perms)
        self.dim = len(credentials.user_perms[0])
        self._pool = pool
        self._enc0: gmpy2.mpz | None = None

    def enc0(self) -> gmpy2.mpz:
        """Enc0: one encryption of zero, computed once (eq. 5)."""
        if self._enc0 is None:
            self._enc0 = pl.encrypt_encoded([0], self.public_key, self._pool.take(1))[0]
        return self._enc0

    def check(self, message: Message) -> None:
        if message.modulus != int(self.public_key.n):
            raise InputError(
                f"message from user {message.user} is encrypted under a {message.modulus.bit_length()}-bit key "
                f"that is not the protocol's {int(self.public_key.n).bit_length()}-bit key"
            )
        if not 0 <= message.user < self.n_users:
            raise InputError(f"message from unknown user {message.user}; users are 0..{self.n_users - 1}")
        if len(message.ciphertexts) != len(message.permuted_indices) or len(message.ciphertexts) != self.capacity:
            raise InputError(f"every message must carry M={self.capacity} ciphertexts and indices")

    def encrypted_permuted_sum(self, messages: list[Message]) -> list[gmpy2.mpz]:
        """phi zeta(w_sum) = prod_n (Y^(n) + Enc0 Z^(n)) (eqs. 4-6, with eq. 8 for phi K)."""
        n2 = gmpy2.mpz(self.public_key.nsquare)
        acc = [gmpy2.mpz(1)] * self.dim
        zeros = np.full(self.dim, len(messages), dtype=np.int64)
        for msg in messages:
            self.check(msg)
            positions = self._inverse_user_perms[msg.user][msg.permuted_indices]
            if len(np.unique(positions)) != len(positions):
                raise InputError(f"message from user {msg.user} repeats an index; K must have one 1 per row")
            for p, c in zip(positions.tolist(), msg.ciphertexts):
                acc[p] = (acc[p] * c) % n2
            zeros[positions] -= 1
        enc0 = self.enc0()
        return [(a * gmpy2.powmod(enc0, int(z), n2)) % n2 if z else a for a, z in zip(acc, zeros.tolist())]

    def average(self, messages: list[Message], keygen: KeyGenerator, round_index: int) -> np.ndarray:
        """w̄ = w_sum / N with G's help (Algorithm 1 lines 5-6)."""
        return keygen.decrypt_and_reorder(self.encrypted_permuted_sum(messages), round_index) / self.n_users
