"""What each DPHE party can compute from everything it holds (issue 14 items 1-3), with real 512-bit keys.

512-bit Paillier keys keep these tests fast; the protocol does not depend on the key size
(the plugin's default is 1024, ``MIN_KEY_BITS`` is 256).
"""

from __future__ import annotations

import gc
import itertools
import types

import gmpy2
import numpy as np
import pytest

from vispriv.harness.errors import InputError
from vispriv.plugins.defenses.dphe import Dphe
from vispriv.plugins.federated.linear import linear
from vispriv.plugins.federated.linear.slot_leak import origin_candidates
from vispriv.plugins.federated.protocol import paillier as pl
from vispriv.plugins.federated.protocol import rounds as protocol_mod
from vispriv.plugins.federated.protocol.roles import Aggregator, KeyGenerator, User
from vispriv.plugins.federated.protocol.rounds import DpheSettings, run_federated

MPZ = type(gmpy2.mpz(0))
SKIP = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.CodeType, types.FrameType, str, bytes)


def reachable_integers(root: object) -> set[int]:
    """Every int / mpz reachable from ``root`` through ``gc.get_referents`` (a generic walk).

    Classes, modules and functions are not followed (they lead to every global of the
    process, not to state the party holds); closures of functions are.
    """
    seen: set[int] = set()
    found: set[int] = set()
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, bool):
            continue
        seen.add(id(obj))
        if isinstance(obj, (int, MPZ)):
            found.add(int(obj))
        elif isinstance(obj, types.FunctionType):
            stack.extend(c.cell_contents for c in obj.__closure__ or () if c.cell_contents is not None)
        elif isinstance(obj, np.ndarray):
            if obj.dtype == object:
                stack.extend(obj.ravel().tolist())
            elif obj.dtype.kind in "iu":
                found.update(int(v) for v in np.unique(obj).tolist())
        elif not isinstance(obj, SKIP):
            stack.extend(gc.get_referents(obj))
    return found


def key_free_openings(ciphertexts: list[int], held: set[int], n: int) -> list[tuple[int, int]]:
    """Pairs (c, x) with (c x^-1 mod n^2 - 1) = 0 (mod n): x opens c, m = (c / x - 1) / n.

    (c x^-1 mod n^2) mod n = c x^-1 mod n, so the candidates are the x with x = c (mod n);
    each is then checked with the literal formula.
    """
    n2 = n * n
    by_residue: dict[int, list[int]] = {}
    for x in held:
        if x > 0 and gmpy2.gcd(x, n) == 1:
            by_residue.setdefault(x % n, []).append(x)
    out = []
    for c in ciphertexts:
        for x in by_residue.get(c % n, []):
            if (c * int(gmpy2.invert(x, n2)) % n2 - 1) % n == 0:
                out.append((c, x))
    return out


def test_nothing_reachable_from_the_aggregator_opens_a_user_ciphertext(scene, ctx, monkeypatch):
    """Issue 14 item 1: snapshot everything the aggregator holds after every offline fill and at the end."""
    aggregators = []
    held: set[int] = set()

    class Recording(protocol_mod.Aggregator):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            aggregators.append(self)

    real_fill = pl.ObfuscatorPool.fill

    def fill_then_snapshot(self, count):
        elapsed = real_fill(self, count)
        for agg in aggregators:
            held.update(reachable_integers(agg))
        return elapsed

    monkeypatch.setattr(protocol_mod, "Aggregator", Recording)
    monkeypatch.setattr(pl.ObfuscatorPool, "fill", fill_then_snapshot)
    cfg = linear.LocalTraining(reg=0.01)
    run = run_federated(scene.private, scene.public, cfg, 2, ctx, dphe=DpheSettings(key_bits=512, workers=1))
    (agg,) = aggregators
    held.update(reachable_integers(agg))
    n = run.modulus
    ciphertexts = [int(c) for round_msgs in run.messages for m in round_msgs for c in m.ciphertexts]
    assert len(held) > 10 and n in held  # the walk does reach the aggregator's state (its public key)
    assert len(ciphertexts) >= 2 * scene.private.n_users * run.capacity
    assert key_free_openings(ciphertexts, held, n) == []


def _roles(dim=40, n_users=3, capacity=6, fresh=True):
    keygen = KeyGenerator(dim, n_users, capacity, 512, fresh_permutations=fresh)
    keygen.start_round()
    aggregator = Aggregator(keygen.credentials_for_aggregator(), n_users)
    users = [User(keygen.credentials_for_user(n)) for n in range(n_users)]
    return keygen, aggregator, users


def _sparse(dim, nz, seed):
    rng = np.random.default_rng(seed)
    w = np.zeros(dim)
    w[rng.choice(dim, nz, replace=False)] = rng.normal(0, 2, nz)
    return w


def test_permutations_come_from_the_os_csprng_not_a_numpy_stream(monkeypatch):
    """Item 2: with every numpy generator forced to one seed, two key generators still draw different phi, phi^(n)."""
    real = np.random.default_rng
    monkeypatch.setattr(np.random, "default_rng", lambda *a, **kw: real(0))
    perms = []
    for _ in range(2):
        keygen = KeyGenerator(200, 3, 20, 512)
        keygen.start_round()
        creds = [keygen.credentials_for_user(n) for n in range(3)]
        perms.append([creds[0].shared_perm, *(c.own_perm for c in creds)])
    for a, b in zip(*perms):
        assert not np.array_equal(a, b)
    assert all(np.array_equal(np.sort(p), np.arange(200)) for p in perms[0])


