"""Paillier encryption for DPHE (DPHE (ICCV 2017) section 2.2, footnotes 2-3), fast path with gmpy2.

Keys are real python-paillier (``phe``) keys. With g = n + 1 an encryption is

    zeta(m) = (1 + n m) * r^n  mod n^2                                   (footnote 3)

and the only expensive part is the obfuscator r^n mod n^2, which does not depend on m.
:class:`ObfuscatorPool` computes obfuscators *offline* (before the update is known),
spread over processes on all cores; the *online* encryption is then one multiplication
mod n^2 on gmpy2 ``mpz`` integers. (``phe.encrypt(v, r_value=r)`` takes r, not r^n, and
still pays the power, so it cannot be used for this.)

Reals are encoded as fixed point, as python-paillier does (footnote 2): m = round(v *
16^8) mod n, i.e. phe's ``EncodedNumber`` with the fixed exponent ``EXPONENT`` = -8,
so that every ciphertext shares one exponent and a homomorphic sum is a plain product
of ciphertexts. Decoding uses phe's signed convention (|mantissa| <= n // 3 - 1) and its
overflow detection. Randomness for r comes from :mod:`secrets` (cryptographic), never
from the cell's seeded generators: ciphertexts differ between runs, decrypted sums do not.
"""

from __future__ import annotations

import math
import os
import secrets
import time
from concurrent.futures import ProcessPoolExecutor

import gmpy2
import numpy as np
from phe import paillier
from phe.encoding import EncodedNumber

from vispriv.harness.errors import InputError

BASE = 16
EXPONENT = -8
SCALE = BASE ** (-EXPONENT)
MIN_KEY_BITS = 256
#: Below this many obfuscators a pool fills in-process (starting workers costs more).
PARALLEL_THRESHOLD = 512


def generate_keypair(bits: int) -> tuple[paillier.PaillierPublicKey, paillier.PaillierPrivateKey]:
    """A fresh phe key pair with an n of ``bits`` bits (the key generator's job, section 2.2)."""
    if bits < MIN_KEY_BITS or bits % 8:
        raise InputError(f"Paillier key size must be a multiple of 8 and >= {MIN_KEY_BITS} bits; got {bits}")
    return paillier.generate_paillier_keypair(n_length=bits)


def key_bits(public_key: paillier.PaillierPublicKey) -> int:
    return int(public_key.n).bit_length()


def ciphertext_bytes(public_key: paillier.PaillierPublicKey) -> int:
    """Bytes of one ciphertext (an integer mod n^2)."""
    return (int(public_key.nsquare).bit_length() + 7) // 8


def fresh_obfuscators(n: int, count: int) -> list[int]:
    """``count`` fresh r^n mod n^2 for random r in [1, n) from :mod:`secrets` (also runs in worker processes)."""
    nn = gmpy2.mpz(n)
    n2 = nn * nn
    return [int(gmpy2.powmod(gmpy2.mpz(secrets.randbelow(n - 1) + 1), nn, n2)) for _ in range(count)]


class ObfuscatorPool:
    """Precomputed obfuscators r^n mod n^2 for one public key (the offline phase).

    A pool belongs to the one party that encrypts with it: whoever holds r^n of a
    ciphertext c = (1 + n m) r^n recovers m = (c / r^n - 1) / n without the key, so a
    pool must never be shared between parties (each DPHE user owns one).

    ``fill`` spreads the powers over ``workers`` processes (default: every core);
    ``take`` hands out obfuscators, each used once, and refills on demand if the pool
    runs dry (that refill is counted as offline time too, but it then sits on the
    critical path: fill the pool ahead of time).
    """

    def __init__(self, public_key: paillier.PaillierPublicKey, workers: int | None = None) -> None:
        self.public_key = public_key
        self.workers = max(1, workers or os.cpu_count() or 1)
        self._pool: list[gmpy2.mpz] = []
        self._executor: ProcessPoolExecutor | None = None
        self.offline_seconds = 0.0
        self.produced = 0

    def close(self) -> None:
        """Stop the worker processes (if any were started)."""
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None

    def __enter__(self) -> ObfuscatorPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self._pool)

    def fill(self, count: int) -> float:
        """Compute ``count`` more obfuscators; returns the wall-clock seconds it took."""
        if count <= 0:
            return 0.0
        start = time.perf_counter()
        n = int(self.public_key.n)
        if self.workers == 1 or count < PARALLEL_THRESHOLD:
            values = fresh_obfuscators(n, count)
        else:
            chunks = [count // self.workers + (i < count % self.workers) for i in range(self.workers)]
            if self._executor is None:
                self._executor = ProcessPoolExecutor(max_workers=self.workers)
            parts = self._executor.map(fresh_obfuscators, [n] * len(chunks), chunks)
            values = [v for part in parts for v in part]
        self._pool.extend(gmpy2.mpz(v) for v in values)
        self.produced += count
        elapsed = time.perf_counter() - start
        self.offline_seconds += elapsed
        return elapsed

    def take(self, count: int) -> list[gmpy2.mpz]:
        if count > len(self._pool):
            self.fill(count - len(self._pool))
        out, self._pool = self._pool[:count], self._pool[count:]
        return out


def encode(values: np.ndarray, public_key: paillier.PaillierPublicKey, max_summands: int = 1) -> list[int]:
    """Fixed-point encodings mod n of real ``values``; refuses NaN and values whose sum could overflow.

    ``max_summands`` is how many encodings may be added homomorphically; the bound is
    |v| * 16^8 * max_summands <= n // 3 - 1 (phe's ``max_int``).
    """
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(v)):
        raise InputError("update contains NaN or infinite values; Paillier encodes finite reals only")
    if len(v) == 0:
        return []
    peak = float(np.max(np.abs(v)))
    if peak > 0 and math.log2(peak) + math.log2(SCALE) + math.log2(max(1, max_summands)) >= math.log2(
        public_key.max_int
    ):
        limit = public_key.max_int / SCALE / max(1, max_summands)
        raise InputError(
            f"value {peak:.3g} overflows the {key_bits(public_key)}-bit Paillier encoding summed over "
            f"{max_summands} parties: |value| must stay below {limit:.3g} (use a larger key or smaller values)"
        )
    n = int(public_key.n)
    return [int(x) % n for x in np.rint(v * SCALE).tolist()]


