"""Privacy-utility frontiers: per scenario, each defense config against its worst case.

A frontier pairs a utility metric (``utility/...``, the defense's own) with a privacy
metric (one an attack scores, whose direction says how good the attack is). Each defense
config of a scenario (and dataset, where a scenario has several) is one point:

* x = its utility (the same whichever attack ran against it; the first run's value),
* y = the *strongest* attack's success against it: the worst case, for the defender,
  over every attack paired with it (the maximum of the privacy metric where higher
  means a better attack, else the minimum).

A point is on the Pareto front when no other point is at least as good for the
defender on both axes and better on one (better utility by its direction, less attack
success). Points are numbered on the plot and named in a key beside it, by the labels every
view of the report shows (:func:`vispriv.harness.report.config_labels`).

The no-defense baseline (``none``) belongs on every frontier: it logs its utility where the
scenario measures one; where it logged none and the utility is a cost (lower is better),
it stands at zero, which is its cost by definition, and says so in its label.
"""

from __future__ import annotations

import math
import textwrap
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vispriv.harness.errors import VisprivError
from vispriv.harness.report.strongest import strongest_of
from vispriv.harness.report.tables import (
    CellRow,
    _fmt,
    config_labels,
    is_utility,
    resolve_metric,
    save_figure,
    sense_text,
)

#: The name every scenario gives its no-defense baseline.
BASELINE = "none"


@dataclass
class FrontierPoint:
    defense: str  # the defense's full label
    label: str  # its compact label
    utility: float
    privacy: float  # the worst case over attacks
    attack: str  # the compact label of the attack that reached it
    on_front: bool = False


@dataclass
class Frontier:
    scenario: str
    utility: str
    privacy: str
    utility_higher_is_better: bool
    privacy_higher_is_better: bool
    points: list[FrontierPoint] = field(default_factory=list)
    #: Defense configs left out (no run with both metrics).
    missing: list[str] = field(default_factory=list)


def parse_spec(spec: str) -> tuple[str, str]:
    """``UTILITY:PRIVACY`` as a pair of names (metric names never hold a colon)."""
    utility, sep, privacy = spec.partition(":")
    if not sep or not utility or not privacy or ":" in privacy:
        raise VisprivError(f"--frontier {spec!r}: expected UTILITY:PRIVACY, e.g. utility/kept_fraction:place/top1_accuracy")
    return utility, privacy


def resolve_pair(rows: list[CellRow], utility: str, privacy: str) -> list[tuple[str, str]]:
    """Full metric names of a ``UTILITY:PRIVACY`` pair, checked for their roles."""
    utilities, privacies = resolve_metric(rows, utility), resolve_metric(rows, privacy)
    wrong_u = [u for u in utilities if not is_utility(u)]
    if wrong_u:
        raise VisprivError(f"--frontier: {utility!r} is {wrong_u[0]!r}, not a utility metric; x must be a utility/... metric")
    wrong_p = [p for p in privacies if is_utility(p)]
    if wrong_p:
        raise VisprivError(f"--frontier: {privacy!r} is {wrong_p[0]!r}, a utility metric; y must be a metric an attack scores")
    return [(u, p) for u in utilities for p in privacies]


def worst_case(values: dict[str, float], higher_is_better: bool) -> tuple[str, float] | None:
    """The strongest attack among ``{attack: privacy metric}`` and its value (NaNs ignored; on a
    tie the first listed, :func:`~vispriv.harness.report.strongest.strongest_of`)."""
    best = strongest_of(values, higher_is_better)
    return (best[0], values[best[0]]) if best else None


def mark_front(points: list[FrontierPoint], utility_higher_is_better: bool, privacy_higher_is_better: bool) -> None:
    """Set ``on_front`` of the points that no other point dominates (for the defender)."""

    def good(p: FrontierPoint) -> tuple[float, float]:
        return (p.utility if utility_higher_is_better else -p.utility,
                -p.privacy if privacy_higher_is_better else p.privacy)

    for p in points:
        gp = good(p)
        p.on_front = not any(
            go[0] >= gp[0] and go[1] >= gp[1] and go != gp for go in (good(q) for q in points if q is not p)
        )


