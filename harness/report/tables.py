"""Reports from the MLflow store: attack x defense pivots (md/csv/html), heatmaps, curves.

Rows are the latest FINISHED cell run per cell hash in an experiment (or in one parent
run). Each table pivots one metric: a row per attack (chain), a column per defense (with
the dataset when a matrix has several). Where a metric has a standard error
(``<metric>_se``) the table shows ``mean ± se``. A cell run more than once under other
matrix seeds (``--set seed=N`` into one store) shows the mean over its runs ± the standard
error across them.

Colours take the defender's point of view (:func:`green_when_high`): a utility metric
(``utility/...``) is green at the better end of its direction; an attack's bookkeeping
(``attack/...``: steps, seconds, batch size) is no privacy score and is not coloured; every
other metric scores an attack, its direction (the run's ``vispriv.higher_is_better`` tag) says
how good the *attack* is, and the end where the attack succeeds is red. Each title says which.
Where the metric's plugin says what its values mean, the scale is anchored to it
(:mod:`vispriv.harness.report.colours`), else relative to the table.
Without ``--metric`` a report shows each scenario's headline metrics, those its plugins
declare (:func:`headline_metrics`).
Heatmap ticks and curve legends name configs by the params that vary between them
(:func:`config_labels`). The HTML page is laid out by :mod:`vispriv.harness.report.html`,
privacy-utility frontiers are computed by :mod:`vispriv.harness.report.frontier`.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import sys
import textwrap
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from vispriv.harness.errors import VisprivError
from vispriv.harness.hashing import stable_hash
from vispriv.harness.labels import relabel, short_value
from vispriv.harness.path_labels import shortest_parts
from vispriv.harness.report.colours import Scale, scale_of
from vispriv.harness.stats import mean_se
from vispriv.harness.tracking import Tracker, store_location
from vispriv.harness.writes import make_folder, write_file, write_text


@dataclass
class CellRow:
    run_id: str
    scenario: str
    dataset: str
    defense: str
    attack: str
    params: dict[str, str]
    metrics: dict[str, float]
    higher_is_better: dict[str, bool]
    artifact_uri: str
    parent: str = ""
    cell_hash: str = ""
    provenance: str = ""
    #: The metrics its plugins declare the default view (``vispriv.headline``; empty for older runs).
    headline: list[str] = field(default_factory=list)
    #: What values of its metrics mean (``vispriv.anchors``): ``{metric: {"success": [20.0, "..."]}}``.
    anchors: dict[str, dict[str, list]] = field(default_factory=dict)
    #: Whether its attack uses nothing the release carries (``vispriv.no_leak``).
    no_leak: bool = False


@dataclass
class Pivot:
    metric: str
    scenario: str
    rows: list[str]
    cols: list[str]
    values: dict[tuple[str, str], float] = field(default_factory=dict)
    errors: dict[tuple[str, str], float] = field(default_factory=dict)
    higher_is_better: bool = True
    #: Provenance notes of the datasets behind the pivot (e.g. "SIMULATED world").
    notes: list[str] = field(default_factory=list)
    row_title: str = "attack"
    col_title: str = "defense"
    #: Compact labels of the row and column labels (the params that vary), for plots.
    short: dict[str, str] = field(default_factory=dict)
    #: The dataset label of the cells behind the pivot ("" for a table over several).
    dataset: str = ""
    #: In a table over several datasets: each row's (dataset, attack) labels.
    row_parts: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: What the metric's values mean, as its cells logged them (:mod:`vispriv.harness.report.colours`).
    anchors: dict[str, list] = field(default_factory=dict)
    #: The no-leak baseline attack's value in this table (the mean over its cells), if it has one.
    baseline: float | None = None

    @property
    def green_high(self) -> bool:
        return green_when_high(self.metric, self.higher_is_better)

    @property
    def sense(self) -> str:
        return sense_text(self.metric, self.higher_is_better)

    @property
    def scale(self) -> Scale | None:
        """The colour scale: anchored to the metric's meaning where it has one, else relative to
        this table's values; ``None`` for bookkeeping, which is not coloured."""
        if is_bookkeeping(self.metric):
            return None
        anchors = {} if is_utility(self.metric) else self.anchors
        return scale_of(list(self.values.values()), not self.green_high, anchors, self.baseline)

    def colour_position(self, value: float) -> float | None:
        """Where ``value`` lies between the red (0.0) and the green (1.0) end of this pivot's
        :attr:`scale` (a relative scale of equal values: 0.5); ``None`` for NaN or an uncoloured metric.

        An infinite value lies beyond every finite one: the far end (PSNR of an exact copy: the worst for privacy).
        """
        if is_bookkeeping(self.metric) or math.isnan(value):
            return None
        if math.isinf(value):
            return 1.0 if (value > 0) == self.green_high else 0.0
        scale = self.scale
        return None if scale is None else scale.position(value)

    def scale_text(self) -> str:
        """What the colours are anchored to (:meth:`~vispriv.harness.report.colours.Scale.text`); empty when uncoloured."""
        scale = self.scale
        return "" if scale is None else scale.text()

    def label(self, key: str) -> str:
        """The compact label of a row or column (the one heatmaps, frontiers and paired tables show)."""
        return self.short.get(key, key)

    def cell_text(self, r: str, c: str, digits: int = 3) -> str:
        if (r, c) not in self.values:
            return "–"
        v = self.values[(r, c)]
        text = _fmt(v, digits)
        if (r, c) in self.errors:
            se = self.errors[(r, c)]
            # A standard error of one sample is undefined (logged NaN): say how few there were.
            text += " (n = 1)" if math.isnan(se) else f" ± {_fmt(se, digits)}"
        return text


