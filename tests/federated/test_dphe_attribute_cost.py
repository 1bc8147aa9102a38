"""DPHE's values encrypted per user against the number of attributes L (the cost model of
docs/federated.md, measured by benchmarks/dphe_attribute_cost.py): weights (L, D + 1),
M = ceil(0.1 L (D + 1)) values per shard, max(1, ceil(nz / M)) shards per user."""

from __future__ import annotations

import math

import numpy as np

from vispriv.harness import CellContext
from vispriv.plugins.defenses.dphe import dphe_costs
from vispriv.plugins.federated.data import LabelledImages, split_users
from vispriv.plugins.federated.linear import linear
from vispriv.plugins.federated.protocol.rounds import DpheSettings, FederatedRun, run_federated

DIM, USERS = 32, 3


def attributes(n_attributes: int, n: int = 150, seed: int = 0) -> LabelledImages:
    """The same random features for every L; attribute j is the sign of a random projection."""
    x = np.random.default_rng(seed).normal(size=(n, DIM))
    labels = (x @ np.random.default_rng([seed, n_attributes]).normal(size=(DIM, n_attributes)) > 0).astype(np.int64)
    strips = (x - x.min(axis=0)) / (x.max(axis=0) - x.min(axis=0))
    return LabelledImages(strips[:, None, :], labels, [f"a{j}" for j in range(n_attributes)])


def one_round(n_attributes: int) -> FederatedRun:
    """One round of federated averaging with DPHE (256-bit keys, obfuscators in-process)."""
    private, public = split_users(attributes(n_attributes), USERS, np.random.default_rng(0), schedule_seed=1)
    settings = DpheSettings(key_bits=256, workers=1)
    return run_federated(private, public, linear.LocalTraining(), 1, CellContext(seed=0, quiet=True), dphe=settings)


def test_values_encrypted_per_user_follow_the_cost_model_in_the_number_of_attributes():
    per_user = {}
    for n_attributes in (1, 4):
        run = one_round(n_attributes)
        weights = n_attributes * (DIM + 1)
        capacity = math.ceil(0.1 * weights)
        assert run.updates.shape == (1, USERS, n_attributes, DIM + 1)
        assert run.capacity == capacity
        nonzeros = np.count_nonzero(run.updates[0].reshape(USERS, -1), axis=1)
        expected = [max(1, math.ceil(int(nz) / capacity)) * capacity for nz in nonzeros]
        sent = [sum(len(m.ciphertexts) for m in run.messages[0] if m.user == n) for n in range(USERS)]
        assert sent == expected
        assert all(len(m.ciphertexts) == capacity for m in run.messages[0])
        assert run.values_encrypted == sum(expected)
        assert dphe_costs(run, USERS, 1)[0]["values_encrypted_per_user_round"] == sum(expected) / USERS
        per_user[n_attributes] = (nonzeros, sum(expected) / USERS)
    # Default training leaves these updates (almost) dense, nz >= 0.99 L (D + 1): 9 shards of
    # M = 4 for L = 1, 10 shards of M = 14 for L = 4, so L = 4 encrypts 140 / 36 = 3.89x the values.
    assert all((nz >= 0.99 * L * (DIM + 1)).all() for L, (nz, _) in per_user.items())
    assert (per_user[1][1], per_user[4][1]) == (36, 140)