def frontiers(rows: list[CellRow], utility: str, privacy: str) -> list[Frontier]:
    """One frontier per scenario (per dataset where a scenario has several) holding both metrics."""
    groups: dict[tuple[str, str], list[CellRow]] = defaultdict(list)
    for r in rows:
        groups[(r.scenario, r.dataset)].append(r)
    both = {key for key, rs in groups.items()
            if any(utility in r.metrics for r in rs) and any(privacy in r.metrics for r in rs)}
    datasets_of: dict[str, int] = defaultdict(int)
    for scenario, _ in both:
        datasets_of[scenario] += 1
    defenses, attacks = config_labels(rows, "defense"), config_labels(rows, "attack")  # as the tables name them
    out = []
    for (scenario, dataset), rs in sorted(groups.items()):
        if (scenario, dataset) not in both:
            continue
        title = f"{scenario}: {dataset}" if datasets_of[scenario] > 1 else scenario
        u_hib = next(r.higher_is_better.get(utility, True) for r in rs if utility in r.metrics)
        p_hib = next(r.higher_is_better.get(privacy, True) for r in rs if privacy in r.metrics)
        f = Frontier(title, utility, privacy, u_hib, p_hib)
        by_defense: dict[str, list[CellRow]] = defaultdict(list)
        for r in rs:
            by_defense[r.defense].append(r)
        for defense, runs in by_defense.items():
            u = next((r.metrics[utility] for r in runs if utility in r.metrics), None)
            label = defenses[defense]
            if u is None and not u_hib and all(r.params.get("defense") == BASELINE for r in runs):
                # The no-defense baseline changes nothing: a cost (lower is better) of zero by definition.
                u, label = 0.0, f"{label} (cost 0 by definition)"
            worst = worst_case({attacks[r.attack]: r.metrics[privacy] for r in runs if privacy in r.metrics}, p_hib)
            if u is None or worst is None or math.isnan(u):
                f.missing.append(defenses[defense])
                continue
            f.points.append(FrontierPoint(defense, label, u, worst[1], worst[0]))
        f.points.sort(key=lambda p: (p.utility, p.label))  # along the x axis
        mark_front(f.points, u_hib, p_hib)
        if f.points:
            out.append(f)
    return out


def axes_text(f: Frontier) -> str:
    """What the axes show, with the sense of each metric."""
    return (f"x = {f.utility} ({sense_text(f.utility, f.utility_higher_is_better, colour=False)}), "
            f"y = {f.privacy} of the strongest attack ({sense_text(f.privacy, f.privacy_higher_is_better, colour=False)})")


def to_markdown(f: Frontier) -> str:
    """The frontier's points as a markdown table (front points marked)."""
    lines = [
        f"**Privacy-utility frontier** ({f.scenario}): {axes_text(f)}",
        "",
        f"| defense | {f.utility} | {f.privacy} (worst case) | strongest attack | Pareto front |",
        "|---|---|---|---|---|",
    ]
    for p in f.points:
        lines.append(f"| {p.label} | {_fmt(p.utility, 3)} | {_fmt(p.privacy, 3)} | {p.attack} | {'yes' if p.on_front else ''} |")
    if f.missing:
        lines.append(f"\n{missing_text(f)}")
    return "\n".join(lines) + "\n"


def missing_text(f: Frontier) -> str:
    """The sentence naming the defense configs without both metrics: ``Left out (...): the defense `none`.``"""
    names = ", ".join(f"`{m}`" for m in f.missing)
    what = "the defense" if len(f.missing) == 1 else "the defenses"
    return f"Left out (no run with both {f.utility} and {f.privacy}): {what} {names}."


def frontier_png(f: Frontier, path: Path) -> Path:
    """:func:`frontier_figure` saved as a PNG."""
    return save_figure(frontier_figure(f), path)


