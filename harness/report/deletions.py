"""Deletion sets under two budgets, album by album: Table 4 of album pruning.

"Protecting Geolocation Privacy of Photo Collections" (Yang, Chakrabarti & Vorobeychik,
AAAI 2020), section 5, "Maximum protected-k under Deletion Budget", checks whether the
photos deleted under one deletion budget are also deleted under a larger one. Its Table 4
gives, per collection type and pair of budgets (12.5 % -> 25 %, 25 % -> 50 %), the
"fraction of images that were deleted with a lower-deletion budget, but NOT with a higher
one"; a value above zero means the optimal deletion sets are not nested, so no sequential
greedy strategy can reach them.

Cells whose defense logged its kept masks (:data:`vispriv.harness.artifacts.KEPT_MASKS`,
as album pruning does) are compared two at a time: the cell at the lower budget and the
cell at the higher budget of the same dataset and defense config (every ``dataset.*`` and
``defense.*`` param equal but the budget). For one album with deleted set ``D_low`` at the
lower budget and kept set ``K_high`` at the higher one the value is
``|D_low & K_high| / |D_low|``.

Choices where the paper is vague:

* **Denominator**: the photos deleted at the lower budget. The caption does not name it,
  but its values rule out the album's size: a 12.5 % budget deletes at most 2 of the 16
  photos of an R-16 collection (0.125 of it), and the table gives 0.27 for R-16.
* **Aggregation**: the mean over albums of the per-album fraction, so that every album
  weighs the same, as Table 3 averages "over all collection instances"; its standard
  error is ``sd / sqrt(n)`` over those albums. An album that deletes nothing at the lower
  budget has no fraction and is left out; how many were is reported, and so is the pooled
  fraction (all such photos of all albums over all photos deleted at the lower budget).
* **Cells**: the deletions that the defense released, whatever its solver proved: a
  collection whose MILP stopped at its time limit counts with the deletions it made
  (album pruning logs how many did in ``utility/unproven_share``). Album pruning's
  ``milp-budget`` deletes nothing where no deletion within the budget lifts protected-k
  above 0 (every mask is optimal there; the paper does not say which its solver
  returned), so such albums are among those left out.
"""

from __future__ import annotations

import csv
import html
import io
import itertools
import json
import os
import re
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vispriv.harness.artifacts import KEPT_MASKS, read_kept_masks
from vispriv.harness.errors import VisprivError
from vispriv.harness.report.tables import CellRow, _as_float, _sort_key, _varying_part, config_labels, value_text
from vispriv.harness.stats import mean_se


@dataclass
class Change:
    """One table cell: deleted at the lower budget, kept at the higher, over albums."""

    mean: float | None
    se: float | None
    n: int  # albums with a deletion at the lower budget (those averaged)
    n_nothing_deleted: int  # albums that deleted nothing at the lower budget
    pooled: float | None  # all such photos over all photos deleted at the lower budget

    def text(self, digits: int = 3) -> str:
        if self.mean is None:
            return f"– (n = 0; {self.n_nothing_deleted} albums deleted nothing)"
        se = "" if self.se is None else f" ± {self.se:.{digits}f}"
        return f"{self.mean:.{digits}f}{se} (n = {self.n})"


@dataclass
class DeletionTable:
    """Rows = configs (``row_params``), columns = budget pairs (low, high), per scenario."""

    scenario: str
    budget: str
    row_params: list[str]
    rows: list[str]
    pairs: list[tuple[str, str]]
    cells: dict[tuple[str, tuple[str, str]], Change] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def pair_label(self, pair: tuple[str, str]) -> str:
        return f"{value_text(pair[0])} → {value_text(pair[1])}"


def deleted_then_kept(low: dict[str, np.ndarray], high: dict[str, np.ndarray], what: str = "") -> Change:
    """Table 4's fraction between the kept masks ``low`` and ``high`` (album id -> kept mask).

    Both must cover the same albums with the same number of photos each; ``what`` names
    the two cells in the error otherwise.
    """
    if set(low) != set(high):
        only = sorted(set(low) ^ set(high))[:3]
        raise VisprivError(f"kept masks over different albums{what}: e.g. {', '.join(map(repr, only))} in one only")
    fractions, moved, deleted, empty = [], 0, 0, 0
    for album, kept_low in low.items():
        kept_high = high[album]
        if len(kept_low) != len(kept_high):
            raise VisprivError(f"album {album!r} has {len(kept_low)} photos in one kept mask and {len(kept_high)} "
                               f"in the other{what}: not the same albums")
        gone = ~kept_low
        if not gone.any():
            empty += 1
            continue
        back = int(np.sum(gone & kept_high))
        fractions.append(back / int(gone.sum()))
        moved, deleted = moved + back, deleted + int(gone.sum())
    n = len(fractions)
    mean, se = mean_se(fractions) if n else (None, None)
    return Change(
        mean=mean,
        se=se if n > 1 else None,
        n=n,
        n_nothing_deleted=empty,
        pooled=moved / deleted if deleted else None,
    )