def test_key_generator_issues_fresh_permutations_every_round_unless_fixed():
    """Item 2: Algorithm 1 is one averaging; each round gets its own phi and phi^(n) (fixed only on request)."""
    for fresh in (True, False):
        keygen = KeyGenerator(300, 3, 30, 512, fresh_permutations=fresh)
        seen = []
        for _ in range(3):
            keygen.start_round()
            user, agg = keygen.credentials_for_user(1), keygen.credentials_for_aggregator()
            seen.append((user.shared_perm, user.own_perm, agg.user_perms[1], user.round_index))
        assert [s[3] for s in seen] == [0, 1, 2]
        for (phi_a, own_a, agg_a, _), (phi_b, own_b, agg_b, _) in itertools.pairwise(seen):
            assert np.array_equal(own_a, agg_a) and np.array_equal(own_b, agg_b)
            assert np.array_equal(phi_a, phi_b) != fresh
            assert np.array_equal(own_a, own_b) != fresh


def test_origin_candidates_hand_case():
    """C(s) = intersection of Z_t over the rounds sharing phi where slot s was uncovered (slot_leak.py)."""
    uncovered = np.array([[1, 1, 0, 0], [0, 1, 0, 0]], bool)
    zero = np.array([[0, 1, 1, 0], [0, 0, 1, 1]], bool)
    np.testing.assert_array_equal(origin_candidates(uncovered, zero, np.array([0, 0])), [2, 1, 4, 4])
    np.testing.assert_array_equal(origin_candidates(uncovered, zero, np.array([0, 1])), [4, 2, 4, 4])


def test_fresh_permutations_stop_the_slot_origin_narrowing(scene, ctx):
    """Item 2 measured: A's candidates for a slot's origin after 6 rounds, fixed vs fresh permutations."""
    base = dict(key_bits=256, workers=1, rounds=6, reg=0.1)  # MIN_KEY_BITS: the leak does not depend on the key
    fixed = Dphe(Dphe.Config(permutations="fixed", **base)).protect(scene.private, scene.public, ctx)
    fresh = Dphe(Dphe.Config(**base)).protect(scene.private, scene.public, ctx)
    dim = scene.private.n_classes * (scene.private.dim + 1)
    assert fixed.utility["test_accuracy"] == fresh.utility["test_accuracy"]  # same data order, same sums
    assert fixed.utility["slot_origin_candidates"] < 0.8 * dim
    assert fresh.utility["slot_origin_candidates"] > fixed.utility["slot_origin_candidates"] + 0.1 * dim


def test_aggregator_rejects_bad_indices_and_ciphertexts():
    """Item 3: indices outside [0, D) and non-ciphertexts (0, multiples of p or q, >= n^2) are refused by name."""
    _keygen, aggregator, users = _roles()
    n = int(aggregator.public_key.n)
    for bad_index in (40, -1):
        msgs = [m for u in users for m in u.encrypt(_sparse(40, 3, u.index))]
        msgs[0].permuted_indices[0] = bad_index
        with pytest.raises(InputError, match=rf"permuted index {bad_index}; allowed are 0 <= i < D=40"):
            aggregator.encrypted_permuted_sum(msgs)
    for bad_ct in (0, n, n * n, n * n + 1):
        msgs = [m for u in users for m in u.encrypt(_sparse(40, 3, u.index))]
        msgs[1].ciphertexts[0] = gmpy2.mpz(bad_ct)
        with pytest.raises(InputError, match=r"0 < c < n\^2 and gcd\(c, n\) = 1"):
            aggregator.encrypted_permuted_sum(msgs)


def test_aggregator_rejects_replays_missing_users_and_too_many_messages():
    """Item 3: a replayed message, a silent user, more than ceil(D/M) messages, a message of another round."""
    keygen, aggregator, users = _roles()
    msgs = [m for u in users for m in u.encrypt(_sparse(40, 3, u.index))]
    with pytest.raises(InputError, match="replay"):
        aggregator.encrypted_permuted_sum([*msgs, msgs[0]])
    with pytest.raises(InputError, match=r"user 2 sent 0 messages this round; allowed are 1..ceil\(D/M\) = 7"):
        aggregator.encrypted_permuted_sum([m for m in msgs if m.user != 2])
    flood = [m for seed in range(8) for m in users[0].encrypt(_sparse(40, 2, 10 + seed))]
    with pytest.raises(InputError, match="user 0 sent 9 messages"):
        aggregator.encrypted_permuted_sum([*msgs, *flood])
    keygen.start_round()
    aggregator.receive(keygen.credentials_for_aggregator())
    with pytest.raises(InputError, match="belongs to round 0; this is round 1"):
        aggregator.encrypted_permuted_sum(msgs)


def test_key_generator_decrypts_one_vector_per_round_it_opened():
    """Item 3: the round counter is G's; after the round's sum, a single user's message is refused."""
    keygen, aggregator, users = _roles()
    updates = [_sparse(40, 4, u.index) for u in users]
    msgs = [m for u, w in zip(users, updates) for m in u.encrypt(w)]
    np.testing.assert_allclose(aggregator.average(msgs, keygen) * 3, np.sum(updates, axis=0), atol=1e-8)
    single = list(msgs[0].ciphertexts) + [aggregator.enc0()] * (40 - 6)
    with pytest.raises(InputError, match="round 0 was already decrypted"):
        keygen.decrypt_and_reorder(single)
    keygen.start_round()
    with pytest.raises(InputError, match="not a Paillier ciphertext"):
        keygen.decrypt_and_reorder([gmpy2.mpz(0)] * 40)
