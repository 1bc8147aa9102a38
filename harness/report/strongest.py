"""Verdicts against the strongest attack: per defense config, the attack that did best.

A defense is judged by the strongest attack tried against it, the one that knows the defense
included ("On Evaluating Adversarial Robustness", Carlini et al., 2019; "On Adaptive Attacks
to Adversarial Example Defenses", Tramèr et al., NeurIPS 2020). This view gives each defense
config of a scenario (per dataset where a scenario has several) one row:

* the strongest attack on a privacy metric (the maximum where higher means the attack
  succeeds, else the minimum; attacks tied at that value are all named),
* its value (± the standard error the attack x defense table shows),
* the runner-up (the best attack not tied with it), so a reader sees by how much it won,
* the defense's utility beside it, when a utility metric is given.

The attack x defense tables mark the same cells (:func:`strongest_cells`): in each defense's
column the strongest attack's value is bold. A no-information baseline attack (e.g.
``public-mean-image``) competes like any other: where it is the strongest, no attack tried
did better than guessing from public data.

``--strongest PRIVACY[:UTILITY]`` (``vispriv report``) writes these tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from vispriv.harness.errors import VisprivError
from vispriv.harness.report.tables import (  # noqa: F401 -- BOOKKEEPING_PREFIX is read from here too
    BOOKKEEPING_PREFIX,
    CellRow,
    Pivot,
    _fmt,
    is_bookkeeping,
    is_utility,
    pivot,
    resolve_metric,
    sense_text,
)


def ranks_attacks(metric: str) -> bool:
    """Whether ``metric`` scores how well an attack recovered the private input (so one attack
    can be the strongest): not a defense's utility, not an attack's bookkeeping."""
    return not is_utility(metric) and not is_bookkeeping(metric)


def strongest_of(values: dict[str, float], higher_is_better: bool) -> list[str]:
    """The attacks of ``{attack: value}`` at the best finite value (all of them on a tie); NaNs never win."""
    finite = {a: v for a, v in values.items() if not math.isnan(v)}
    if not finite:
        return []
    best = (max if higher_is_better else min)(finite.values())
    return [a for a, v in finite.items() if v == best]


def strongest_cells(p: Pivot) -> set[tuple[str, str]]:
    """The ``(attack, defense)`` cells of an attack x defense pivot holding the strongest attack
    of their column (of each dataset's rows, in a table over several datasets); none for a
    utility or bookkeeping metric, or a table of one attack."""
    if (p.row_title != "attack" and not p.row_parts) or not ranks_attacks(p.metric):
        return set()
    by_dataset: dict[str, list[str]] = {}
    for r in p.rows:
        by_dataset.setdefault(p.row_parts[r][0] if p.row_parts else "", []).append(r)
    out: set[tuple[str, str]] = set()
    for rows in by_dataset.values():
        if len(rows) < 2:
            continue
        for c in p.cols:
            column = {r: p.values[(r, c)] for r in rows if (r, c) in p.values}
            out.update((r, c) for r in strongest_of(column, p.higher_is_better))
    return out


@dataclass
class StrongestRow:
    defense: str  # compact label
    attacks: list[str]  # compact labels of the strongest (several on a tie)
    value: float
    se: float | None
    runner_up: str | None
    runner_up_value: float | None
    utility: float | None
    n_attacks: int


@dataclass
class StrongestTable:
    scenario: str
    privacy: str
    utility: str | None
    privacy_higher_is_better: bool
    utility_higher_is_better: bool
    rows: list[StrongestRow] = field(default_factory=list)


def parse_spec(spec: str) -> tuple[str, str | None]:
    """``PRIVACY[:UTILITY]`` as a pair of names."""
    privacy, sep, utility = spec.partition(":")
    if not privacy or (sep and (not utility or ":" in utility)):
        raise VisprivError(f"--strongest {spec!r}: expected PRIVACY or PRIVACY:UTILITY, "
                           "e.g. images/psnr_median:utility/test_accuracy")
    return privacy, (utility or None)


def tables(rows: list[CellRow], privacy: str, utility: str | None = None) -> list[StrongestTable]:
    """One table per scenario (and dataset) that logged ``privacy``; ``privacy`` must rank attacks."""
    if not ranks_attacks(privacy):
        kind = "a utility metric" if is_utility(privacy) else "an attack's own bookkeeping"
        raise VisprivError(f"--strongest: {privacy!r} is {kind}, not a measure of an attack's success; "
                           "give a metric an attack scores, e.g. images/psnr_median or place/top1_accuracy")
    out = []
    for p in pivot(rows, privacy, by_dataset=True):
        u_values: dict[str, float] = {}
        u_hib = True
        if utility is not None:
            for r in rows:
                if utility in r.metrics and r.defense in p.cols and r.scenario == p.scenario.split(": ")[0] \
                        and r.dataset == p.dataset:
                    u_values.setdefault(r.defense, r.metrics[utility])
                    u_hib = r.higher_is_better.get(utility, True)
        t = StrongestTable(p.scenario, privacy, utility, p.higher_is_better, u_hib)
        for c in p.cols:
            column = {r: p.values[(r, c)] for r in p.rows if (r, c) in p.values}
            best = strongest_of(column, p.higher_is_better)
            if not best:
                continue
            rest = {a: v for a, v in column.items() if a not in best}
            second = strongest_of(rest, p.higher_is_better)
            t.rows.append(StrongestRow(
                p.label(c), [p.label(a) for a in best], column[best[0]], p.errors.get((best[0], c)),
                p.label(second[0]) if second else None, rest[second[0]] if second else None,
                u_values.get(c), len(column),
            ))
        if all(r.utility is None for r in t.rows):
            t.utility = None  # no defense of this scenario logged it: no column of dashes
        out.append(t)
    return out


def resolve(rows: list[CellRow], privacy: str, utility: str | None) -> list[tuple[str, str | None]]:
    """Full metric names of a ``PRIVACY[:UTILITY]`` spec."""
    privacies = resolve_metric(rows, privacy)
    utilities: list[str | None] = [None]
    if utility is not None:
        utilities = list(resolve_metric(rows, utility))
        wrong = [u for u in utilities if u is not None and not is_utility(u)]
        if wrong:
            raise VisprivError(f"--strongest: {utility!r} is {wrong[0]!r}, not a utility metric; "
                               "after the colon give a utility/... metric")
    return [(p, u) for p in privacies for u in utilities]


def heading(t: StrongestTable) -> tuple[str, str]:
    """The table's title and what its privacy metric means."""
    sense = sense_text(t.privacy, t.privacy_higher_is_better, colour=False)
    return "Strongest attack per defense", f"{t.scenario}; {t.privacy}, {sense}"


def columns(t: StrongestTable) -> list[str]:
    cols = ["defense", "strongest attack", t.privacy, "runner-up", "runner-up's value", "attacks tried"]
    return [*cols, t.utility] if t.utility else cols


def cells(t: StrongestTable) -> list[list[str]]:
    """One row of text per defense config, in :func:`columns` order."""
    out = []
    for r in t.rows:
        value = _fmt(r.value, 3) + ("" if r.se is None else (" (n = 1)" if math.isnan(r.se) else f" ± {_fmt(r.se, 3)}"))
        row = [
            r.defense,
            ", ".join(r.attacks) + (" (tie)" if len(r.attacks) > 1 else ""),
            value,
            r.runner_up or "–",
            "–" if r.runner_up_value is None else _fmt(r.runner_up_value, 3),
            str(r.n_attacks),
        ]
        if t.utility:
            row.append("–" if r.utility is None else _fmt(r.utility, 3))
        out.append(row)
    return out


def to_markdown(t: StrongestTable) -> str:
    """The table: one row per defense config, its strongest attack and the runner-up."""
    title, sense = heading(t)
    cols = columns(t)
    lines = [f"**{title}** ({sense})", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(row) + " |" for row in cells(t)]
    return "\n".join(lines) + "\n"