def frontier_figure(f: Frontier) -> Any:
    """Scatter of the points, the Pareto front as a line, each point numbered; a key beside
    the axes names the config of each number.

    Labels never print on top of one another: points too close to be told apart share one
    annotation (``1, 2``), and the configs' labels are listed in the key, one per line.
    The y axis runs from the attack failing (bottom) to the attack succeeding (top)
    whatever the metric's direction, so the defender's ideal is always at the bottom and
    at the better end of x. Infinite values are drawn at the edge of the axes, marked.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, key) = plt.subplots(1, 2, figsize=(8.4, 4.6), layout="constrained", width_ratios=[3, 1.6])
    shown_y = _shown_privacy(f.points)
    _draw_points(ax, f, shown_y)
    for numbers, (x, y) in _number_groups(f.points, shown_y):
        ax.annotate(", ".join(map(str, numbers)), (x, y), textcoords="offset points", xytext=(4, 4),
                    ha="left", va="bottom", fontsize=7, fontweight="bold")
    _draw_key(key, f.points)
    ax.margins(x=0.12, y=0.12)
    if not f.privacy_higher_is_better:
        ax.invert_yaxis()
    ax.set_xlabel(f"{f.utility}  ({sense_text(f.utility, f.utility_higher_is_better, colour=False)})", fontsize=8)
    ax.set_ylabel(f"{f.privacy}, strongest attack\n(up = attack succeeds)", fontsize=8)
    ideal = "bottom right" if f.utility_higher_is_better else "bottom left"
    ax.set_title(textwrap.fill(f"privacy-utility frontier ({f.scenario}); ideal: {ideal}", 70), fontsize=9)
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    return fig


def _shown_privacy(points: list[FrontierPoint]) -> dict[int, float]:
    """Where each point is drawn on y: its privacy, or just past the finite ones when infinite."""
    finite_y = [p.privacy for p in points if math.isfinite(p.privacy)] or [0.0]
    lo, hi = min(finite_y), max(finite_y)
    pad = 0.08 * (hi - lo) if hi > lo else 0.1 * (abs(hi) or 1.0)
    return {id(p): p.privacy if math.isfinite(p.privacy) else (hi + 2 * pad if p.privacy > 0 else lo - 2 * pad)
            for p in points}


def _draw_points(ax: Any, f: Frontier, shown_y: dict[int, float]) -> None:
    """The Pareto front as a line and every point as a marker (triangle: infinite privacy)."""
    front = sorted((p for p in f.points if p.on_front), key=lambda p: p.utility)
    ax.plot([p.utility for p in front], [shown_y[id(p)] for p in front], "-", color="#1f3a5f", linewidth=1.5,
            label="Pareto front", zorder=1)
    legend_done: set[bool] = set()
    for p in f.points:
        marker = "^" if not math.isfinite(p.privacy) else "o"
        label = None if p.on_front in legend_done else ("on the front" if p.on_front else "dominated")
        legend_done.add(p.on_front)
        ax.scatter(p.utility, shown_y[id(p)], s=42, marker=marker, zorder=2, label=label,
                   color="#1f3a5f" if p.on_front else "#9aa3ad", edgecolor="black", linewidth=0.5)


#: Points closer than this share of the axes' span (x, y) share one annotation.
NEAR = (0.12, 0.06)


def _number_groups(points: list[FrontierPoint], shown_y: dict[int, float]) -> list[tuple[list[int], tuple[float, float]]]:
    """The points' numbers (1-based, in :attr:`Frontier.points` order) grouped by nearness,
    each group with the position of its first point."""
    xs, ys = [p.utility for p in points], [shown_y[id(p)] for p in points]
    span_x, span_y = (max(xs) - min(xs)) or 1.0, (max(ys) - min(ys)) or 1.0
    groups: list[tuple[list[int], tuple[float, float]]] = []
    for i, (x, y) in enumerate(zip(xs, ys), start=1):
        near = next((g for g in groups if abs(g[1][0] - x) <= NEAR[0] * span_x and abs(g[1][1] - y) <= NEAR[1] * span_y),
                    None)
        if near is None:
            groups.append(([i], (x, y)))
        else:
            near[0].append(i)
    return groups


def _draw_key(ax: Any, points: list[FrontierPoint]) -> None:
    """The numbered list of the points' labels (infinite privacy values written out)."""
    ax.axis("off")
    lines = []
    for i, p in enumerate(points, start=1):
        text = p.label + ("" if math.isfinite(p.privacy) else f" ({_fmt(p.privacy, 3)})")
        lines.append(textwrap.fill(f"{i}  {text}", 40, subsequent_indent="   ", break_on_hyphens=False))
    ax.text(0.0, 1.0, "\n".join(lines), transform=ax.transAxes, va="top", ha="left", fontsize=6.5, family="monospace")
