"""The HTML report: one page a person opens in a browser to see the whole matrix.

Per scenario it shows the attack x defense tables (each cell coloured from the
defender's point of view, :func:`vispriv.harness.report.green_when_high`: red where an
attack succeeds or utility is lost, green where the defense holds or utility is kept; a
legend at the top says so), the heatmap PNGs, and the reconstruction grids: the PNG
artifacts the cell runs logged, copied next to the report (``grids/``) so the folder can
be moved or served as it is. Privacy-utility frontiers and curves come first when the
report was asked for them; cells that failed are listed with their error.
"""

from __future__ import annotations

import html
import os
import shutil
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from vispriv.harness.labels import relabel
from vispriv.harness.report import strongest
from vispriv.harness.report.deletions import DeletionTable
from vispriv.harness.report.deletions import to_html as deletions_html
from vispriv.harness.report.frontier import Frontier, axes_text, missing_text
from vispriv.harness.report.paired import Ladder, order_text, sense
from vispriv.harness.report.strongest import StrongestTable
from vispriv.harness.report.tables import DPI, CellRow, Pivot, _fmt, heatmap_size
from vispriv.harness.writes import make_folder, write_file

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d232a;background:#fafafa}
header{background:#1f3a5f;color:#fff;padding:18px 32px}header h1{margin:0 0 6px 0;font-size:24px}
header p{margin:2px 0;font-size:13px;opacity:.9}header code{background:rgba(255,255,255,.15);padding:1px 4px}
nav{padding:10px 32px;background:#e8eef6;font-size:14px}nav a{margin-right:16px;color:#1f3a5f}
main{padding:8px 32px 40px 32px;max-width:1400px}section{margin-top:28px}
h2{border-bottom:2px solid #1f3a5f;padding-bottom:4px}h3{margin:22px 0 6px 0;font-size:16px}
h3 small{font-weight:normal;color:#56606b}
table{border-collapse:collapse;margin:6px 0 10px 0;background:#fff}
td,th{border:1px solid #cfd6de;padding:5px 10px;font-size:13px;text-align:right}
th{background:#eef1f4;text-align:left}td.missing{color:#9aa3ad;text-align:center}td.weak{color:#b3261e;font-weight:bold}
.pair{display:flex;flex-wrap:wrap;gap:18px;align-items:flex-start}.pair img{max-width:520px}
.grids{display:grid;grid-template-columns:repeat(auto-fill,minmax(340px,1fr));gap:14px}
#curves .grids{grid-template-columns:repeat(auto-fill,minmax(520px,1fr))}
figure{margin:0;background:#fff;border:1px solid #d8dee4;padding:8px}figure img{width:100%}
figcaption{font-size:12px;color:#39424c;margin-top:4px;word-break:break-word}
.summary span{display:inline-block;margin-right:22px}.failed li{font-size:13px;margin:3px 0}
img{max-width:100%}.legend{font-size:13px;background:#fff;border:1px solid #d8dee4;padding:6px 10px}
.swatch{display:inline-block;width:60px;height:12px;vertical-align:middle;margin:0 4px;
background:linear-gradient(90deg,hsl(0,55%,86%),hsl(60,55%,86%),hsl(120,55%,86%))}
td.front{font-weight:bold}
"""

LEGEND = (
    '<p class="legend"><b>Colours are the defender\'s point of view:</b> red<span class="swatch"></span>green. '
    "A <b>privacy</b> metric is one an attack scores (its direction says how good the attack is): red where the "
    "attack succeeds, green where the defense holds (SSIM 1.0 of a reconstruction is red). A <b>utility</b> metric "
    "(<code>utility/...</code>) is the defense's own: green at its better end. An attack's bookkeeping "
    "(<code>attack/...</code>: steps, seconds, batch size) is no privacy score and is not coloured. "
    "Each table says which it is. <b>Anchored or relative:</b> where a metric says what its values mean, its "
    "colours are anchored to that: red from the value at which the attack succeeds (a reconstruction's "
    "recognisable threshold, an identical image), green at the value of an attack that learned nothing (the "
    "no-leak baseline attack of the same table, else chance). Other metrics are coloured relative to the values "
    "of their table (lowest to highest): compare their numbers across tables, not their colours. Each table names "
    "its scale.</p>"
)


@dataclass
class Grid:
    """A PNG a cell run logged, copied next to the report."""

    src: str
    caption: str


@dataclass
class Section:
    """What the page shows of one scenario."""

    scenario: str
    tables: list[tuple[Pivot, str | None]] = field(default_factory=list)
    grids: list[Grid] = field(default_factory=list)
    ladders: list[Ladder] = field(default_factory=list)
    deletions: list[DeletionTable] = field(default_factory=list)
    strongest: list[StrongestTable] = field(default_factory=list)


def copy_grids(tracker: Any, rows: list[CellRow], out_dir: Path, per_scenario: int = 24) -> dict[str, list[Grid]]:
    """Download up to ``per_scenario`` PNG artifacts per scenario into ``out_dir/grids``."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    out: dict[str, list[Grid]] = defaultdict(list)
    target = out_dir / "grids"
    shutil.rmtree(target, ignore_errors=True)
    for row in sorted(rows, key=lambda r: (r.scenario, r.attack, r.defense)):
        if len(out[row.scenario]) >= per_scenario:
            continue
        for path in _pngs(tracker, row.run_id, ""):
            if len(out[row.scenario]) >= per_scenario:
                break
            with tempfile.TemporaryDirectory() as tmp:
                local = Path(tracker.client.download_artifacts(row.run_id, path, tmp))
                name = f"{row.run_id[:8]}_{path.replace('/', '_')}"
                dest = target / _safe(row.scenario) / name
                make_folder(dest.parent)
                write_file(dest, lambda tmp, src=local: shutil.copyfile(src, tmp))
            caption = f"{row.attack} vs {row.defense} · {row.dataset} · {path}"
            out[row.scenario].append(Grid(str(dest.relative_to(out_dir)), caption))
    return out


def _pngs(tracker: Any, run_id: str, path: str) -> list[str]:
    found = []
    for info in tracker.client.list_artifacts(run_id, path or None):
        if info.is_dir:
            found.extend(_pngs(tracker, run_id, info.path))
        elif info.path.lower().endswith(".png"):
            found.append(info.path)
    return found


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)


def failed_cells(tracker: Any, experiment_id: str, finished: set[str], parent_id: str | None) -> list[tuple[str, str]]:
    """(label, error) of cells whose latest run FAILED and that never FINISHED."""
    out, seen = [], set()
    for run in tracker.cell_runs(experiment_id, status="FAILED", parent_id=parent_id):
        tags = run.data.tags
        h = tags.get("vispriv.cell_hash", run.info.run_id)
        if h in finished or h in seen:
            continue
        seen.add(h)
        attack, defense = relabel(tags.get("vispriv.attack", "?")), relabel(tags.get("vispriv.defense", "?"))
        label = f"{attack} vs {defense} ({tags.get('vispriv.scenario', '?')})"
        out.append((label, tags.get("vispriv.error", "").splitlines()[0] if tags.get("vispriv.error") else ""))
    return out


def hue(p: Pivot, value: float) -> int | None:
    """The HSL hue of ``value``'s cell: 0 (red) to 120 (green), ``None`` for no colour."""
    t = p.colour_position(value)
    return None if t is None else int(round(120 * t))


def _colour(p: Pivot, value: float) -> str:
    h = hue(p, value)
    return "" if h is None else f' style="background:hsl({h},55%,86%)"'


def table_html(p: Pivot) -> str:
    """The pivot as an HTML table, each value coloured by where it lies in the metric's range
    (red to green from the defender's point of view, :func:`hue`)."""
    from vispriv.harness.report.strongest import strongest_cells

    arrow = p.sense
    bold = strongest_cells(p)
    if bold:
        arrow += "; bold: the strongest attack against each defense"
    if p.scale_text():
        arrow += "; " + html.escape(p.scale_text())
    where = p.scenario.split(": ", 1)[1] + "; " if ": " in p.scenario else ""
    head = "".join(f"<th>{html.escape(p.label(c))}</th>" for c in p.cols)
    body = []
    for r in p.rows:
        cells = []
        for c in p.cols:
            if (r, c) in p.values:
                text = html.escape(p.cell_text(r, c))
                cells.append(f"<td{_colour(p, p.values[(r, c)])}>{f'<b>{text}</b>' if (r, c) in bold else text}</td>")
            else:
                cells.append('<td class="missing">–</td>')
        body.append(f"<tr><th>{html.escape(p.label(r))}</th>{''.join(cells)}</tr>")
    return (
        f"<h3>{html.escape(p.metric)} <small>({html.escape(where)}{arrow}; rows: {html.escape(p.row_title)}, columns: {html.escape(p.col_title)})</small></h3>"
        f"<table><tr><th>{html.escape(p.row_title)} \\ {html.escape(p.col_title)}</th>{head}</tr>{''.join(body)}</table>"
        + "".join(f"<p class=\"note\"><b>Data:</b> {html.escape(n)}</p>" for n in p.notes)
    )


def ladder_html(ladder: Ladder) -> str:
    """Paired differences between adjacent cells (:mod:`vispriv.harness.report.paired`); gaps under 2 s.e. in red."""
    rows = []
    for i, st in enumerate(ladder.steps, 1):
        gap = "–" if st.diff is None else f"{st.diff:+.3f}" + ("" if st.diff_se is None else f" ± {st.diff_se:.3f}")
        weak = ' class="weak"' if st.ratio is not None and st.ratio < 2 else ""
        ratio = "–" if st.ratio is None else f"{st.ratio:.1f}"
        weak_robust = ' class="weak"' if st.ratio_overlap is not None and st.ratio_overlap < 2 else ""
        robust = "–" if st.ratio_overlap is None else f"{st.ratio_overlap:.1f}"
        n_eff = "–" if st.n_effective is None else f"{st.n_effective:.0f}"
        rows.append(
            f"<tr><td>{i}</td><th>{html.escape(st.label)}</th><td>{st.mean:.3f}</td><td>{st.n}</td><td>{html.escape(gap)}</td>"
            f"<td{weak}>{ratio}</td><td>{st.n_pairs if st.diff is not None else '–'}</td>"
            f"<td{weak_robust}>{robust}</td><td>{n_eff}</td></tr>"
        )
    subset = f"images matching {ladder.ids} only; " if ladder.ids else ""
    return (
        f"<h3>paired differences, {html.escape(ladder.metric)} <small>({html.escape(ladder.dataset)}; "
        f"{html.escape(sense(ladder))}; {html.escape(order_text(ladder))}; {html.escape(subset)}"
        "each gap to the next row over the images both scored, ± s.e.; overlapping grid crops: the gap over its "
        "overlap-robust s.e. and the effective n)</small></h3>"
        "<table><tr><th>rank</th><th>cell</th><th>mean</th><th>n</th><th>gap to next</th><th>gap / s.e.</th><th>n paired</th>"
        "<th>gap / s.e. (overlap-robust)</th><th>effective n</th></tr>"
        + "".join(rows) + "</table>"
    )


def strongest_html(t: StrongestTable) -> str:
    """The strongest-attack table (:mod:`vispriv.harness.report.strongest`) as HTML."""
    title, sense_of = strongest.heading(t)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in strongest.columns(t))
    body = "".join(
        f"<tr><th>{html.escape(row[0])}</th>" + "".join(f"<td>{html.escape(c)}</td>" for c in row[1:]) + "</tr>"
        for row in strongest.cells(t)
    )
    return f"<h3>{html.escape(title)} <small>({html.escape(sense_of)})</small></h3><table><tr>{head}</tr>{body}</table>"


def frontier_html(f: Frontier, src: str) -> str:
    """One frontier: its figure beside a table of its points (front points in bold)."""
    rows = "".join(
        f"<tr><th>{html.escape(p.label)}</th><td>{html.escape(_fmt(p.utility, 3))}</td><td>{html.escape(_fmt(p.privacy, 3))}</td>"
        f"<td>{html.escape(p.attack)}</td><td class=\"front\">{'yes' if p.on_front else ''}</td></tr>"
        for p in f.points
    )
    missing = f"<p class=\"note\">{html.escape(missing_text(f))}</p>" if f.missing else ""
    return (
        f"<h3>{html.escape(f.scenario)} <small>{html.escape(axes_text(f))}</small></h3>"
        f'<div class="pair"><div><table><tr><th>defense</th><th>{html.escape(f.utility)}</th>'
        f"<th>{html.escape(f.privacy)} (worst case)</th><th>strongest attack</th><th>Pareto front</th></tr>{rows}</table>"
        f'{missing}</div><img src="{html.escape(src)}" alt="privacy-utility frontier of {html.escape(f.scenario)}"></div>'
    )


def page(
    experiment: str,
    command: str,
    uri: str,
    rows: list[CellRow],
    sections: list[Section],
    curves: list[tuple[str, str]],
    failed: list[tuple[str, str]],
    frontiers: list[tuple[Frontier, str]] | None = None,
) -> str:
    """The whole report page."""
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cmd = f"<p>Generated by <code>{html.escape(command)}</code> at {when}</p>" if command else f"<p>{when}</p>"
    nav = "".join(f'<a href="#{_safe(s.scenario)}">{html.escape(s.scenario)}</a>' for s in sections)
    if curves:
        nav = '<a href="#curves">privacy-utility curves</a>' + nav
    if frontiers:
        nav = '<a href="#frontiers">privacy-utility frontiers</a>' + nav
    if failed:
        nav += '<a href="#failed">failed cells</a>'
    scenarios = len({r.scenario for r in rows})
    summary = (
        f'<p class="summary"><span><b>{len(rows)}</b> finished cells</span><span><b>{scenarios}</b> scenarios</span>'
        f"<span><b>{len(failed)}</b> failed cells</span><span>store: <code>{html.escape(uri)}</code></span></p>"
    )
    parts = [summary, LEGEND]
    if frontiers:
        parts.append('<section id="frontiers"><h2>Privacy-utility frontiers</h2>'
                     + "".join(frontier_html(f, src) for f, src in frontiers) + "</section>")
    if curves:
        figs = "".join(
            f'<figure><img src="{html.escape(src)}" alt="{html.escape(title)}"><figcaption>{html.escape(title)}</figcaption></figure>'
            for title, src in curves
        )
        parts.append(f'<section id="curves"><h2>Privacy-utility curves</h2><div class="grids">{figs}</div></section>')
    for s in sections:
        body = [f'<section id="{_safe(s.scenario)}"><h2>{html.escape(s.scenario)}</h2>']
        body.extend(strongest_html(t) for t in s.strongest)
        for p, png in s.tables:
            # Shown at its own size (it is sized by its column count), not shrunk to the pair's 520 px.
            px = int(heatmap_size(p)[0] * DPI)
            img = (f'<img src="{html.escape(png)}" alt="heatmap of {html.escape(p.metric)}" '
                   f'style="max-width:min(100%,{px}px)">' if png else "")
            body.append(f'<div class="pair"><div>{table_html(p)}</div>{img}</div>')
        body.extend(ladder_html(ladder) for ladder in s.ladders)
        body.extend(deletions_html(t) for t in s.deletions)
        if s.grids:
            figs = "".join(
                f'<figure><img src="{html.escape(g.src)}" alt="{html.escape(g.caption)}" loading="eager">'
                f"<figcaption>{html.escape(g.caption)}</figcaption></figure>"
                for g in s.grids
            )
            body.append(f'<h3>Reconstructions <small>(artifacts of the cell runs)</small></h3><div class="grids">{figs}</div>')
        body.append("</section>")
        parts.append("".join(body))
    if failed:
        items = "".join(f"<li><b>{html.escape(label)}</b>: {html.escape(err)}</li>" for label, err in failed)
        parts.append(f'<section id="failed"><h2>Failed cells</h2><ul class="failed">{items}</ul></section>')
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>vispriv: {html.escape(experiment)}</title>"
        f"<meta name='viewport' content='width=device-width, initial-scale=1'><style>{STYLE}</style></head><body>"
        f"<header><h1>vispriv report: {html.escape(experiment)}</h1>{cmd}</header><nav>{nav}</nav><main>"
        + "".join(parts)
        + "</main></body></html>"
    )
