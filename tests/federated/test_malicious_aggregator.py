"""Outside the paper's model: an aggregator that forwards one user's message as "the sum" (docs/federated.md).

Section 2.5 of the DPHE paper assumes semi-honest parties: "the aggregator is not allowed
to ask the key generator to decrypt individual classifier". Nothing in Algorithm 1 lets
G tell a forged request from a real sum, so a *malicious* A that breaks this rule gets one
user's update in the clear. Real roles, real (256-bit) Paillier keys, real ciphertexts.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from vispriv.harness.errors import InputError
from vispriv.plugins.federated.protocol.roles import Aggregator, KeyGenerator, Message, User


class MaliciousAggregator(Aggregator):
    """A that skips its own check that every user sent a message: eqs. 4-6 over whatever it forwards."""

    def check_round(self, messages: list[Message]) -> None:
        return None


@pytest.fixture
def protocol():
    dim, n_users = 40, 3
    capacity = math.ceil(0.25 * dim)
    keygen = KeyGenerator(dim, n_users, capacity, key_bits=256)
    keygen.start_round()
    aggregator = Aggregator(keygen.credentials_for_aggregator(), n_users)
    users = [User(keygen.credentials_for_user(n), workers=1) for n in range(n_users)]
    rng = np.random.default_rng(0)
    updates = np.where(rng.random((n_users, dim)) < 0.4, rng.normal(size=(n_users, dim)), 0.0)  # two shards each
    messages = []
    for n, user in enumerate(users):
        user.precompute(user.values_needed(updates[n]))
        messages.append(user.encrypt(updates[n]))
    yield keygen, aggregator, updates, messages
    for user in users:
        user.close()


def test_the_honest_aggregator_refuses_a_round_without_every_user(protocol):
    keygen, aggregator, _, messages = protocol
    with pytest.raises(InputError, match="user 0 sent 0 messages"):
        aggregator.average(messages[1], keygen)


def test_a_forged_sum_of_one_users_messages_makes_g_decrypt_that_users_update(protocol):
    """G cannot tell the forged product from a sum: it returns w^(1), the whole update, to the aggregator."""
    keygen, aggregator, updates, messages = protocol
    assert len(messages[1]) >= 2  # the user's update spans several messages (shards); A forwards them all
    forger = MaliciousAggregator(keygen.credentials_for_aggregator(), len(messages))  # A's own credentials
    leaked = keygen.decrypt_and_reorder(forger.encrypted_permuted_sum(messages[1]))
    np.testing.assert_allclose(leaked, updates[1], rtol=0, atol=1e-9)
    assert np.array_equal(leaked != 0, updates[1] != 0)  # values and support K^(1)
    # the round's one decryption is spent on it: the real average of this round can no longer be computed
    with pytest.raises(InputError, match="already decrypted"):
        aggregator.average([m for user_msgs in messages for m in user_msgs], keygen)


def test_an_honest_round_with_the_same_messages_gives_only_the_average(protocol):
    keygen, aggregator, updates, messages = protocol
    average = aggregator.average([m for user_msgs in messages for m in user_msgs], keygen)
    np.testing.assert_allclose(average, updates.mean(axis=0), rtol=0, atol=1e-9)
    assert not any(np.allclose(average, u) for u in updates)
