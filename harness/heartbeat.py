"""A line every ``interval`` seconds from a long stage when no progress bar can be drawn.

Off a terminal (a log file, a pipe: CI, SLURM, ``make demo > log``) progress bars are off,
so a stage that runs for minutes would print nothing. :class:`Heartbeat` prints instead, to
stderr, at most one line per ``interval`` seconds as the stage advances::

    [inversion training] step 1200/5000, 95 s elapsed, ~300 s left
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

#: Seconds between two lines of one stage.
INTERVAL = 30.0


class Heartbeat:
    """Prints ``[stage] step i/total, elapsed, ~remaining`` when ``interval`` seconds have passed since the last line."""

    def __init__(self, stage: str, total: int | None = None, interval: float | None = None,
                 stream: TextIO | None = None, clock: Callable[[], float] | None = None) -> None:
        self.stage, self.total = stage or "working", total
        self.interval = INTERVAL if interval is None else interval
        self.stream, self.clock = stream, clock or time.monotonic
        self.start = self.last = self.clock()

    def tick(self, step: int) -> None:
        """Record that ``step`` steps are done; print a line when one is due."""
        now = self.clock()
        if now - self.last < self.interval:
            return
        self.last = now
        print(self.line(step, now - self.start), file=self.stream or sys.stderr, flush=True)

    def line(self, step: int, elapsed: float) -> str:
        """The heartbeat line after ``step`` steps and ``elapsed`` seconds."""
        done = f"step {step}/{self.total}" if self.total else f"step {step}"
        text = f"[{self.stage}] {done}, {elapsed:.0f} s elapsed"
        if self.total and 0 < step < self.total:
            text += f", ~{elapsed * (self.total - step) / step:.0f} s left"
        return text
