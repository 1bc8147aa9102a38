"""Where a table's colours come from: anchored to what a metric's values mean, else relative to the table.

A privacy metric whose plugin declares what its values mean (:class:`vispriv.harness.Anchors`)
is coloured on an absolute scale: red from the value at which the attack has succeeded (a
reconstruction's recognisable threshold, 20 dB PSNR; an identical image's SSIM of 1), green
at the value of an attack that learned nothing -- the no-leak baseline attack of the same
table (``public-mean-image``, ``mean-image``, ``flat-grey``: ``Attack.no_leak``), else the
metric's declared chance level. An end that nothing anchors is the table's own extreme on that
side (never beyond the anchored end), and a metric with no anchor at all -- a defense's utility,
a metric that declares none, runs logged before anchors were -- keeps the relative scale: its
lowest and highest finite values. Every table and colour bar says which (:meth:`Scale.text`).
So a DLG that failed at 10.9 dB beside an Inverting Gradients at 15 dB are both on the green
side of the 20 dB line, and a table of one cell is coloured by what its value means.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class End:
    """One end of a colour scale: its value, what it is, and whether a declared meaning (not the table) set it."""

    value: float
    meaning: str
    anchored: bool


@dataclass(frozen=True)
class Scale:
    """A colour scale from ``green`` to ``red``; ``red_high``: whether higher values lie towards red."""

    green: End
    red: End
    red_high: bool

    @property
    def anchored(self) -> bool:
        """Whether a declared meaning sets either end."""
        return self.green.anchored or self.red.anchored

    def position(self, value: float) -> float | None:
        """Where ``value`` lies from the red (0.0) to the green (1.0) end, clipped; ``None`` for NaN.

        An infinite value lies beyond every finite one, at the end it points to. On a scale
        whose ends coincide, a value at or beyond the anchored end takes its colour and any other
        the opposite one; a relative scale of one value is neutral (0.5).
        """
        if math.isnan(value):
            return None
        s = value if self.red_high else -value
        if math.isinf(s):
            return 0.0 if s > 0 else 1.0
        g = self.green.value if self.red_high else -self.green.value
        r = self.red.value if self.red_high else -self.red.value
        if r > g:
            return min(1.0, max(0.0, (r - s) / (r - g)))
        if self.red.anchored:
            return 0.0 if s >= r else 1.0
        if self.green.anchored:
            return 1.0 if s <= g else 0.0
        return 0.5

    def text(self) -> str:
        """What the colours are anchored to, e.g. ``colours: green at the no-leak baseline (10.2),
        red at the recognisable threshold (20)``, or ``colours: relative to this table``."""
        if not self.anchored:
            return "colours: relative to this table"
        if self.green.value == self.red.value:  # every value on one side of the one anchored end
            if self.red.anchored:
                return f"colours: red at or beyond {_end_text(self.red)}, green short of it"
            return f"colours: green at or short of {_end_text(self.green)}, red beyond it"
        return f"colours: green at {_end_text(self.green)}, red at {_end_text(self.red)}"


def _end_text(end: End) -> str:
    return f"{end.meaning} ({_short(end.value)})"


def _short(value: float) -> str:
    return f"{value:.3g}" if math.isfinite(value) else ("inf" if value > 0 else "-inf")


def scale_of(values: list[float], red_high: bool, anchors: dict[str, list], baseline: float | None) -> Scale | None:
    """The colour scale of a table's ``values``.

    ``anchors`` as logged (``{"nothing": [v, meaning], "success": [v, meaning]}``, either may be
    missing); ``baseline`` is the no-leak baseline attack's value in the table, which sets the
    green end before the declared ``nothing``. ``None`` when no end can be set (no finite value
    and no anchor).
    """
    finite = [v for v in values if math.isfinite(v)]
    green = _anchored(anchors.get("nothing"))
    if baseline is not None and math.isfinite(baseline):
        green = End(baseline, "the no-leak baseline", True)
    red = _anchored(anchors.get("success"))
    if not finite and (green is None or red is None):
        return None if green is None and red is None else _one_sided(green, red, red_high)
    lo, hi = min(finite), max(finite)
    if green is None:
        rel = lo if red_high else hi
        if red is not None:
            rel = min(rel, red.value) if red_high else max(rel, red.value)
        green = End(rel, "the table's " + ("lowest" if red_high else "highest"), False)
    if red is None:
        rel = hi if red_high else lo
        rel = max(rel, green.value) if red_high else min(rel, green.value)
        red = End(rel, "the table's " + ("highest" if red_high else "lowest"), False)
    return Scale(green, red, red_high)


def _one_sided(green: End | None, red: End | None, red_high: bool) -> Scale:
    """A scale of an anchored end alone (a table without finite values): both ends at it."""
    end = green or red
    assert end is not None
    return Scale(green or end, red or end, red_high)


def _anchored(logged: list | None) -> End | None:
    """An anchored end from its logged ``[value, meaning]``; ``None`` when absent or unreadable."""
    if not isinstance(logged, list) or len(logged) != 2:
        return None
    try:
        return End(float(logged[0]), str(logged[1]), True)
    except (TypeError, ValueError):
        return None