def is_utility(metric: str) -> bool:
    """Whether ``metric`` is a defense's own utility (``utility/...``); every other metric
    (``images/ssim``, ``place/top1_accuracy``, ``attack/...``) belongs to an attack."""
    return metric.startswith("utility/")


#: Metrics an attack logs about itself (time, steps, batch size): not a measure of its success.
BOOKKEEPING_PREFIX = "attack/"


def is_bookkeeping(metric: str) -> bool:
    """Whether ``metric`` is an attack's own bookkeeping (``attack/...``): no privacy score, never coloured."""
    return metric.startswith(BOOKKEEPING_PREFIX)


def green_when_high(metric: str, higher_is_better: bool) -> bool:
    """Whether high values of ``metric`` are coloured green: the defender's point of view.

    A utility metric's direction is the defender's own, so its better end is green. The
    direction of any other metric says how good the attack is (SSIM of a reconstruction,
    top-k accuracy of a geolocator: higher = the attack succeeds), so its better end is
    red: green means the defense holds.
    """
    return higher_is_better if is_utility(metric) else not higher_is_better


def sense_text(metric: str, higher_is_better: bool, colour: bool = True) -> str:
    """What ``metric``'s values mean, e.g. ``privacy: higher = attack succeeds (red)``
    (with the colour :func:`green_when_high` gives that end, unless ``colour`` is false)."""
    word = "higher" if higher_is_better else "lower"
    if is_utility(metric):
        return f"utility: {word} is better" + (" (green)" if colour else "")
    if is_bookkeeping(metric):
        return "the attack's bookkeeping, not a privacy score" + (" (not coloured)" if colour else "")
    return f"privacy: {word} = attack succeeds" + (" (red)" if colour else "")


def config_labels(rows: list[CellRow], kind: str) -> dict[str, str]:
    """The label every view shows for each ``kind`` (``"dataset"``, ``"defense"`` or ``"attack"``) label of ``rows``.

    It is the label the run logged, made by :func:`vispriv.harness.labels.config_label` as
    progress lines and ``--dry-run`` print it (the settings that differ from the defaults,
    nested ones as dotted keys); a label logged by an older version of the harness is
    rewritten into that form (:func:`~vispriv.harness.labels.relabel`).
    """
    return {getattr(r, kind): relabel(getattr(r, kind)) for r in rows}


def _fmt(v: float, digits: int) -> str:
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v != 0 and (abs(v) >= 1e4 or abs(v) < 1e-3):
        return f"{v:.{digits}g}"
    return f"{v:.{digits}f}"


def collect(
    tracker: Tracker, experiment: str, parent_id: str | None = None, cell_hashes: set[str] | None = None
) -> list[CellRow]:
    """Latest FINISHED cell run per cell hash (only ``cell_hashes`` when given)."""
    exp_id = tracker.experiment_id(experiment, create=False)
    if exp_id is None:
        names = [e.name for e in tracker.client.search_experiments()]
        raise VisprivError(
            f"no experiment {experiment!r} in {store_location(tracker.uri)}; experiments: {', '.join(names) or 'none'}"
        )
    seen: set[str] = set()
    out = []
    for run in tracker.cell_runs(exp_id, status="FINISHED", parent_id=parent_id):
        tags = run.data.tags
        h = tags.get("vispriv.cell_hash", run.info.run_id)
        if h in seen or (cell_hashes is not None and h not in cell_hashes):
            continue
        seen.add(h)
        out.append(
            CellRow(
                run_id=run.info.run_id,
                scenario=tags.get("vispriv.scenario", "?"),
                dataset=relabel(tags.get("vispriv.dataset", "?")),
                defense=relabel(tags.get("vispriv.defense", "?")),
                attack=relabel(tags.get("vispriv.attack", "?")),
                params=dict(run.data.params),
                metrics={k: _unclamp(v) for k, v in run.data.metrics.items()},
                higher_is_better=json.loads(tags.get("vispriv.higher_is_better", "{}")),
                artifact_uri=run.info.artifact_uri,
                parent=tags.get("mlflow.parentRunId", ""),
                cell_hash=h,
                provenance=tags.get("vispriv.provenance", ""),
                headline=json.loads(tags.get("vispriv.headline", "[]")),
                anchors=json.loads(tags.get("vispriv.anchors", "{}")),
                no_leak=tags.get("vispriv.no_leak") == "1",
            )
        )
    return out


def _unclamp(value: float) -> float:
    """MLflow's sqlite store keeps +-inf as +-float max: read it back as infinity."""
    return math.copysign(math.inf, value) if abs(value) >= sys.float_info.max else value


def metric_names(rows: list[CellRow]) -> list[str]:
    names = sorted({m for r in rows for m in r.metrics if not m.endswith("_se")})
    return names


