"""The empirical privacy audit: Clopper-Pearson bounds, eps_lb <= eps, broken mechanisms flagged."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vispriv.harness.errors import InputError
from vispriv.plugins.descriptor_release import ldp
from vispriv.plugins.descriptor_release.privacy_audit import NO_BOUND_NOTE, VectorIds, audit_finite_set, clopper_pearson


def test_clopper_pearson_hand_values():
    lo, hi = clopper_pearson(np.array([0, 5, 10]), 10, 0.05)
    assert lo[0] == 0.0 and hi[0] == pytest.approx(1 - 0.025 ** (1 / 10))  # closed form at k = 0
    assert hi[2] == 1.0 and lo[2] == pytest.approx(0.025 ** (1 / 10))
    assert lo[1] == pytest.approx(0.18709, abs=1e-4) and hi[1] == pytest.approx(0.81291, abs=1e-4)


def _ldp(k: int, m: int, eps: float):
    return lambda x, n, rng: ldp.omega_subset(np.full(n, x), k, m, eps, rng)[0]


@pytest.mark.parametrize("k,m,eps", [(50, 2, 1.0), (40, 1, 2.0), (200, 4, 3.0), (30, 3, 0.0)])
def test_lb_never_exceeds_epsilon_of_ldp_feat(k, m, eps):
    res = audit_finite_set(_ldp(k, m, eps), 3, 7, 100_000, np.random.default_rng(0), claimed_epsilon=eps)
    assert res.epsilon_lb <= eps and not res.violated
    assert res.epsilon_ub >= eps - 0.2  # the small-|K| audits are nearly tight: the interval reaches eps
    if eps > 0:
        assert res.epsilon_lb > 0.5 * eps  # and the bound is not vacuous


def test_full_pipeline_with_quantiser_and_vector_ids():
    rng = np.random.default_rng(1)
    k = ldp.jittered_dictionary(rng.random((10, 128)).astype(np.float32), 60, 0.05, seed=0)
    quant, ids = ldp.Quantiser(k), VectorIds()

    def mechanism(d, n, r):  # releases descriptors (vectors), encoded back to ids by VectorIds
        z, _ = ldp.omega_subset(np.repeat(quant.assign(d), n), len(k), 2, 1.5, r)
        return ids(k[z])

    res = audit_finite_set(mechanism, k[4:5] + 0.001, k[9:10], 60_000, rng, claimed_epsilon=1.5)
    assert 0.8 < res.epsilon_lb <= 1.5


def test_broken_mechanism_that_always_includes_true_is_flagged():
    def broken(x, n, rng):
        z, _ = ldp.omega_subset(np.full(n, x), 100, 2, 1.0, rng)
        has = np.any(z == x, axis=1)
        z[~has, 0] = x  # always releases d' (the 'hide among confounders' pattern of affine lifting)
        return z

    res = audit_finite_set(broken, 3, 7, 20_000, np.random.default_rng(2), claimed_epsilon=1.0)
    assert res.violated and res.epsilon_lb > 5.0 and "VIOLATION" in res.note


def test_no_claimed_bound_gets_a_note():
    res = audit_finite_set(_ldp(20, 1, 1.0), 0, 1, 1000, np.random.default_rng(3), claimed_epsilon=None)
    assert res.note == NO_BOUND_NOTE and not res.violated


def test_epsilon_inf_is_consistent_and_bad_input():
    res = audit_finite_set(_ldp(20, 1, math.inf), 0, 1, 2000, np.random.default_rng(4), claimed_epsilon=math.inf)
    assert res.epsilon_lb > 5 and not res.violated
    with pytest.raises(InputError, match="n_trials"):
        audit_finite_set(_ldp(20, 1, 1.0), 0, 1, 5, np.random.default_rng(0))
    with pytest.raises(InputError, match="integer ids"):
        audit_finite_set(lambda x, n, r: np.zeros((n, 2)), 0, 1, 100, np.random.default_rng(0))


def _always(element_of):
    """A deterministic mechanism: input x always releases the one-element set {element_of[x]} (padded with -1)."""
    return lambda x, n, rng: np.tile(np.array([[element_of[x], -1]], np.int64), (n, 1))


def test_the_lower_bound_of_two_inputs_told_apart_every_time_is_clopper_pearsons_by_hand():
    # 20 trials: 10 select, 10 measure. "element 0 in release" holds 10 of 10 times under x1, 0 of 10 under x2.
    res = audit_finite_set(_always({1: 0, 2: 1}), 1, 2, 21, np.random.default_rng(0), claimed_epsilon=None)
    edge = 0.025 ** (1 / 10)  # Clopper-Pearson at 95 %: lo of 10/10, and 1 - hi of 0/10
    assert res.epsilon_lb == pytest.approx(math.log(edge) - math.log(1 - edge), rel=1e-12)
    assert res.epsilon_point == pytest.approx(math.log(10.5 / 11) - math.log(0.5 / 11), rel=1e-12)
    assert res.epsilon_ub == math.inf and res.counts == (10, 0) and res.n_trials == 20
    assert res.event == "element 0 in release; Pr under x1 vs x2"


def test_the_lower_bound_is_never_negative():
    """Two inputs released alike: every event's bound is below 0, and the reported bound is 0, not log(lo / hi) < 0."""
    res = audit_finite_set(_always({1: 4, 2: 4}), 1, 2, 20, np.random.default_rng(0), claimed_epsilon=0.0)
    assert res.epsilon_lb == 0.0 and res.epsilon_point == 0.0 and res.counts == (10, 10)
    assert res.epsilon_ub == pytest.approx(-math.log(0.025 ** (1 / 10)))
    assert not res.violated and res.note == "consistent with the claimed epsilon=0"


def test_a_claim_exactly_at_the_lower_bound_is_no_violation():
    mechanism = _always({1: 0, 2: 1})
    lb = audit_finite_set(mechanism, 1, 2, 20, np.random.default_rng(0)).epsilon_lb
    at = audit_finite_set(mechanism, 1, 2, 20, np.random.default_rng(0), claimed_epsilon=lb)
    assert not at.violated and at.metrics()["epsilon_empirical_violation"] == 0.0
    below = audit_finite_set(mechanism, 1, 2, 20, np.random.default_rng(0), claimed_epsilon=lb - 1e-9)
    assert below.violated and below.note == f"VIOLATION: epsilon_lb={lb:.3g} exceeds the claimed epsilon={lb - 1e-9:g}"


def test_the_audits_limits_word_for_word():
    mechanism = _always({1: 0, 2: 1})
    rng = np.random.default_rng(0)
    with pytest.raises(InputError, match=r"^n_trials must be >= 20 for a meaningful audit; got 19$"):
        audit_finite_set(mechanism, 1, 2, 19, rng)
    assert audit_finite_set(mechanism, 1, 2, 20, rng, confidence=0.5).confidence == 0.5
    for bad in (0.49, 1.0):
        with pytest.raises(InputError, match=rf"^confidence must be in \[0.5, 1\); got {bad}$"):
            audit_finite_set(mechanism, 1, 2, 20, rng, confidence=bad)
    empty = lambda x, n, r: np.full((n, 2), -1, np.int64)  # noqa: E731
    with pytest.raises(InputError, match=r"^the mechanism released only empty sets; nothing to audit$"):
        audit_finite_set(empty, 1, 2, 20, rng)
    with pytest.raises(InputError, match=r"^a set mechanism must return \(20, s\) integer ids; got float64 \(20, 1\)$"):
        audit_finite_set(lambda x, n, r: np.zeros((n, 1)), 1, 2, 20, rng)