def parse_spec(spec: str) -> tuple[list[str], str]:
    """``ROW1,ROW2:BUDGET`` -> (row params, budget param), or one error line."""
    row_part, sep, budget = spec.partition(":")
    rows = [r for r in row_part.split(",") if r]
    if not sep or not budget or ":" in budget or not rows:
        raise VisprivError(f"--budget-deletions {spec!r}: expected ROW1,ROW2:BUDGET, "
                           "e.g. dataset.collection,defense.mode:defense.budget")
    return rows, budget


def parse_pairs(text: str | None) -> list[tuple[str, str]] | None:
    """``LOW:HIGH,LOW:HIGH`` (e.g. ``0.125:0.25,0.25:0.5``) -> pairs, None for none, or one error line."""
    if not text:
        return None
    pairs = []
    for part in text.split(","):
        low, sep, high = part.partition(":")
        lo, hi = _as_float(low), _as_float(high)
        if not sep or lo is None or hi is None:
            raise VisprivError(f"--budget-pairs {text!r}: expected LOW:HIGH,... with numbers, e.g. 0.125:0.25,0.25:0.5")
        if not lo < hi:
            raise VisprivError(f"--budget-pairs {part!r}: the lower budget {low} must be below the higher {high}")
        pairs.append((low, high))
    return pairs