def headline_metrics(rows: list[CellRow]) -> dict[str, set[str]]:
    """The metrics a report shows without ``--metric``: each with the scenarios that show it.

    A scenario shows the headline metrics its cells' plugins declare (``Metric.headline``,
    ``Defense.headline``) and logged. A scenario whose cells declare none (runs of an older
    version, plugins that declare nothing) shows every metric but standard errors and an
    attack's bookkeeping.
    """
    by_scenario: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        by_scenario[r.scenario].update(m for m in r.headline if m in r.metrics)
    for scenario, names in by_scenario.items():
        if not names:
            names.update(m for r in rows if r.scenario == scenario for m in metric_names([r]) if not is_bookkeeping(m))
    out: dict[str, set[str]] = defaultdict(set)
    for scenario, names in by_scenario.items():
        for name in names:
            out[name].add(scenario)
    return {name: out[name] for name in sorted(out)}


def resolve_metric(rows: list[CellRow], wanted: str) -> list[str]:
    """Full metric names matching ``wanted`` (exact, or as the last path component)."""
    names = metric_names(rows)
    if wanted in names:
        return [wanted]
    matches = [n for n in names if n.split("/")[-1] == wanted]
    if not matches:
        raise VisprivError(f"no metric {wanted!r} in these runs; metrics: {', '.join(names) or 'none'}")
    return matches


def pivot(rows: list[CellRow], metric: str, by_dataset: bool = False) -> list[Pivot]:
    """One pivot per scenario that has ``metric``, and per dataset plugin where a scenario has several.

    Several datasets of one plugin (four ``captured-update`` captures) share one pivot with a
    row per dataset and attack (:attr:`Pivot.row_parts`); ``by_dataset`` gives each dataset
    a pivot of its own instead (the strongest-attack view ranks attacks within one dataset).
    """
    groups: dict[tuple[str, str], list[CellRow]] = defaultdict(list)
    for r in rows:
        if metric in r.metrics:
            groups[(r.scenario, r.dataset if by_dataset else dataset_plugin(r))].append(r)
    datasets_of: dict[str, int] = defaultdict(int)
    for scenario, _ in groups:
        datasets_of[scenario] += 1
    # Labels from every row of a scenario, as the frontier and the paired tables make them.
    short = {**config_labels(rows, "attack"), **config_labels(rows, "defense")}
    out = []
    for (scenario, _), rs in sorted(groups.items()):
        datasets = sorted({r.dataset for r in rs})
        dataset = datasets[0] if len(datasets) == 1 else ""
        name = dataset or dataset_plugin(rs[0])
        title = f"{scenario}: {name}" if datasets_of[scenario] > 1 else scenario
        p = Pivot(metric, title, [], _ordered(r.defense for r in rs), dataset=dataset)
        p.short = {r.defense: short[r.defense] for r in rs}
        row_of: dict[tuple[str, str], str] = {}
        for d in datasets:
            for attack in _ordered(r.attack for r in rs if r.dataset == d):
                key = attack if dataset else f"{d}, {attack}"
                row_of[(d, attack)] = key
                p.rows.append(key)
                p.short[key] = short[attack] if dataset else f"{d}, {short[attack]}"
                if not dataset:
                    p.row_parts[key] = (d, attack)
        if not dataset:
            p.row_title = "dataset, attack"
        p.notes = sorted({r.provenance for r in rs if r.provenance})
        p.higher_is_better = next((r.higher_is_better.get(metric, True) for r in rs), True)
        p.anchors = next((r.anchors[metric] for r in rs if metric in r.anchors), {})
        baseline = [r.metrics[metric] for r in rs if r.no_leak and math.isfinite(r.metrics[metric])]
        p.baseline = sum(baseline) / len(baseline) if baseline and not is_utility(metric) else None
        runs: dict[tuple[str, str], list[CellRow]] = defaultdict(list)
        for r in rs:
            runs[(row_of[(r.dataset, r.attack)], r.defense)].append(r)
        _fill(p, runs)
        out.append(p)
    return out


def dataset_plugin(row: CellRow) -> str:
    """The dataset plugin of a cell (``captured-update``): the logged name, else its label's."""
    return row.params.get("dataset") or row.dataset.split("(")[0]


def _fill(p: Pivot, runs: dict[tuple[str, str], list[CellRow]]) -> None:
    """``p``'s values and standard errors from the runs of each of its cells: the logged
    ``<metric>_se`` of one run, the mean ± s.e. over the runs of one cell under other seeds."""
    repeated = 0
    for key, same in runs.items():
        p.values[key], error = _over_runs([r.metrics[p.metric] for r in same])
        if error is not None:
            p.errors[key] = error
            repeated = max(repeated, len(same))
        elif p.metric + "_se" in same[0].metrics:
            p.errors[key] = same[0].metrics[p.metric + "_se"]
    if repeated:
        p.notes.append(f"cells run more than once (other matrix seeds): mean ± standard error over "
                       f"their runs (up to {repeated})")


def _over_runs(values: list[float]) -> tuple[float, float | None]:
    """One cell's value over its runs: the value itself for one run; for several (the same cell
    under other matrix seeds), their mean and its standard error."""
    return (values[0], None) if len(values) == 1 else mean_se(values)


