"""Report arithmetic at its boundaries, by hand: two shared images, ties, identical frontier points, a cell run twice."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from vispriv.harness.report import CellRow, pivot
from vispriv.harness.report.frontier import FrontierPoint, frontiers, mark_front, worst_case
from vispriv.harness.report.paired import Step, ladders, overlap_robust_se
from vispriv.harness.report.tables import _fmt, _ordered, _sort_key, _unclamp, param_pivot
from vispriv.harness.stats import mean_se


def _row(run_id: str, attack: str, defense: str = "def", metrics: dict | None = None, hib: dict | None = None,
         params: dict | None = None, dataset: str = "d") -> CellRow:
    return CellRow(run_id=run_id, scenario="s", dataset=dataset, defense=defense, attack=attack, params=params or {},
                   metrics=metrics or {"images/ssim": 0.0}, higher_is_better=hib or {"images/ssim": True}, artifact_uri="")


# -- paired differences ---------------------------------------------------------------------
def test_two_shared_images_give_a_difference_and_its_standard_error_by_hand():
    scores = {"a": {"x": 0.9, "y": 0.5}, "b": {"x": 0.6, "y": 0.4}}
    (ladder,) = ladders([_row("a", "A"), _row("b", "B")], "images/ssim", scores)
    top = ladder.steps[0]
    # differences 0.3 and 0.1: mean 0.2, sample sd sqrt(0.02), s.e. sqrt(0.02) / sqrt(2) = 0.1, ratio 2
    assert top.n_pairs == 2 and top.diff == pytest.approx(0.2) and top.diff_se == pytest.approx(0.1)
    assert top.ratio == pytest.approx(2.0)
    assert top.diff_se_overlap is None and top.n_effective is None  # no grid crops


def test_a_constant_gap_has_an_infinite_ratio_and_no_gap_none():
    assert Step("a", 1.0, 2, diff=0.25, diff_se=0.0).ratio == math.inf
    assert Step("a", 1.0, 2, diff=-0.25, diff_se=0.0).ratio == -math.inf
    assert Step("a", 1.0, 2, diff=0.0, diff_se=0.0).ratio is None
    assert Step("a", 1.0, 2, diff=0.3, diff_se=None).ratio is None
    scores = {"a": {"x": 1.0, "y": 0.5}, "b": {"x": 0.75, "y": 0.25}}  # gaps 0.25 and 0.25, exact in binary
    (ladder,) = ladders([_row("a", "A"), _row("b", "B")], "images/ssim", scores)
    assert (ladder.steps[0].diff, ladder.steps[0].diff_se, ladder.steps[0].ratio) == (0.25, 0.0, math.inf)


def test_cells_tied_on_their_mean_keep_their_order_and_a_lower_is_better_gap_is_positive():
    scores = {"a": {"x": 0.5, "y": 0.3}, "b": {"x": 0.3, "y": 0.5}, "c": {"x": 0.1, "y": 0.2}}
    (ladder,) = ladders([_row("b", "B"), _row("a", "A"), _row("c", "C")], "images/ssim", scores)
    assert [s.label.split(" vs ")[0] for s in ladder.steps] == ["B", "A", "C"]  # B and A tie at 0.4: as listed
    assert ladder.steps[0].diff == pytest.approx(0.0)
    low = {"images/ssim": False}
    (ladder,) = ladders([_row("a", "A", hib=low), _row("c", "C", hib=low)], "images/ssim", scores)
    assert [s.label.split(" vs ")[0] for s in ladder.steps] == ["C", "A"]
    assert ladder.steps[0].diff == pytest.approx(0.25) and ladder.steps[0].mean == pytest.approx(0.15)


def test_overlap_robust_se_of_two_neighbouring_crops_by_hand():
    # e = (-0.5, 0.5); w = [[1, 1/2], [1/2, 1]]: e w e = 0.25 + 0.25 - 0.25 = 0.25, over n(n-1) = 2 -> sqrt(1/8)
    assert overlap_robust_se(["p@0,0", "p@0,1"], np.array([1.0, 2.0])) == pytest.approx(math.sqrt(0.125))
    # diagonal neighbours: (1/2)(1/2) = 1/4 -> (0.25 + 0.25 - 0.125) / 2
    assert overlap_robust_se(["p@0,0", "p@1,1"], np.array([1.0, 2.0])) == pytest.approx(math.sqrt(0.1875))
    # two steps apart, or two photos: independent, sd / sqrt(n)
    assert overlap_robust_se(["p@0,0", "p@0,2"], np.array([1.0, 2.0])) == pytest.approx(0.5)
    assert overlap_robust_se(["p@0,0", "q@0,0"], np.array([1.0, 2.0])) == pytest.approx(0.5)
    assert overlap_robust_se(["p@0,0"], np.array([1.0])) is None
    # three steps apart (past the bandwidth): the kernel is 0, not negative -- sd / sqrt(n) = sqrt(2) / sqrt(2)
    assert overlap_robust_se(["p@0,0", "p@0,3"], np.array([0.0, 2.0])) == pytest.approx(1.0)
    assert overlap_robust_se(["p@0,0", "p@3,3"], np.array([0.0, 2.0])) == pytest.approx(1.0)


# -- frontier -----------------------------------------------------------------------------
def _points(*coords: tuple[float, float]) -> list[FrontierPoint]:
    return [FrontierPoint(f"d{i}", f"d{i}", u, p, "a") for i, (u, p) in enumerate(coords)]


def test_identical_points_are_both_on_the_front_and_an_equal_axis_still_dominates():
    points = _points((0.5, 0.5), (0.5, 0.5), (0.5, 0.6), (0.4, 0.5), (0.9, 0.9))
    mark_front(points, utility_higher_is_better=True, privacy_higher_is_better=True)
    # (0.5, 0.6): same utility, more attack success: dominated; (0.4, 0.5): same success, less utility: dominated
    assert [p.on_front for p in points] == [True, True, False, False, True]


@pytest.mark.parametrize("u_hib,p_hib,front", [
    (True, True, [False, True, True]),     # high utility good, high success bad
    (False, True, [True, True, False]),    # a cost: low is good
    (True, False, [False, False, True]),   # e.g. an error the attack wants low: high is good for the defender
    (False, False, [True, False, True]),
])
def test_the_front_follows_both_directions(u_hib, p_hib, front):
    points = _points((0.2, 0.5), (0.4, 0.3), (0.8, 0.9))
    mark_front(points, u_hib, p_hib)
    assert [p.on_front for p in points] == front


def test_a_tie_between_attacks_goes_to_the_first_listed():
    assert worst_case({"b": 0.7, "a": 0.7, "c": 0.1}, True) == ("b", 0.7)
    assert worst_case({"c": 0.1, "a": 0.1}, False) == ("c", 0.1)


def test_frontier_points_take_the_strongest_attack_and_sort_by_utility_then_label():
    rows = [
        _row("1", "dlg", "z", {"utility/u": 0.5, "images/ssim": 0.3}),
        _row("2", "ig", "z", {"utility/u": 0.5, "images/ssim": 0.6}),
        _row("3", "dlg", "a", {"utility/u": 0.5, "images/ssim": 0.2}),
        _row("4", "dlg", "none", {"images/ssim": 0.9}, params={"defense": "none"}),
    ]
    (f,) = frontiers(rows, "utility/u", "images/ssim")
    assert [(p.label, p.privacy, p.attack) for p in f.points] == [("a", 0.2, "dlg"), ("z", 0.6, "ig")]
    assert f.missing == ["none"]  # a higher-is-better utility the baseline did not log: left out, named


def test_the_baseline_stands_at_cost_zero_only_where_the_utility_is_a_cost():
    def rows(u_hib: bool) -> list[CellRow]:
        hib = {"utility/u": u_hib, "images/ssim": True}
        return [_row("1", "dlg", "dp", {"utility/u": 0.5, "images/ssim": 0.3}, hib),
                _row("2", "dlg", "none", {"images/ssim": 0.9}, hib, params={"defense": "none"})]

    (cost,) = frontiers(rows(False), "utility/u", "images/ssim")  # lower is better: the baseline costs nothing
    assert [(p.label, p.utility, p.privacy) for p in cost.points] == [("none (cost 0 by definition)", 0.0, 0.9),
                                                                       ("dp", 0.5, 0.3)]
    assert cost.missing == []
    (gain,) = frontiers(rows(True), "utility/u", "images/ssim")  # higher is better: no value to give it
    assert [p.label for p in gain.points] == ["dp"] and gain.missing == ["none"]


# -- pivots ------------------------------------------------------------------------------
def test_a_cell_run_twice_is_the_mean_and_the_standard_error_of_its_two_runs():
    rows = [_row("r1", "dlg", "dp", {"images/ssim": 1.0}), _row("r2", "dlg", "dp", {"images/ssim": 4.0}),
            _row("r3", "dlg", "none", {"images/ssim": 2.0})]
    (p,) = pivot(rows, "images/ssim")
    assert p.values[("dlg", "dp")] == 2.5 and p.errors[("dlg", "dp")] == pytest.approx(1.5)  # sd sqrt(4.5) / sqrt(2)
    assert p.values[("dlg", "none")] == 2.0 and ("dlg", "none") not in p.errors
    assert p.notes == ["cells run more than once (other matrix seeds): mean ± standard error over their runs (up to 2)"]
    assert p.cols == ["none", "dp"]  # the baseline first, then by name


def test_mean_se_by_hand_at_one_and_two_values():
    assert mean_se([1.0, 4.0]) == (2.5, pytest.approx(1.5))
    mean, se = mean_se([3.0])
    assert mean == 3.0 and math.isnan(se)
    assert mean_se([2.0, 2.0, 2.0]) == (2.0, 0.0)


def test_a_parameter_table_shows_the_last_cell_where_two_share_a_place():
    rows = [
        _row("r1", "dlg", "dp(a=1)", {"images/ssim": 0.1}, params={"defense.sigma": "1"}),
        _row("r2", "dlg", "dp(a=2)", {"images/ssim": 0.7}, params={"defense.sigma": "1"}),
        _row("r3", "dlg", "dp(a=3)", {"images/ssim": 0.4}, params={"defense.sigma": "10"}),
        _row("r4", "dlg", "dp(a=3)", {"images/ssim": 0.6}, params={"defense.sigma": "10"}),
        _row("r5", "dlg", "dp(a=4)", {"images/ssim": 0.5}, params={"defense.sigma": "2"}),
    ]
    (p,) = param_pivot(rows, "images/ssim", [], "defense.sigma")
    assert p.cols == ["1", "2", "10"]  # numbers in numeric order
    assert p.values[("dlg", "1")] == 0.7 and ("dlg", "1") not in p.errors
    assert p.values[("dlg", "10")] == pytest.approx(0.5) and p.errors[("dlg", "10")] == pytest.approx(0.1)


def test_ordering_and_number_formats():
    assert _ordered(["b", "none", "a", "b"]) == ["none", "a", "b"]
    assert sorted(["10", "inf", "2", "x", "-1"], key=_sort_key) == ["-1", "2", "10", "inf", "x"]
    assert _fmt(1e4, 3) == "1e+04" and _fmt(9999.0, 3) == "9999.000" and _fmt(1e-3, 3) == "0.001"
    assert _fmt(9.9e-4, 3) == "0.00099" and _fmt(0.0, 3) == "0.000" and _fmt(-math.inf, 3) == "-inf"
    # MLflow's sqlite store keeps +-inf as +-float max: both read back as infinities, the sign kept
    assert _unclamp(sys.float_info.max) == math.inf and _unclamp(-sys.float_info.max) == -math.inf
    assert _unclamp(-1e308) == -1e308 and _unclamp(0.5) == 0.5
