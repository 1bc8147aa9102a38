"""A line every ``interval`` seconds from a long stage when no progress bar can be drawn.

Off a terminal (a log file, a pipe: CI, SLURM, ``make demo > log``) progress bars are off,
so a stage that runs for minutes would print nothing. :class:`Heartbeat` prints instead, to
stderr, at most one line per ``interval`` seconds as the stage advances::

    [inversion training] step 1200/5000, 95 s elapsed, ~300 s left

The counted thing is named by ``unit`` (``step`` unless the stage says otherwise): an attack
that runs one inversion per user's batch counts ``[dlg] inversion 3/8``, never calling them
steps, a word its ``steps`` setting uses for optimiser steps.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

#: Seconds between two lines of one stage.
INTERVAL = 30.0


class Heartbeat:
    """Prints ``[stage] unit i/total, elapsed, ~remaining`` when ``interval`` seconds have passed since the last line."""

    def __init__(self, stage: str, total: int | None = None, interval: float | None = None,
                 stream: TextIO | None = None, clock: Callable[[], float] | None = None, unit: str = "step") -> None:
        self.stage, self.total, self.unit = stage or "working", total, unit or "step"
        self.interval = INTERVAL if interval is None else interval
        self.stream, self.clock = stream, clock or time.monotonic
        self.start = self.last = self.clock()

    def tick(self, step: int) -> None:
        """Record that ``step`` units are done; print a line when one is due."""
        now = self.clock()
        if now - self.last < self.interval:
            return
        self.last = now
        print(self.line(step, now - self.start), file=self.stream or sys.stderr, flush=True)

    def line(self, step: int, elapsed: float) -> str:
        """The heartbeat line after ``step`` units and ``elapsed`` seconds."""
        done = f"{self.unit} {step}/{self.total}" if self.total else f"{self.unit} {step}"
        text = f"[{self.stage}] {done}, {elapsed:.0f} s elapsed"
        if self.total and 0 < step < self.total:
            text += f", ~{elapsed * (self.total - step) / step:.0f} s left"
        return text