def encrypt_encoded(
    encodings: list[int], public_key: paillier.PaillierPublicKey, obfuscators: list[gmpy2.mpz]
) -> list[gmpy2.mpz]:
    """The online phase: zeta(m) = (1 + n m) r^n mod n^2, one product per value."""
    if len(obfuscators) < len(encodings):
        raise InputError(f"{len(encodings)} values need as many obfuscators; got {len(obfuscators)}")
    n = gmpy2.mpz(public_key.n)
    n2 = n * n
    return [((1 + n * m) * r) % n2 for m, r in zip(encodings, obfuscators)]


def encrypt_plain_phe(values: np.ndarray, public_key: paillier.PaillierPublicKey) -> list[int]:
    """Baseline: python-paillier's own ``encrypt`` per value, at the fixed exponent."""
    return [
        public_key.encrypt(EncodedNumber(public_key, m, EXPONENT)).ciphertext(be_secure=False)
        for m in encode(values, public_key)
    ]


def to_bytes(ciphertexts: list[gmpy2.mpz], width: int) -> np.ndarray:
    """Ciphertexts as a uint8 array (k, width), big-endian (what goes on the wire)."""
    if not ciphertexts:
        return np.zeros((0, width), np.uint8)
    raw = b"".join(int(c).to_bytes(width, "big") for c in ciphertexts)
    return np.frombuffer(raw, dtype=np.uint8).reshape(len(ciphertexts), width).copy()


def from_bytes(arr: np.ndarray) -> list[gmpy2.mpz]:
    return [gmpy2.mpz(int.from_bytes(row.tobytes(), "big")) for row in np.atleast_2d(arr)]


def check_ciphertexts(ciphertexts: list[gmpy2.mpz], public_key: paillier.PaillierPublicKey, who: str) -> None:
    """Every ciphertext must be a unit of Z*_{n^2}: 0 < c < n^2 and gcd(c, n) = 1 (Paillier's ciphertext space)."""
    n = gmpy2.mpz(public_key.n)
    n2 = n * n
    for i, value in enumerate(ciphertexts):
        c = gmpy2.mpz(value)
        if not 0 < c < n2 or gmpy2.gcd(c, n) != 1:
            raise InputError(
                f"{who}: ciphertext {i} is not a Paillier ciphertext of this key; "
                "allowed are integers c with 0 < c < n^2 and gcd(c, n) = 1"
            )


def decrypt_decode(
    ciphertexts: list[gmpy2.mpz], private_key: paillier.PaillierPrivateKey
) -> np.ndarray:
    """Decrypt and decode signed fixed-point values; overflow of the sum is an error."""
    pk = private_key.public_key
    out = np.empty(len(ciphertexts))
    for i, c in enumerate(ciphertexts):
        m = private_key.raw_decrypt(int(c))
        try:
            out[i] = EncodedNumber(pk, m, EXPONENT).decode()
        except OverflowError:
            raise InputError(
                "decrypted sum overflowed the Paillier encoding; use a larger key or smaller values"
            ) from None
    return out
