"""CP-SAT (plugins/album/cpsat.py) against brute force, HiGHS and the branch and bound."""

import warnings

import numpy as np
import pytest

from vispriv.plugins.album import cpsat, milp
from vispriv.plugins.album.protocol import prune, public_protocol
from vispriv.plugins.album.pruning import advantage, brute_force_budget, brute_force_topk, protected_k
from vispriv.plugins.defenses.album_pruning import AlbumPruning


def _albums(n_albums, seed, dyadic=False):
    """Small albums (2-10 photos, 3-7 places); ``dyadic``: scores on a 1/2 grid, so many exact ties."""
    rng = np.random.default_rng(seed)
    for trial in range(n_albums):
        n, m = int(rng.integers(2, 11)), int(rng.integers(3, 8))
        S = rng.normal(0, 2, (n, m))
        S[:, 0] += 1.5
        if dyadic:
            S = np.round(2 * S) / 2
        fixed = rng.random(n) < 0.25 if trial % 3 == 0 else None
        theta = 0.0 if dyadic else [0.0, 0.3][trial % 2]
        yield advantage(S, 0, theta)[0], S[:, 0], fixed, int(rng.integers(1, m)), int(rng.integers(0, n + 1))


def _check_budget(result, A, d, fixed):
    assert result.status == "optimal"
    assert (~result.keep).sum() <= d
    assert fixed is None or result.keep[fixed].all()
    assert protected_k(A, result.keep) == brute_force_budget(A, d, fixed)


def _check_topk(result, A, k, fixed):
    best = brute_force_topk(A, k, fixed)
    if best < 0:
        assert result.status == "infeasible" and result.keep is None
        return
    assert result.status == "optimal"
    assert int(result.keep.sum()) == best and protected_k(A, result.keep) >= k
    assert fixed is None or result.keep[fixed].all()


@pytest.mark.parametrize("dyadic", [False, True], ids=["float", "ties"])
def test_cpsat_budget_equals_brute_force(dyadic):
    for A, St, fixed, _, d in _albums(30, 21 + dyadic, dyadic):
        _check_budget(cpsat.solve_budget(A, d, St, fixed), A, d, fixed)
        _check_budget(cpsat.cpsat_budget(A, d, fixed), A, d, fixed)  # no hint


@pytest.mark.parametrize("dyadic", [False, True], ids=["float", "ties"])
def test_cpsat_topk_equals_brute_force(dyadic):
    for A, _, fixed, k, _ in _albums(30, 23 + dyadic, dyadic):
        _check_topk(cpsat.solve_topk(A, k, fixed), A, k, fixed)
        _check_topk(cpsat.cpsat_topk(A, k, fixed), A, k, fixed)  # no hint


def test_exact_ties_count_as_beating():
    """Both places tie the true place exactly with every photo kept (ties beat, eq. 2):
    protected-k 2 with no deletion. The scores scale exactly, so no margin is needed."""
    A = np.array([[-1.0, -0.5], [0.5, -1.0], [0.25, 0.75], [0.25, 0.75]])
    assert np.all(A.sum(axis=0) == 0)
    assert np.all(cpsat.integer_scores(A).delta == 0)
    for d in (0, 1):
        result = cpsat.cpsat_budget(A, d)
        assert result.status == "optimal" and protected_k(A, result.keep) == 2 == brute_force_budget(A, d)
        assert result.keep.all()  # nothing to delete: the minimal optimal set is empty
    top2 = cpsat.cpsat_topk(A, 2)
    assert top2.status == "optimal" and int(top2.keep.sum()) == 4 == brute_force_topk(A, 2)


def test_budget_exactly_at_the_needed_deletions():
    """Photos 0-2 count -1 against both places, photos 3-7 +0.125 for place 0 and 0 for
    place 1: both places beat only once all three are gone (place 1 by an exact tie), so
    d = 3 reaches protected-k 2 and d = 2 reaches 0."""
    A = np.zeros((8, 2))
    A[:3] = -1.0
    A[3:, 0] = 0.125
    for d, best in ((2, 0), (3, 2), (4, 2)):
        result = cpsat.cpsat_budget(A, d)
        assert brute_force_budget(A, d) == best
        assert result.status == "optimal" and protected_k(A, result.keep) == best and (~result.keep).sum() <= d
    for k in (1, 2):
        top = cpsat.cpsat_topk(A, k)
        assert top.status == "optimal" and int(top.keep.sum()) == 5 == brute_force_topk(A, k)
        np.testing.assert_array_equal(top.keep, [False] * 3 + [True] * 5)


def test_float_near_tie_is_decided_by_protected_k():
    """0.3 - 0.1 - 0.2 is -2.8e-17 in floating point (place 0 loses), 0.1 + 0.2 - 0.3 is
    +5.6e-17 (place 1 beats): inside the rounding margin, the float sum decides."""
    A = np.array([[0.3, 0.1], [-0.1, 0.2], [-0.2, -0.3]])
    ints = cpsat.integer_scores(A)
    assert np.all(ints.delta > 0)
    assert protected_k(A, np.ones(3, dtype=bool)) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        result = cpsat.cpsat_budget(A, 0)
    assert protected_k(A, result.keep) == 1 == brute_force_budget(A, 0)
    assert result.status in ("optimal", "feasible")