def param_value(params: dict[str, str], name: str) -> str | None:
    """The logged value of ``name`` in a run's params, or None.

    Nested settings are logged as one JSON object per top-level field
    (``defense.matching = {"criterion": "vocabulary", ...}``); a dotted name reaches into it the
    way the cell labels write it (``defense.matching.criterion``), a string as plain text and
    any other value as JSON.
    """
    if name in params:
        return params[name]
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        head = ".".join(parts[:cut])
        if head not in params:
            continue
        try:
            value = json.loads(params[head])
        except ValueError:
            return None
        for key in parts[cut:]:
            if not isinstance(value, dict) or key not in value:
                return None
            value = value[key]
        return value if isinstance(value, str) else json.dumps(value)
    return None


def check_table_params(rows: list[CellRow], names: list[str]) -> None:
    """Raise :class:`VisprivError` naming each of ``names`` that no run logged, with the
    params the runs did log (a ``--table`` of a misspelt or absent setting used to print nothing)."""
    missing = [n for n in names if all(param_value(r.params, n) is None for r in rows)]
    if missing:
        logged = sorted({k for r in rows for k in r.params if k.split(".")[0] in ("dataset", "defense", "attack")})
        raise VisprivError(
            f"--table: no cell logged {', '.join(missing)}; logged params: {', '.join(logged)} "
            "(nested settings by dotted keys, e.g. defense.matching.criterion)"
        )


#: ``--table`` axes that stand for a cell's configured plugin: they take its label
#: (``dlg(steps=100)``), not the plugin name the params log, so two configs of one plugin stay apart.
PLUGIN_AXES = ("dataset", "defense", "attack")


def param_pivot(rows: list[CellRow], metric: str, row_params: list[str], col_param: str) -> list[Pivot]:
    """``metric`` with rows = combinations of ``row_params`` and columns = values of ``col_param``.

    For sweeps (e.g. rows ``defense.dictionary_size,defense.m``, columns ``defense.epsilon``).
    Per scenario; only runs that logged every named param (nested settings by dotted keys,
    :func:`param_value`; ``attack``, ``defense`` and ``dataset`` by the cell's labels,
    :data:`PLUGIN_AXES`). A ``utility/`` metric belongs to the defense, so its rows ignore the
    attack; other metrics get one row per attack too, unless the attack is an axis of its own.
    Values carry their standard errors as the attack x defense tables do (:func:`_fill`).
    """
    groups: dict[str, list[CellRow]] = defaultdict(list)
    named = [col_param, *row_params]
    for r in rows:
        values = {p: getattr(r, p) if p in PLUGIN_AXES else param_value(r.params, p) for p in named}
        found = {p: v for p, v in values.items() if v is not None}
        if metric in r.metrics and len(found) == len(values):
            groups[r.scenario].append(replace(r, params={**r.params, **found}))
    out = []
    for scenario, rs in sorted(groups.items()):
        per_attack = not is_utility(metric) and "attack" not in named
        shown = {p: _plugin_label if p in PLUGIN_AXES else _varying_part(rs, p) for p in row_params}
        attack = (lambda r: [r.attack]) if per_attack else (lambda r: [])
        label = {r.run_id: ", ".join(attack(r) + [shown[p](r.params[p]) for p in row_params]) for r in rs}
        sort_key = {label[r.run_id]: (*attack(r), *(_sort_key(r.params[p]) for p in row_params)) for r in rs}
        title = f"{' x '.join(p.split('.')[-1] for p in row_params) or 'all'} by {col_param.split('.')[-1]}"
        p = Pivot(metric, f"{scenario}; {title}", sorted(sort_key, key=sort_key.__getitem__),
                  sorted({r.params[col_param] for r in rs}, key=_sort_key),
                  row_title=", ".join(row_params), col_title=col_param)
        p.short = _path_parts(rs, col_param)
        p.notes = sorted({r.provenance for r in rs if r.provenance})
        p.higher_is_better = next((r.higher_is_better.get(metric, True) for r in rs), True)
        runs: dict[tuple[str, str], list[CellRow]] = defaultdict(list)
        for r in rs:
            runs[(label[r.run_id], r.params[col_param])].append(r)
        _fill(p, {key: _last_cell(same) for key, same in runs.items()})
        out.append(p)
    return out


def _plugin_label(label: str) -> str:
    """A plugin axis's row label: the cell's label of that plugin as it is."""
    return label


def _last_cell(runs: list[CellRow]) -> list[CellRow]:
    """The runs of the last cell among ``runs`` (the same dataset, defense and attack labels: one
    cell under other matrix seeds); a table whose axes leave several cells in one place shows the last."""
    last = (runs[-1].dataset, runs[-1].defense, runs[-1].attack)
    return [r for r in runs if (r.dataset, r.defense, r.attack) == last]


def _path_parts(rows: list[CellRow], param: str) -> dict[str, str]:
    """``{value: shortest distinguishing part}`` when every value of ``param`` is an absolute
    path (a dataset's file or folder, :func:`~vispriv.harness.path_labels.shortest_parts`), else ``{}``."""
    values = {r.params[param] for r in rows if param in r.params}
    if not values or not all(os.path.isabs(os.path.expanduser(v)) for v in values):
        return {}
    return shortest_parts(values)


