"""Off a terminal a long stage prints a line at least every 30 s: stage, step, elapsed, estimated remaining."""

from __future__ import annotations

import io

from vispriv.harness import CellContext
from vispriv.harness.heartbeat import Heartbeat


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_line_per_interval_with_elapsed_and_remaining():
    clock, out = Clock(), io.StringIO()
    beat = Heartbeat("training", total=100, interval=30.0, stream=out, clock=clock)
    clock.now = 10.0
    beat.tick(5)
    assert out.getvalue() == ""  # not yet due
    clock.now = 31.0
    beat.tick(25)
    clock.now = 45.0
    beat.tick(40)  # 14 s after the last line: nothing
    clock.now = 62.0
    beat.tick(50)
    assert out.getvalue().splitlines() == [
        "[training] step 25/100, 31 s elapsed, ~93 s left",
        "[training] step 50/100, 62 s elapsed, ~62 s left",
    ]


def test_unknown_total_gives_no_estimate():
    clock, out = Clock(), io.StringIO()
    beat = Heartbeat("rounds", interval=30.0, stream=out, clock=clock)
    clock.now = 40.0
    beat.tick(3)
    assert out.getvalue().splitlines() == ["[rounds] step 3, 40 s elapsed"]


def test_progress_beats_only_off_a_terminal_and_never_under_quiet(capsys, monkeypatch):
    monkeypatch.setattr("vispriv.harness.heartbeat.INTERVAL", 0.0)
    ticks = iter(range(0, 1000, 10))  # a clock that advances 10 s per reading
    monkeypatch.setattr("vispriv.harness.heartbeat.time.monotonic", lambda: float(next(ticks)))
    off_terminal = CellContext(quiet=True, heartbeat=True)
    assert list(off_terminal.with_seed(3).progress(range(3), desc="album pruning", total=3, unit="album")) == [0, 1, 2]
    monkeypatch.undo()
    assert capsys.readouterr().err.splitlines() == [
        "[album pruning] album 1/3, 10 s elapsed, ~20 s left",
        "[album pruning] album 2/3, 20 s elapsed, ~10 s left",
        "[album pruning] album 3/3, 30 s elapsed",
    ]
    quiet = CellContext(quiet=True, heartbeat=False)
    assert list(quiet.progress(range(3), desc="album pruning", total=3)) == [0, 1, 2]
    assert capsys.readouterr().err == ""


def test_a_deep_attack_counts_inversions_not_steps(capsys, monkeypatch):
    """``[dlg inversions] step 1/1`` counted inversions in a word its ``steps`` setting uses for optimiser steps."""
    import inspect

    from vispriv.plugins.attacks import deep_inversion

    assert 'ctx.progress(jobs, desc=self.name, total=len(jobs), unit="inversion")' in inspect.getsource(deep_inversion)
    clock, out = Clock(), io.StringIO()
    beat = Heartbeat("dlg", total=8, interval=30.0, stream=out, clock=clock, unit="inversion")
    clock.now = 40.0
    beat.tick(2)
    assert out.getvalue().splitlines() == ["[dlg] inversion 2/8, 40 s elapsed, ~120 s left"]


def test_a_line_is_due_exactly_at_the_interval_and_the_estimate_needs_a_step_done_and_one_left():
    clock, out = Clock(), io.StringIO()
    beat = Heartbeat("", total=4, interval=30.0, stream=out, clock=clock)
    clock.now = 29.5
    beat.tick(0)
    clock.now = 30.0
    beat.tick(0)  # at the interval: due; no step done, no estimate
    clock.now = 60.0
    beat.tick(1)
    clock.now = 90.0
    beat.tick(4)  # every step done: nothing left to estimate
    assert out.getvalue().splitlines() == [
        "[working] step 0/4, 30 s elapsed",
        "[working] step 1/4, 60 s elapsed, ~180 s left",
        "[working] step 4/4, 90 s elapsed",
    ]
    assert Heartbeat("s", total=4, unit="").line(3, 30.0) == "[s] step 3/4, 30 s elapsed, ~10 s left"
    assert Heartbeat("s", total=0).line(3, 30.0) == "[s] step 3, 30 s elapsed"
