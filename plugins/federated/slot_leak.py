"""What the aggregator learns about phi from uncovered slots and zeros of the average (issue 14 item 2).

In round t the aggregator A knows, for every message, the phi-space positions phi K^(n)
(eq. 8), hence the set U_t of phi-slots that no user covered: their aggregated ciphertext
is a power of Enc0 (eqs. 5-6), so the decrypted sum is exactly 0 at the plain index
phi^-1(s). Everyone sees the published average w̄_{t+1} and its zero set Z_t. So the
origin phi^-1(s) of a slot s in U_t lies in Z_t. When the same phi serves several rounds,
A intersects over them:

    C(s) = intersection of Z_t over the rounds t sharing phi in which s was uncovered

(all D indices when s was never uncovered). With a fresh phi every round (the default
of :class:`~vispriv.plugins.federated.roles.KeyGenerator`) each round's slots are new
unknowns and C(s) is a single round's Z_t. Nothing here is secret to A: U_t is its own
intermediate computation (section 2.5's semi-honest party keeps it) and Z_t is public.
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