def _varying_part(rows: list[CellRow], param: str):
    """Label maker for ``param``: ``name=value`` (an absolute path by its shortest distinguishing
    part), or for nested configs (JSON objects) only the keys whose values differ between
    ``rows`` (``name=default`` when none does)."""
    name = param.split(".")[-1]
    try:
        objects = [json.loads(r.params[param]) for r in rows]
    except ValueError:
        objects = []
    if not objects or not all(isinstance(o, dict) for o in objects):
        paths = _path_parts(rows, param)
        return lambda value: f"{name}={paths.get(value) or value_text(value)}"
    keys = sorted({k for o in objects for k in o if len({json.dumps(x.get(k), sort_keys=True) for x in objects}) > 1})

    def label(value: str) -> str:
        obj = json.loads(value)
        return ",".join(f"{k}={short_value(obj.get(k))}" for k in keys) or f"{name}=default"

    return label


def value_text(text: str) -> str:
    """A logged param value as the matrix's labels write it (``sigma=1``, not ``sigma=1.0``;
    lists as ``[2/4]``), so that every view of a report names a config the same way."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return text if isinstance(value, str) else short_value(value)


def _sort_key(text: str) -> tuple[int, float, str]:
    """Numbers first in numeric order (inf last among them), then other values by name."""
    value = _as_float(text)
    return (0, value, "") if value is not None else (1, 0.0, text)


def _ordered(items: Any) -> list[str]:
    seen: dict[str, None] = {}
    for i in items:
        seen.setdefault(i, None)
    return sorted(seen, key=lambda s: (s != "none", s))


# -- rendering ------------------------------------------------------------------------
def to_markdown(p: Pivot) -> str:
    """The pivot as a markdown table; a single attack against many defenses is written
    one defense per row so that it stays readable."""
    from vispriv.harness.report.strongest import strongest_cells

    arrow = p.sense
    bold = strongest_cells(p)

    def cell(r: str, c: str) -> str:
        return f"**{p.cell_text(r, c)}**" if (r, c) in bold else p.cell_text(r, c)

    if bold:
        arrow += "; bold: the strongest attack against each defense" + (" on each dataset" if p.row_parts else "")
    if len(p.rows) == 1 and len(p.cols) > 3 and p.row_title == "attack":
        attack = p.rows[0]
        lines = [f"**{p.metric}** ({p.scenario}; {arrow}) — attack: {p.label(attack)}", ""]
        lines += ["| defense | " + p.metric + " |", "|---|---|"]
        lines += [f"| {p.label(c)} | {p.cell_text(attack, c)} |" for c in p.cols]
    else:
        lines = [f"**{p.metric}** ({p.scenario}; {arrow}) — rows: {p.row_title}, columns: {p.col_title}", ""]
        lines.append(f"| {p.row_title} \\ {p.col_title} | " + " | ".join(p.label(c) for c in p.cols) + " |")
        lines.append("|---|" + "---|" * len(p.cols))
        for r in p.rows:
            lines.append(f"| {p.label(r)} | " + " | ".join(cell(r, c) for c in p.cols) + " |")
    lines += [f"\nData: {note}" for note in p.notes]
    return "\n".join(lines) + "\n"


def to_csv(p: Pivot) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["scenario", "metric", "attack", "defense", "value", "se"])
    for (r, c), v in p.values.items():
        scenario, attack = p.scenario, r
        if r in p.row_parts:  # a table over several datasets: each row's dataset as a one-dataset table names it
            scenario, attack = f"{p.scenario.split(': ')[0]}: {p.row_parts[r][0]}", p.row_parts[r][1]
        w.writerow([scenario, p.metric, attack, c, v, p.errors.get((r, c), "")])
    return buf.getvalue()


def heatmap_png(p: Pivot, path: Path) -> Path:
    """:func:`heatmap_figure` saved as a PNG."""
    return save_figure(heatmap_figure(p), path)


def heatmap_figure(p: Pivot) -> Any:
    """A heatmap of the pivot, coloured from the defender's point of view (:meth:`Pivot.colour_position`).

    The figure is sized from its labels (ticks are the compact :attr:`Pivot.short` labels):
    the axes are at least 1.4 inches high, so a one-row pivot keeps a readable colour bar,
    and constrained layout leaves room for the wrapped title and the rotated x labels.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    # Colour by position between the red and the green end (Pivot.colour_position), so that an
    # infinite value (PSNR of an exact copy) takes the colour of its far end instead of none.
    grid = np.full((len(p.rows), len(p.cols)), np.nan)
    for (r, c), v in p.values.items():
        t = p.colour_position(v)
        grid[p.rows.index(r), p.cols.index(c)] = np.nan if t is None else t
    finite = [v for v in p.values.values() if math.isfinite(v)]
    xlabels = [p.label(c) for c in p.cols]
    ylabels = [p.label(r) for r in p.rows]
    width, height = heatmap_size(p)
    fig, ax = plt.subplots(figsize=(width, height), layout="constrained")
    im = ax.imshow(grid, cmap="RdYlGn", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(p.cols)), xlabels, rotation=30, ha="right", fontsize=7)
    ax.set_yticks(range(len(p.rows)), ylabels, fontsize=7)
    for i, r in enumerate(p.rows):
        for j, c in enumerate(p.cols):
            if (r, c) in p.values:
                t = p.colour_position(p.values[(r, c)])
                ink = "white" if t is not None and abs(t - 0.5) > 0.35 else "black"  # on the dark ends
                ax.text(j, i, _fmt(p.values[(r, c)], 3), ha="center", va="center", fontsize=7, color=ink)
    title = textwrap.fill(f"{p.metric} ({p.scenario})", width=int(width * 11))
    scale_line = textwrap.fill(p.scale_text(), width=int(width * 12))
    ax.set_title(f"{title}\n{p.sense}" + (f"\n{scale_line}" if scale_line else ""), fontsize=9)
    scale = p.scale
    if scale is not None and (finite or scale.anchored):  # an all-infinite relative pivot has no scale
        bar = fig.colorbar(im, ax=ax, aspect=12, pad=0.02)
        ends = sorted({scale.green.value, scale.red.value})
        values = [ends[0], (ends[0] + ends[-1]) / 2, ends[-1]] if len(ends) > 1 else ends
        bar.set_ticks([scale.position(v) for v in values], labels=[_fmt(v, 3) for v in values])
        where = "green = better utility" if is_utility(p.metric) else "red = attack succeeds"
        how = "anchored" if scale.anchored else "relative to this table"
        bar.set_label(f"{p.metric.split('/')[-1]}; {where}; {how}", fontsize=7)
        bar.ax.tick_params(labelsize=7)
    return fig


