"""The logged slot-origin count is the expectation over the users' CSPRNG padding (slot_leak.py).

Checked two ways: against brute force over every equally likely padding draw of a tiny
protocol (through :func:`origin_candidates`, the realised count), and against the real
:meth:`User.decompose` (coverage frequencies of 4000 draws).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from vispriv.plugins.federated.linear.slot_leak import (
    expected_origin_candidates,
    origin_candidates,
    padding_miss_probability,
)
from vispriv.plugins.federated.protocol.roles import User, UserCredentials


def _shard_paddings(support: np.ndarray, dim: int, cap: int) -> list[list[frozenset[int]]]:
    """Every equally likely padding of every shard of one update (chunks in index order: their split does not matter)."""
    nz = np.flatnonzero(support).tolist()
    chunks = [nz[i : i + cap] for i in range(0, len(nz), cap)] or [[]]
    options = []
    for chunk in chunks:
        free = [i for i in range(dim) if i not in chunk]
        options.append([frozenset(chunk) | frozenset(p) for p in itertools.combinations(free, cap - len(chunk))])
    return options


def _brute_force(updates: np.ndarray, zero: np.ndarray, groups: np.ndarray, cap: int) -> np.ndarray:
    """Mean of the realised |C(i)| over every draw of every shard of every user and round."""
    rounds, users, dim = updates.shape
    per_shard = [opt for t in range(rounds) for n in range(users) for opt in _shard_paddings(updates[t, n] != 0, dim, cap)]
    owner = [t for t in range(rounds) for n in range(users) for _ in _shard_paddings(updates[t, n] != 0, dim, cap)]
    total, count = np.zeros(dim), 0
    for draw in itertools.product(*per_shard):
        covered = np.zeros((rounds, dim), bool)
        for t, shard in zip(owner, draw):
            covered[t, list(shard)] = True
        total += origin_candidates(~covered, zero, groups)  # identity phi: slot s = index s
        count += 1
    return total / count


@pytest.mark.parametrize("groups", [np.array([0, 0]), np.array([0, 1])], ids=["fixed", "fresh"])
def test_expectation_equals_brute_force_over_every_padding(groups):
    dim, cap = 6, 2
    updates = np.zeros((2, 2, dim))
    updates[0, 0, [0, 3, 4]] = [1.0, -2.0, 0.5]  # 3 non-zeros: a full shard and one with 1 + 1 padding
    updates[0, 1, 1] = 2.0
    updates[1, 0, [0, 1]] = [1.0, 1.0]  # one full shard: no padding
    # updates[1, 1] = 0: one empty shard, M padding entries
    zero = (updates.sum(axis=1) == 0)
    expected = expected_origin_candidates(updates, zero, groups, cap)
    np.testing.assert_allclose(expected, _brute_force(updates, zero, groups, cap), rtol=0, atol=1e-12)
    assert expected.min() > 0 and expected.min() < dim and expected.max() == dim


def test_padding_miss_probability_matches_the_real_decomposition():
    dim, cap, draws = 8, 3, 4000
    w = np.zeros(dim)
    w[[1, 5, 6, 7]] = 1.0  # 4 non-zeros: shards of 3 and 1 (+2 padding)
    perm = np.arange(dim)
    user = User(UserCredentials(0, None, perm, perm, cap, 3, 0), workers=None)  # decompose needs no key
    hits = np.zeros(dim)
    for _ in range(draws):
        covered = np.zeros(dim, bool)
        for idx, _ in user.decompose(w):
            covered[idx] = True
        hits += covered
    user.close()
    p_miss = padding_miss_probability(4, dim, cap)
    assert p_miss == pytest.approx((dim - cap) / (dim - 1))
    miss = 1 - hits[w == 0] / draws  # each zero entry: in no shard's padding of the draw
    np.testing.assert_allclose(miss, p_miss, atol=4 * np.sqrt(p_miss * (1 - p_miss) / draws))
    assert padding_miss_probability(6, dim, cap) == 1.0 and padding_miss_probability(0, dim, cap) == (dim - cap) / dim
