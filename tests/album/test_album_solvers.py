"""Pruning algorithms against brute force and the paper's hand constructions."""

import subprocess
import sys

import numpy as np
import pytest

from vispriv.harness.errors import ConfigError, InputError
from vispriv.plugins.album import milp
from vispriv.plugins.album.pruning import (
    advantage,
    brute_force_budget,
    brute_force_topk,
    caps,
    check_k,
    check_scores,
    greedy_budget,
    greedy_topk,
    protected_k,
    top1_exact,
)


def _instances(n_instances, seed):
    rng = np.random.default_rng(seed)
    for trial in range(n_instances):
        n, m = int(rng.integers(2, 9)), int(rng.integers(3, 7))
        S = rng.normal(0, 2, (n, m))
        S[:, 0] += 1.5
        fixed = rng.random(n) < 0.25 if trial % 3 == 0 else None
        yield S, fixed, int(rng.integers(1, m)), int(rng.integers(0, n)), rng.choice([0.0, 0.3])


def _kept(result):
    return -1 if result.keep is None else int(result.keep.sum())


@pytest.mark.parametrize("formulation", ["naive", "fast"])
def test_topk_milp_equals_brute_force(formulation):
    solve = milp.fast_topk if formulation == "fast" else milp.naive_topk
    for S, fixed, k, _, theta in _instances(40, 1):
        A, _ = advantage(S, 0, theta)
        result = solve(A, k, fixed)
        assert _kept(result) == brute_force_topk(A, k, fixed)
        if result.keep is not None:
            assert result.status == "optimal"
            assert protected_k(A, result.keep) >= k
            assert fixed is None or result.keep[fixed].all()


@pytest.mark.parametrize("formulation", ["naive", "fast"])
def test_budget_milp_equals_brute_force_and_respects_budget(formulation):
    for S, fixed, _, d, theta in _instances(40, 2):
        A, _ = advantage(S, 0, theta)
        if formulation == "fast":
            result = milp.fast_budget(A, d, S[:, 0], fixed)
        else:
            result = milp.naive_budget(A, d, fixed)
        assert (~result.keep).sum() <= d
        assert protected_k(A, result.keep) == brute_force_budget(A, d, fixed)


def test_top1_exact_equals_milp_and_brute_force():
    for S, fixed, _, _, theta in _instances(40, 3):
        A, _ = advantage(S, 0, theta)
        exact = top1_exact(A, fixed)
        assert _kept(exact) == brute_force_topk(A, 1, fixed) == _kept(milp.naive_topk(A, 1, fixed))


def test_caps_match_single_place_brute_force():
    rng = np.random.default_rng(4)
    A = rng.normal(0, 1, (7, 5))
    fixed = np.zeros(7, bool)
    fixed[2] = True
    for j in range(5):
        assert caps(A, fixed)[j] == brute_force_topk(A[:, [j]], 1, fixed)


def _table5(N, eps=0.05):
    """Supplement A, Table 5: rows X_1..X_N, X_{N+1}, X_{N+2}, X_{N+3}; columns c1, c2, ct.

    The table is garbled in the text; the rows follow from eq. (10): X_{N+1} and X_{N+2}
    each carry a very low score ``a`` for one wrong place.
    """
    a = (1 / 3 - eps) ** 2 * (1 / 3 - 2 * eps) / (2 * (1 / 3 + eps) ** 2)
    rows = [[1 / 3, 1 / 3, 1 / 3]] * N
    rows += [[a, 2 / 3 + eps - a, 1 / 3 - eps], [2 / 3 + eps - a, a, 1 / 3 - eps], [1 / 3 + eps, 1 / 3 + eps, 1 / 3 - 2 * eps]]
    return np.log(np.array(rows))


@pytest.mark.parametrize("N", [1, 4])
def test_greedy_is_strictly_worse_on_observation_1(N):
    S = _table5(N)
    t = 2
    A, _ = advantage(S, t)
    assert protected_k(A, np.ones(len(S), bool)) == 0  # the true place wins the whole album
    greedy = greedy_topk(S, A, t, 2, None)
    optimal = milp.fast_topk(A, 2)
    assert int((~optimal.keep).sum()) == 2  # delete X_{N+1} and X_{N+2} only
    assert not optimal.keep[N] and not optimal.keep[N + 1]
    assert int((~greedy.keep).sum()) >= N + 2 > 2
    # the first N greedy deletions (the uniform photos) leave the true place first
    keep = np.ones(len(S), bool)
    keep[:N] = False
    assert protected_k(A, keep) == 0


def test_greedy_checks_the_configured_k():
    rng = np.random.default_rng(5)
    S = rng.normal(0, 1, (10, 8))
    S[:, 0] += 1.0
    A, _ = advantage(S, 0)
    result = greedy_topk(S, A, 0, 3, None)
    assert protected_k(A, result.keep) >= 3
    budget = greedy_budget(S, 0, 4)
    assert (~budget.keep).sum() == 4 and not budget.keep[np.argsort(-S[:, 0])[:4]].any()


def test_user_preference_infeasible_is_reported():
    S = np.log(np.array([[0.98, 0.01, 0.01], [0.4, 0.3, 0.3], [0.4, 0.3, 0.3]]))
    A, _ = advantage(S, 0)
    fixed = np.array([True, False, False])
    assert milp.fast_topk(A, 1, fixed).status == "infeasible"
    assert top1_exact(A, fixed).status == "infeasible"
    assert greedy_topk(S, A, 0, 1, fixed).status == "infeasible"


def test_bad_input_is_rejected():
    with pytest.raises(InputError, match="at least 2 photos"):
        check_scores(np.zeros((1, 4)), 0)
    with pytest.raises(InputError, match="NaN"):
        check_scores(np.array([[0.0, np.nan], [0.0, 0.0]]), 0)
    with pytest.raises(InputError, match="finite"):
        check_scores(np.array([[0.0, -np.inf], [0.0, 0.0]]), 0)
    with pytest.raises(ConfigError, match="k=4"):
        check_k(4, 4)


def test_milp_after_an_lp_bound_in_a_fresh_process():
    """HiGHS keeps one thread scheduler per process: an LP bound solved before any MILP
    (as the surrogate filters do) used to make every later ``threads=1`` MILP fail, so the
    budget search reported ``feasible`` (not proven) on an album it could prove."""
    code = (
        "import numpy as np, cvxpy as cp\n"
        "from vispriv.plugins.album import milp\n"
        "from vispriv.plugins.album.surrogate import lp_bounds\n"
        "A = np.random.default_rng(0).normal(0, 1, (8, 5))\n"
        "lp_bounds(A, np.zeros(8, bool), np.arange(5), [np.array([0, 1])], 4)\n"
        "z = cp.Variable(3, boolean=True)\n"
        "print(milp._solve(cp.Problem(cp.Maximize(cp.sum(z)), [cp.sum(z) <= 2]), 'HIGHS', 10))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "optimal"