#: Resolution of the report's PNGs (dots per inch).
DPI = 110

#: Longest file-name stem a report writes (file systems allow 255 bytes per name).
MAX_STEM = 120


def file_stem(text: str, limit: int = MAX_STEM) -> str:
    """``text`` as a file-name stem: runs of characters other than letters, digits, ``_.=-``
    become ``_``; a stem longer than ``limit`` keeps its first characters and ends in a hash of
    the whole text, so distinct long labels (a dataset's many settings) stay distinct files."""
    stem = re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)
    if len(stem) <= limit:
        return stem
    return f"{stem[: limit - 11]}_{stable_hash(text, length=10)}"


def heatmap_size(p: Pivot) -> tuple[float, float]:
    """The heatmap's (width, height) in inches: 1.1 inch per column, so that every cell's
    number stays readable, and wide enough for the longest column label, which is drawn at
    30 degrees ending under its column (cos 30 = .87 of its length runs to the left); the
    HTML page shows it at this size (``width * DPI`` pixels)."""
    label_w = 0.06 * max(len(p.label(r)) for r in p.rows)  # inches of 7-point text
    slanted = 0.06 * 0.87 * max(len(p.label(c)) for c in p.cols)
    width = max(5.0, 0.3 + label_w + 1.1 * len(p.cols) + 1.3, slanted + 0.55 + 1.3)
    height = 0.9 + max(1.4, 0.45 * len(p.rows)) + 0.3 + 0.035 * max(len(p.label(c)) for c in p.cols)
    return width, height


def save_figure(fig: Any, path: Path) -> Path:
    """Write a matplotlib figure as a PNG (whole or not at all: :func:`~vispriv.harness.writes.write_file`) and free it."""
    import matplotlib.pyplot as plt

    try:
        return write_file(path, lambda tmp: fig.savefig(tmp, dpi=DPI))
    finally:
        plt.close(fig)


def curve_png(rows: list[CellRow], x: str, y: str, group: list[str], path: Path) -> Path:
    """:func:`curve_figure` saved as a PNG."""
    return save_figure(curve_figure(rows, x, y, group), path)