def kept_masks(tracker: Any, rows: list[CellRow]) -> dict[str, dict[str, np.ndarray]]:
    """run id -> its kept masks, for the rows that logged :data:`KEPT_MASKS`."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    out = {}
    for row in rows:
        if not any(i.path == KEPT_MASKS for i in tracker.client.list_artifacts(row.run_id)):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            out[row.run_id] = read_kept_masks(Path(tracker.client.download_artifacts(row.run_id, KEPT_MASKS, tmp)))
    return out


def _natural(text: str) -> tuple[Any, ...]:
    """Numbers in numeric order, then names with their digits compared as numbers (R-16 before R-128)."""
    if _as_float(text) is not None:
        return (0, _sort_key(text))
    return (1, tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)))


def _stage_params(row: CellRow, budget: str) -> tuple[tuple[str, str], ...]:
    """What must be equal for two cells to be compared: every dataset and defense param but the budget."""
    return tuple(sorted((k, v) for k, v in row.params.items()
                        if k != budget and k.split(".")[0] in ("dataset", "defense")))


def _same_masks(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def _same_value(a: str, b: str) -> bool:
    x, y = _as_float(a), _as_float(b)
    return a == b or (x is not None and x == y)


def tables(
    rows: list[CellRow],
    masks: dict[str, dict[str, np.ndarray]],
    row_params: list[str],
    budget: str,
    pairs: list[tuple[str, str]] | None = None,
) -> list[DeletionTable]:
    """One :class:`DeletionTable` per scenario over the rows that have ``budget`` (all must have masks).

    ``pairs``: the (lower, higher) budgets to compare; by default each budget with the next
    larger one that ran. Raises one error line when no row has ``budget``, when such a row
    logged no kept masks (not an album-pruning cell), when two configs would share a row
    label (a param that varies is missing from ``row_params``), when two cells of one config
    and budget logged different masks (runs of another seed), or when two compared cells'
    masks are over different albums.
    """
    with_budget = [r for r in rows if budget in r.params]
    if not with_budget:
        known = sorted({k for r in rows for k in r.params if k.startswith("defense.")})
        raise VisprivError(f"--budget-deletions: no cell has param {budget!r}; defense params: {', '.join(known) or 'none'}")
    defenses = config_labels(rows, "defense")
    missing = [r for r in with_budget if r.run_id not in masks]
    if missing:
        raise VisprivError(f"--budget-deletions: cell {defenses[missing[0].defense]!r} ({missing[0].dataset}) logged no "
                           f"{KEPT_MASKS}; only album-pruning cells log their kept masks")
    for param in row_params:
        if param.split(".")[0] not in ("dataset", "defense") or param == budget:
            raise VisprivError(f"--budget-deletions: row param {param!r} is no dataset.* or defense.* param other than "
                               f"the budget; the kept masks are the defense's, whatever attack ran")
        if not any(param in r.params for r in with_budget):
            known = sorted({k for r in with_budget for k in r.params if k.split(".")[0] in ("dataset", "defense")})
            raise VisprivError(f"--budget-deletions: no cell with {budget!r} has param {param!r}; params: {', '.join(known)}")
    by_scenario: dict[str, list[CellRow]] = defaultdict(list)
    for r in with_budget:
        by_scenario[r.scenario].append(r)
    out = []
    for scenario, rs in sorted(by_scenario.items()):
        shown = {p: _varying_part([r for r in rs if p in r.params], p) for p in row_params}

        def label(r: CellRow, shown: dict[str, Any] = shown) -> str:
            return ", ".join(shown[p](r.params[p]) if p in r.params else f"{p.split('.')[-1]}=?" for p in row_params)

        groups: dict[tuple[tuple[str, str], ...], dict[str, CellRow]] = defaultdict(dict)
        for r in rs:  # cells of other attacks share the release: the same masks, read once
            first = groups[_stage_params(r, budget)].setdefault(r.params[budget], r)
            if first is not r and not _same_masks(masks[first.run_id], masks[r.run_id]):
                raise VisprivError(f"--budget-deletions: two cells of {defenses[r.defense]!r} ({r.dataset}) logged "
                                   "different kept masks (runs of another seed?); pick one run with --parent")
        labels: dict[str, tuple[tuple[str, str], ...]] = {}
        for key, cells in groups.items():
            name = label(next(iter(cells.values())))
            if name in labels and labels[name] != key:
                other = dict(labels[name])
                differ = sorted(k for k, v in key if other.get(k) != v and k not in row_params)
                raise VisprivError(f"--budget-deletions: two configs share the row {name!r}; they differ in "
                                   f"{', '.join(differ)}: add it to the rows (ROW1,ROW2:BUDGET)")
            labels[name] = key
        budgets = sorted({r.params[budget] for r in rs}, key=_sort_key)
        wanted = pairs if pairs is not None else list(itertools.pairwise(budgets))
        if not wanted:
            raise VisprivError(f"--budget-deletions: {scenario} ran one value of {budget} only ({budgets[0]}); "
                               "two budgets are compared")
        order = {n: tuple(_natural(dict(labels[n]).get(p, "")) for p in row_params) for n in labels}
        table = DeletionTable(scenario, budget, row_params, sorted(labels, key=order.__getitem__), list(wanted))
        table.notes = sorted({r.provenance for r in rs if r.provenance})
        for name, key in labels.items():
            cells = groups[key]
            for low, high in table.pairs:
                lo = next((r for b, r in cells.items() if _same_value(b, low)), None)
                hi = next((r for b, r in cells.items() if _same_value(b, high)), None)
                if lo is None or hi is None:
                    continue
                what = f" (row {name}, {budget} {value_text(low)} and {value_text(high)})"
                table.cells[(name, (low, high))] = deleted_then_kept(masks[lo.run_id], masks[hi.run_id], what)
        if not table.cells:
            ran = ", ".join(value_text(b) for b in budgets)
            raise VisprivError(f"--budget-deletions: no config of {scenario} ran both budgets of any pair asked for; "
                               f"{budget} ran {ran}")
        out.append(table)
    return out


LEGEND = ("per album, the fraction of the photos deleted at the lower budget that the higher budget keeps, "
          "averaged over albums ± its standard error (n albums); albums that deleted nothing at the lower "
          "budget are left out (Table 4 of album pruning, AAAI 2020)")


def to_markdown(t: DeletionTable, digits: int = 3) -> str:
    """The table in markdown with a one-line legend."""
    rows_title = ", ".join(p.split(".")[-1] for p in t.row_params)
    lines = [
        f"**Deleted at the lower budget, kept at the higher** ({t.scenario}; rows: {', '.join(t.row_params)}; "
        f"columns: {t.budget} lower → higher) -- {LEGEND}.\n",
        f"| {rows_title} \\ {t.budget.split('.')[-1]} | " + " | ".join(t.pair_label(p) for p in t.pairs) + " |",
        "|---|" + "---|" * len(t.pairs),
    ]
    for r in t.rows:
        lines.append(f"| {r} | " + " | ".join(t.cells[(r, p)].text(digits) if (r, p) in t.cells else "–"
                                            for p in t.pairs) + " |")
    lines += [f"\nData: {note}" for note in t.notes]
    return "\n".join(lines) + "\n"


CSV_COLUMNS = ["scenario", "row", "budget_param", "budget_low", "budget_high", "mean", "se", "n_albums",
               "n_albums_nothing_deleted", "pooled"]


def to_csv(found: list[DeletionTable]) -> str:
    """Every cell of ``found`` as one CSV row (:data:`CSV_COLUMNS`); empty fields where undefined."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for t in found:
        for r in t.rows:
            for low, high in t.pairs:
                c = t.cells.get((r, (low, high)))
                if c is None:
                    continue
                writer.writerow([t.scenario, r, t.budget, low, high, _blank(c.mean), _blank(c.se), c.n,
                                 c.n_nothing_deleted, _blank(c.pooled)])
    return buf.getvalue()


def _blank(value: float | None) -> str:
    return "" if value is None else json.dumps(value)


def to_html(t: DeletionTable) -> str:
    """The table as HTML for the report page (:mod:`vispriv.harness.report.html`)."""
    head = "".join(f"<th>{html.escape(t.pair_label(p))}</th>" for p in t.pairs)
    body = []
    for r in t.rows:
        cells = "".join(f"<td>{html.escape(t.cells[(r, p)].text())}</td>" if (r, p) in t.cells
                        else '<td class="missing">–</td>' for p in t.pairs)
        body.append(f"<tr><th>{html.escape(r)}</th>{cells}</tr>")
    return (
        f"<h3>deleted at the lower budget, kept at the higher <small>({html.escape(LEGEND)})</small></h3>"
        f"<table><tr><th>{html.escape(', '.join(t.row_params))} \\ {html.escape(t.budget)}</th>{head}</tr>"
        + "".join(body) + "</table>"
        + "".join(f"<p class=\"note\"><b>Data:</b> {html.escape(n)}</p>" for n in t.notes)
    )