def test_near_tie_that_the_relaxed_rows_overcount_is_not_claimed_optimal():
    """Place 0 loses by -2.8e-17 with every photo kept (d = 0): the relaxed rows (margin)
    count it, the float check does not, and no integer model can tell; the result is the
    verified mask, reported as not proven, with a warning."""
    A = np.array([[0.3, 1.0], [-0.1, 1.0], [-0.2, 1.0]])
    with pytest.warns(UserWarning, match="not proven optimal"):
        result = cpsat.cpsat_budget(A, 0)
    assert result.status == "feasible" and protected_k(A, result.keep) == 1 == brute_force_budget(A, 0)


def test_cpsat_equals_highs_and_branch_and_bound():
    rng = np.random.default_rng(31)
    for _ in range(4):
        S = rng.normal(0, 2, (16, 40))
        S[:, 0] += 1.0
        A = advantage(S, 0)[0]
        d = 6
        values = {protected_k(A, r.keep) for r in (
            cpsat.solve_budget(A, d, S[:, 0]), milp.naive_budget(A, d), milp.fast_budget(A, d, S[:, 0], descend_places=0),
        ) if r.status == "optimal"}
        assert len(values) == 1
        kept = {int(r.keep.sum()) for r in (cpsat.solve_topk(A, 3), milp.naive_topk(A, 3), milp.fast_topk(A, 3)) if r.status == "optimal"}
        assert len(kept) == 1


def test_same_mask_on_every_run():
    rng = np.random.default_rng(41)
    S = rng.normal(0, 2, (14, 30))
    A = advantage(S, 0)[0]
    first = cpsat.solve_budget(A, 4, S[:, 0])
    again = cpsat.solve_budget(A, 4, S[:, 0])
    np.testing.assert_array_equal(first.keep, again.keep)
    # minimal: restoring any deleted photo lowers protected-k
    for i in np.flatnonzero(~first.keep):
        keep = first.keep.copy()
        keep[i] = True
        assert protected_k(A, keep) < protected_k(A, first.keep)


def test_a_solve_stopped_early_is_not_optimal():
    """Hard synthetic albums and a time limit of 10 ms: CP-SAT cannot prove them."""
    rng = np.random.default_rng(51)
    S = rng.normal(0, 2, (40, 300))
    S[:, 0] += 0.5
    A = advantage(S, 0)[0]
    budget = cpsat.solve_budget(A, 20, S[:, 0], time_limit=0.01)
    assert budget.status == "feasible" and (~budget.keep).sum() <= 20
    topk = cpsat.solve_topk(A, 40, time_limit=0.01)
    assert topk.status in ("feasible", "unknown")
    assert topk.keep is None or protected_k(A, topk.keep) >= 40


@pytest.mark.parametrize("mode", ["milp-topk", "milp-budget"])
def test_defense_dispatches_cpsat(mode):
    rng = np.random.default_rng(61)
    S = rng.normal(0, 2, (9, 6))
    S[:, 2] += 1.5
    defense = AlbumPruning(AlbumPruning.Config(mode=mode, formulation="cpsat", k=2, budget=0.3))
    result = prune(S, 2, public_protocol(defense.name, defense.config.model_dump()), np.zeros(9, dtype=bool))
    A = advantage(S, 2)[0]
    assert result.status == "optimal"
    if mode == "milp-topk":
        assert int(result.keep.sum()) == brute_force_topk(A, 2)
    else:
        assert protected_k(A, result.keep) == brute_force_budget(A, 2)


def test_a_cell_with_unproven_albums_warns(tmp_path, monkeypatch):
    """An album an exact mode does not prove is counted in unproven_share, not optimal_share, and the cell warns."""
    from vispriv.harness import Cache, CellContext
    from vispriv.plugins.album.dataset import AlbumWorld
    from vispriv.plugins.album.pruning import PruneResult

    ctx = CellContext(seed=0, cache=Cache(tmp_path / "cache"), artifact_dir=tmp_path / "art", quiet=True)
    scene = AlbumWorld(AlbumWorld.Config(collection="R-8", n_places=16, dim=16, train_per_place=40, epochs=3, n_albums=3)).load(ctx)
    solve = cpsat.solve_budget
    calls = []

    def first_unproven(A, d, St, fixed, **limits):
        calls.append(1)
        result = solve(A, d, St, fixed, **limits)
        return PruneResult(result.keep, "feasible" if len(calls) == 1 else result.status, result.seconds)

    monkeypatch.setattr(cpsat, "solve_budget", first_unproven)
    defense = AlbumPruning(AlbumPruning.Config(mode="milp-budget", formulation="cpsat", scores_from="adversary"))
    with pytest.warns(UserWarning, match="1 of 3 albums not proven optimal"):
        protected = defense.protect(scene.private, scene.public, ctx)
    assert protected.utility["unproven_share"] == pytest.approx(1 / 3)
    assert protected.utility["optimal_share"] == pytest.approx(2 / 3)
