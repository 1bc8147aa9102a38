"""Paillier fast path and DPHE roles: secure sum = plaintext sum, secrets stay where they belong."""

from __future__ import annotations

import gmpy2
import numpy as np
import pytest
from phe import paillier

from vispriv.harness.errors import InputError
from vispriv.plugins.federated.protocol import paillier as pl
from vispriv.plugins.federated.protocol.roles import Aggregator, KeyGenerator, User


@pytest.fixture(scope="module")
def keys():
    return pl.generate_keypair(512)


def test_online_encryption_decrypts_with_phe_and_matches_footnote_3(keys):
    pk, sk = keys
    values = np.array([0.0, 1.5, -2.25, 1e-6, -123.456])
    with pl.ObfuscatorPool(pk, workers=1) as pool:
        cts = pl.encrypt_encoded(pl.encode(values, pk), pk, pool.take(len(values)))
    np.testing.assert_allclose(pl.decrypt_decode(cts, sk), values, atol=2.0**-32)
    # phe's own EncryptedNumber at the same exponent decrypts our ciphertext too.
    num = paillier.EncryptedNumber(pk, int(cts[2]), pl.EXPONENT)
    assert sk.decrypt(num) == pytest.approx(-2.25, abs=1e-9)
    # zeta(a) zeta(b) = zeta(a + b) (footnote 3)
    n2 = gmpy2.mpz(pk.nsquare)
    assert pl.decrypt_decode([(cts[1] * cts[2]) % n2], sk)[0] == pytest.approx(1.5 - 2.25, abs=1e-9)
    # fresh obfuscators: two encryptions of the same value differ
    again = pl.encrypt_encoded(pl.encode(values[:1], pk), pk, pl.ObfuscatorPool(pk, 1).take(1))
    assert again[0] != cts[0]


def test_bytes_round_trip(keys):
    pk, _ = keys
    cts = pl.encrypt_encoded(pl.encode(np.array([3.0, -1.0]), pk), pk, pl.ObfuscatorPool(pk, 1).take(2))
    width = pl.ciphertext_bytes(pk)
    arr = pl.to_bytes(cts, width)
    assert arr.shape == (2, width) and arr.dtype == np.uint8
    assert pl.from_bytes(arr) == cts


def _roles(dim=40, n_users=3, capacity=6):
    keygen = KeyGenerator(dim, n_users, capacity, 512)
    keygen.start_round()
    aggregator = Aggregator(keygen.credentials_for_aggregator(), n_users)
    users = [User(keygen.credentials_for_user(n)) for n in range(n_users)]
    return keygen, aggregator, users


def test_dphe_sum_equals_plaintext_sum_signed_floats_different_sparsity():
    keygen, aggregator, users = _roles()
    rng = np.random.default_rng(1)
    updates = []
    for nz in (3, 6, 17):  # under, at and over capacity M = 6 (the last one is sharded)
        w = np.zeros(40)
        w[rng.choice(40, nz, replace=False)] = rng.normal(0, 3, nz)
        updates.append(w)
    messages = [m for u, w in zip(users, updates) for m in u.encrypt(w)]
    assert len(messages) == 1 + 1 + 3  # ceil(17 / 6) = 3 shards for the third user
    assert all(len(m.ciphertexts) == 6 for m in messages)  # every message carries exactly M values
    avg = aggregator.average(messages, keygen)
    np.testing.assert_allclose(avg * 3, np.sum(updates, axis=0), atol=3 * 2.0**-32)
    with pytest.raises(InputError, match="already decrypted"):
        keygen.decrypt_and_reorder(aggregator.encrypted_permuted_sum(messages))


def test_indices_are_doubly_permuted():
    keygen, _aggregator, users = _roles(dim=200, capacity=20)
    w = np.zeros(200)
    w[:20] = 1.0
    (msg,) = users[0].encrypt(w)
    # Phi(K) = phi^(0) phi K: the plain support {0..19} is not what goes on the wire ...
    assert set(msg.permuted_indices.tolist()) != set(range(20))
    # ... and undoing only phi^(0) (what A can do, eq. 8) still does not reveal it.
    partly = np.argsort(keygen.credentials_for_aggregator().user_perms[0])[msg.permuted_indices]
    assert set(partly.tolist()) != set(range(20))


def _holds(obj, predicate, seen=None, depth=0):
    """Does any attribute reachable from obj (dicts, lists, tuples, dataclasses) satisfy predicate?"""
    seen = seen if seen is not None else set()
    if id(obj) in seen or depth > 6:
        return False
    seen.add(id(obj))
    if predicate(obj):
        return True
    if isinstance(obj, dict):
        children = list(obj.values())
    elif isinstance(obj, (list, tuple)):
        children = list(obj)
    elif hasattr(obj, "__dict__"):
        children = list(vars(obj).values())
    else:
        return False
    return any(_holds(c, predicate, seen, depth + 1) for c in children)


def test_aggregator_cannot_decrypt_nor_unpermute():
    keygen, aggregator, users = _roles()
    shared = keygen.credentials_for_user(0).shared_perm
    assert not _holds(aggregator, lambda o: isinstance(o, paillier.PaillierPrivateKey))
    assert not _holds(aggregator, lambda o: isinstance(o, np.ndarray) and o.shape == shared.shape and np.array_equal(o, shared))
    assert not _holds(aggregator, lambda o: isinstance(o, np.ndarray) and o.shape == shared.shape and np.array_equal(np.argsort(o), shared))
    # users hold phi and their own phi^(n) but nobody else's
    for n, user in enumerate(users):
        assert not _holds(user, lambda o: isinstance(o, paillier.PaillierPrivateKey))
        for m in range(len(users)):
            other = keygen.credentials_for_user(m).own_perm
            held = _holds(user, lambda o, other=other: isinstance(o, np.ndarray) and o.shape == other.shape and np.array_equal(o, other))
            assert held == (m == n)


def test_bad_inputs_give_clear_errors():
    _keygen, aggregator, users = _roles()
    with pytest.raises(InputError, match="NaN"):
        users[0].encrypt(np.full(40, np.nan))
    with pytest.raises(InputError, match="overflows"):
        users[0].encrypt(np.r_[1e200, np.zeros(39)])
    other = KeyGenerator(40, 3, 6, 768)
    other.start_round()
    stranger = User(other.credentials_for_user(1))
    msgs = stranger.encrypt(np.r_[1.0, np.zeros(39)])
    with pytest.raises(InputError, match="768-bit key"):
        aggregator.encrypted_permuted_sum(msgs)
    with pytest.raises(InputError, match="multiple of 8"):
        pl.generate_keypair(100)