def curve_figure(rows: list[CellRow], x: str, y: str, group: list[str]) -> Any:
    """Line plot of metric ``y`` against param ``x``, one line per attack and ``group`` params.

    Lines are labelled by the params that vary (:func:`config_labels`); a run whose ``x``
    is infinite is a dotted horizontal line, and only then does the x label say so.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines: dict[str, list[tuple[float, float]]] = defaultdict(list)
    order: dict[str, tuple] = {}
    plotted = [r for r in rows if y in r.metrics and x in r.params and _as_float(r.params[x]) is not None]
    shown = {g: _varying_part([r for r in plotted if g in r.params], g) for g in group}
    attacks = config_labels(plotted, "attack")
    for r in plotted:
        xv = _as_float(r.params[x])
        assert xv is not None  # rows without a numeric x were filtered out above
        # A defense's utility is the same whatever attack ran against it: one line per group.
        by_attack = [] if is_utility(y) else [attacks[r.attack]]
        label = ", ".join(by_attack + [shown[g](r.params[g]) if g in r.params else f"{g}=?" for g in group]) or y
        order[label] = (*by_attack, *(_sort_key(r.params.get(g, "?")) for g in group))
        if (xv, r.metrics[y]) not in lines[label]:
            lines[label].append((xv, r.metrics[y]))
    if not lines:
        raise VisprivError(f"no runs have both param {x!r} and metric {y!r}")
    fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
    has_inf = False
    for i, (label, pts) in enumerate(sorted(lines.items(), key=lambda item: order[item[0]])):
        pts.sort()
        finite = [(a, b) for a, b in pts if math.isfinite(a)]
        style = ("-", "--", ":")[(i // 10) % 3]  # the colour cycle has 10 colours
        ax.plot([a for a, _ in finite], [b for _, b in finite], marker="os^"[(i // 10) % 3], linestyle=style,
                label=textwrap.fill(label, 60))
        for a, b in pts:
            if not math.isfinite(a):
                has_inf = True
                ax.axhline(b, linestyle=":", linewidth=1, color=ax.lines[-1].get_color())
    ax.set_xlabel(x + ("  (dotted: x = inf)" if has_inf else ""))
    ax.set_ylabel(f"{y}\n({sense_text(y, next(r.higher_is_better.get(y, True) for r in plotted), colour=False)})", fontsize=8)
    ax.legend(fontsize=6)
    ax.grid(alpha=0.3)
    return fig


def _as_float(text: str) -> float | None:
    try:
        return float(json.loads(text)) if text not in ("inf", "Infinity") else math.inf
    except (ValueError, TypeError):
        try:
            return float(text)
        except ValueError:
            return None


@dataclass
class ReportFiles:
    files: list[Path]
    markdown: str


def write_report(
    tracker: Tracker,
    experiment: str,
    out_dir: Path,
    metrics: list[str] | None = None,
    formats: list[str] | None = None,
    curves: list[tuple[str, str, list[str]]] | None = None,
    parent_id: str | None = None,
    tables: list[tuple[list[str], str]] | None = None,
    command: str = "",
    log_to_parent: bool = True,
    grids_per_scenario: int = 24,
    cell_hashes: set[str] | None = None,
    frontiers: list[tuple[str, str]] | None = None,
    gallery: bool = True,
    paired: list[str] | None = None,
    paired_ids: str | None = None,
    paired_cells: str | None = None,
    budget_deletions: list[tuple[list[str], str]] | None = None,
    budget_pairs: list[tuple[str, str]] | None = None,
    strongest: list[tuple[str, str | None]] | None = None,
) -> ReportFiles:
    """Write tables, heatmaps and curves for ``experiment`` into ``out_dir``.

    Files an earlier run wrote into ``out_dir`` and this one does not are removed (only those:
    :mod:`vispriv.harness.report.manifest`).
    The HTML page (:mod:`vispriv.harness.report.html`) also shows up to ``grids_per_scenario``
    PNG artifacts of the cell runs (reconstruction grids), copied into ``out_dir/grids``.
    ``cell_hashes`` limits the report to those cells (e.g. the current matrix's).
    ``tables`` (``(row_params, col_param)`` pairs, :func:`param_pivot`) replace the
    attack x defense pivots with parameter tables, the readable view of a sweep.
    ``frontiers`` (``(utility, privacy)`` metric pairs) add a privacy-utility frontier
    per scenario (:mod:`vispriv.harness.report.frontier`), first in the report.
    ``gallery``: stack the reconstruction samples the cells logged, one row per cell
    (:mod:`vispriv.harness.report.gallery`).
    ``paired``: metrics whose per-image CSVs rank the cells with paired differences
    between neighbours (:mod:`vispriv.harness.report.paired`); ``paired_ids`` (a regular
    expression) keeps only the images whose id matches, e.g. disjoint crops; ``paired_cells``
    only the cells whose label matches.
    ``budget_deletions`` (``(row_params, budget_param)`` pairs): per row config and pair of
    budgets (``budget_pairs``, else each budget with the next), the fraction of the photos
    deleted at the lower budget but kept at the higher, from the cells' kept masks
    (:mod:`vispriv.harness.report.deletions`, Table 4 of album pruning).
    ``strongest`` (``(privacy, utility or None)`` metric pairs): per scenario, each defense
    config's strongest attack on the privacy metric, the runner-up and the utility
    (:mod:`vispriv.harness.report.strongest`), before the attack x defense tables.
    """
    from vispriv.harness.report import deletions as report_deletions
    from vispriv.harness.report import frontier as report_frontier
    from vispriv.harness.report import gallery as report_gallery
    from vispriv.harness.report import html as report_html
    from vispriv.harness.report import paired as report_paired
    from vispriv.harness.report import strongest as report_strongest
    from vispriv.harness.report.manifest import replace_manifest

    formats = formats or ["md"]
    rows = collect(tracker, experiment, parent_id, cell_hashes)
    if not rows:
        raise VisprivError(f"experiment {experiment!r} has no FINISHED cell runs to report")
    names: list[str] = []
    for m in metrics or []:
        names.extend(n for n in resolve_metric(rows, m) if n not in names)
    # Without --metric: each scenario's headline metrics, pivoted over that scenario's cells only.
    shown_in = {n: {r.scenario for r in rows} for n in names} if metrics else headline_metrics(rows)
    names = names or list(shown_in)
    for row_params, col_param in tables or []:
        check_table_params(rows, [*row_params, col_param])
    make_folder(out_dir)
    files: list[Path] = []
    md_parts = [f"# vispriv report: {experiment}\n"]
    if command:
        md_parts.append(f"Generated by `{command}` from {tracker.uri}.\n")
    sections: dict[str, report_html.Section] = {}
    curve_figs: list[tuple[str, str]] = []
    frontier_figs: list[tuple[report_frontier.Frontier, str]] = []
    csv_parts = []
    for utility, privacy in frontiers or []:
        for uname, pname in report_frontier.resolve_pair(rows, utility, privacy):
            for f in report_frontier.frontiers(rows, uname, pname):
                stem = file_stem(f"{f.scenario}__{uname}__{pname}")
                png = report_frontier.frontier_png(f, out_dir / f"frontier_{stem}.png")
                files.append(png)
                md_parts.append(report_frontier.to_markdown(f) + f"\n![frontier {f.scenario}]({png.name})\n")
                frontier_figs.append((f, png.name))
    for privacy, utility in strongest or []:
        for pname, uname in report_strongest.resolve(rows, privacy, utility):
            for t in report_strongest.tables(rows, pname, uname):
                md_parts.append(report_strongest.to_markdown(t))
                scenario = t.scenario.split(": ")[0]
                sections.setdefault(scenario, report_html.Section(scenario)).strongest.append(t)
    for name in names:
        among = [r for r in rows if r.scenario in shown_in[name]]
        pivots = [q for rp, cp in tables for q in param_pivot(among, name, rp, cp)] if tables else pivot(among, name)
        for p in pivots:
            stem = file_stem(f"{p.scenario}__{name}")
            png = heatmap_png(p, out_dir / f"heatmap_{stem}.png")
            files.append(png)
            md_parts.append(to_markdown(p) + f"\n![{name}]({png.name})\n")
            scenario = p.scenario.split(": ")[0]  # a pivot per dataset is titled 'scenario: dataset'
            sections.setdefault(scenario, report_html.Section(scenario)).tables.append((p, png.name))
            csv_parts.append(to_csv(p))
    for wanted in paired or []:
        for name in resolve_metric(rows, wanted):
            scores = report_paired.per_image_scores(tracker, rows, report_paired.metric_column(name), paired_ids)
            found = report_paired.ladders(rows, name, scores, paired_ids, paired_cells)
            if not found:
                raise VisprivError(
                    f"--paired {wanted}: no cell logged a per-image CSV (*{report_paired.PER_IMAGE_SUFFIX}) "
                    f"with a {report_paired.metric_column(name)!r} column"
                    + (f" and an image id matching {paired_ids!r}" if paired_ids else "")
                    + (f" and a label matching {paired_cells!r}" if paired_cells else "")
                    + "; image metrics (mae, ssim, psnr) log one"
                )
            for ladder in found:
                md_parts.append(report_paired.to_markdown(ladder))
                sections.setdefault(ladder.scenario, report_html.Section(ladder.scenario)).ladders.append(ladder)
    deletion_tables = []
    if budget_deletions:
        masks = report_deletions.kept_masks(tracker, rows)
        for row_params, budget in budget_deletions:
            for t in report_deletions.tables(rows, masks, row_params, budget, budget_pairs):
                deletion_tables.append(t)
                md_parts.append(report_deletions.to_markdown(t))
                sections.setdefault(t.scenario, report_html.Section(t.scenario)).deletions.append(t)
    for x, y, group in curves or []:
        for yname in resolve_metric(rows, y):
            png = curve_png(rows, x, yname, group, out_dir / f"curve_{file_stem(yname.replace('/', '_') + '_vs_' + x)}.png")
            files.append(png)
            md_parts.append(f"\n**{yname} vs {x}**\n\n![{yname} vs {x}]({png.name})\n")
            curve_figs.append((f"{yname} vs {x}", png.name))
    galleries = report_gallery.gallery_pngs(report_gallery.collect_samples(tracker, rows), out_dir) if gallery else []
    for scenario, png in galleries:
        files.append(png)
        md_parts.append(f"\n**Reconstructions side by side ({scenario})**: truths, then each cell, best first\n\n![gallery {scenario}]({png.name})\n")
    markdown = "\n".join(md_parts)
    if "md" in formats:
        files.append(write_text(out_dir / "report.md", markdown))
    if "csv" in formats:
        header, *_ = csv_parts[0].splitlines() if csv_parts else [""]
        body = [line for part in csv_parts for line in part.splitlines()[1:]]
        files.append(write_text(out_dir / "report.csv", "\n".join([header, *body]) + "\n"))
    if "csv" in formats and deletion_tables:
        files.append(write_text(out_dir / "budget_deletions.csv", report_deletions.to_csv(deletion_tables)))
    if "html" in formats:
        for scenario, grids in report_html.copy_grids(tracker, rows, out_dir, grids_per_scenario).items():
            sections.setdefault(scenario, report_html.Section(scenario)).grids = grids
            files.extend(out_dir / g.src for g in grids)
        for scenario, png in galleries:
            gallery_grid = report_html.Grid(png.name, f"reconstructions side by side ({scenario}): truths, then each cell, best first")
            section = scenario.split(": ")[0]  # a gallery per dataset is titled 'scenario: dataset'
            sections.setdefault(section, report_html.Section(section)).grids.insert(0, gallery_grid)
        exp_id = str(tracker.experiment_id(experiment, create=False))
        failed = report_html.failed_cells(tracker, exp_id, {r.cell_hash for r in rows}, parent_id)
        page = report_html.page(experiment, command, tracker.uri, rows,
                                [sections[k] for k in sorted(sections)], curve_figs, failed, frontier_figs)
        files.append(write_text(out_dir / "report.html", page))
    replace_manifest(out_dir, files)
    if log_to_parent:
        parents = tracker.parent_runs(str(tracker.experiment_id(experiment, create=False)))
        if parents:
            for f in files:
                tracker.log_artifact(parents[0].info.run_id, f, "report")
    return ReportFiles(files, markdown)
