"""What the aggregator learns about phi from uncovered slots and zeros of the average.

In round t the aggregator A knows, for every message, the phi-space positions phi K^(n)
(eq. 8), hence the set U_t of phi-slots that no user covered: their aggregated ciphertext
is a power of Enc0 (eqs. 5-6), so the decrypted sum is exactly 0 at the plain index
phi^-1(s). Everyone sees the published average w̄_{t+1} and its zero set Z_t. So the
origin phi^-1(s) of a slot s in U_t lies in Z_t. When the same phi serves several rounds,
A intersects over them:

    C(s) = intersection of Z_t over the rounds t sharing phi in which s was uncovered

(all D indices when s was never uncovered). With a fresh phi every round (the default
of :class:`~vispriv.plugins.federated.protocol.roles.KeyGenerator`) each round's slots are new
unknowns and C(s) is a single round's Z_t. Nothing here is secret to A: U_t is its own
intermediate computation (section 2.5's semi-honest party keeps it) and Z_t is public.

Which slots go uncovered depends on the padding each user draws from the OS CSPRNG
(:meth:`~vispriv.plugins.federated.protocol.roles.User.decompose` pads every shard to M indices at
random positions), so the realised |C(s)| differs between identical runs.
:func:`expected_origin_candidates` is its expectation over that draw, a function of the
updates (config + seed) alone: the number the ``dphe`` defense logs.
"""

from __future__ import annotations

import numpy as np

from vispriv.harness.errors import InputError


def origin_candidates(uncovered: np.ndarray, zero: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """|C(s)| for every slot s of the last round's phi, from rounds that share it.

    ``uncovered`` (T, D) bool: slot s got no user's value in round t; ``zero`` (T, D)
    bool: plain index i of w̄_{t+1} is exactly 0; ``groups`` (T,) int: rounds with equal
    values used the same phi (all equal: fixed; 0..T-1: fresh every round).
    """
    uncovered = np.asarray(uncovered, bool)
    zero = np.asarray(zero, bool)
    groups = np.asarray(groups)
    if uncovered.ndim != 2 or uncovered.shape != zero.shape or len(groups) != len(uncovered) or not len(groups):
        raise InputError(
            f"uncovered {uncovered.shape} and zero {zero.shape} must both be (T, D) with T = len(groups) = {len(groups)} > 0"
        )
    rounds = np.flatnonzero(groups == groups[-1])
    candidates = np.ones((uncovered.shape[1], uncovered.shape[1]), bool)  # candidates[s, i]: i may be phi^-1(s)
    for t in rounds:
        candidates[uncovered[t]] &= zero[t][None, :]
    return candidates.sum(axis=1)


def padding_miss_probability(nonzeros: int, dim: int, capacity: int) -> float:
    """P(a given zero entry of a user's update is in none of its shards' padding).

    The update's ``nonzeros`` are cut into shards of M = ``capacity`` (the last one holds
    the remainder, one empty shard when there is none); a shard with c non-zeros is padded
    with M - c indices drawn uniformly from the D - c outside it, so it misses a given zero
    entry with probability 1 - (M - c) / (D - c) = (D - M) / (D - c), independently per shard.
    """
    if not 1 <= capacity <= dim or not 0 <= nonzeros <= dim:
        raise InputError(f"need 1 <= M={capacity} <= D={dim} and 0 <= nonzeros={nonzeros} <= D")
    rest = nonzeros % capacity
    if nonzeros and not rest:
        return 1.0  # every shard is full: no padding at all
    return (dim - capacity) / (dim - rest)


def expected_origin_candidates(updates: np.ndarray, zero: np.ndarray, groups: np.ndarray, capacity: int) -> np.ndarray:
    """E|C(i)| for every plain index i over the users' padding draws (the mean over slots is the mean over origins).

    ``updates`` (T, N, D): every user's update of every round; ``zero`` and ``groups`` as in
    :func:`origin_candidates`. Index i is uncovered in round t with probability
    p_t(i) = prod_n [w_t^(n)(i) = 0] q_t^(n) (:func:`padding_miss_probability`), independently
    across rounds, so with R the rounds that share the last phi

        E|C(i)| = sum_j prod_{t in R} (1 - p_t(i) (1 - [j in Z_t])).

    Columns j with the same zero pattern over R share a term, so the work is D x (distinct patterns).
    """
    updates = np.asarray(updates)
    zero = np.asarray(zero, bool)
    groups = np.asarray(groups)
    if updates.ndim != 3 or zero.ndim != 2 or updates.shape[::2] != zero.shape or len(groups) != len(zero) or not len(groups):
        raise InputError(
            f"updates {updates.shape} must be (T, N, D) and zero {zero.shape} (T, D) with T = len(groups) = {len(groups)} > 0"
        )
    dim = zero.shape[1]
    rounds = np.flatnonzero(groups == groups[-1])
    nonzero = updates[rounds] != 0
    miss = np.array([[padding_miss_probability(int(c), dim, capacity) for c in row] for row in nonzero.sum(axis=2)])
    p = np.where(nonzero, 0.0, miss[:, :, None]).prod(axis=1)  # (|R|, D): P(i uncovered in round t)
    patterns, counts = np.unique(zero[rounds].T, axis=0, return_counts=True)  # (P, |R|)
    expected = np.ones((dim, len(patterns)))
    for k in range(len(rounds)):
        expected *= 1.0 - np.outer(p[k], ~patterns[:, k])
    return expected @ counts
