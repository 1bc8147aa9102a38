"""The ``vispriv`` command line.

Every user error is one line on stderr (``error: ...``) and exit status 2, and so is a write
the operating system refuses (``cannot write PATH: reason``: :mod:`vispriv.harness.writes`);
an interrupted matrix exits 130 after saying how to resume.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import warnings
from pathlib import Path

import click

from vispriv.harness.errors import VisprivError, did_you_mean, os_refusal

KINDS = ["dataset", "defense", "attack", "metric"]
#: Exit statuses (README "Exit codes"): 0 every cell finished, 1 some cell failed,
#: 2 usage or config error, 3 internal error (a bug: traceback printed), 130 interrupted.
EXIT_CELLS_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130


def _registry(strict: bool):  # type: ignore[no-untyped-def]
    from vispriv.harness.registry import load_registry

    registry = load_registry(strict=strict)
    for failure in registry.failures:
        click.echo(f"warning: {failure.line()}", err=True)
    return registry


class PluginCommands(click.Group):
    """The ``vispriv`` group: the core's commands, and the plugins' (``vispriv_register_commands``).

    Plugins are loaded only when a name the core lacks is asked for or the list is shown
    (``--help``), so ``vispriv matrix`` never pays for importing every plugin. A plugin that
    fails to load is one ``warning:`` line, as in ``vispriv plugins``.
    """

    _loaded = False

    def _load_plugins(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        registry = _registry(strict=False)
        loaded = len(registry.failures)
        registry.register_commands(self)
        for failure in registry.failures[loaded:]:
            click.echo(f"warning: {failure.line()}", err=True)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is None and not self._loaded:
            self._load_plugins()
            found = super().get_command(ctx, cmd_name)
        return found

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_plugins()
        return super().list_commands(ctx)


@click.group(cls=PluginCommands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="vispriv")
def cli() -> None:
    """vispriv: an adversarial evaluation harness for visual privacy."""
    warnings.showwarning = _one_line_warning


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:  # type: ignore[no-untyped-def]
    """A Python warning as one ``warning:`` line like the CLI's own (no source line).

    A plugin's ``UserWarning`` (a skipped unreadable photo) is its message alone; any other
    category says what and where, still on one line.
    """
    text = " ".join(str(message).split())
    if category is not UserWarning:
        text = f"{text} ({category.__name__}, {Path(filename).name}:{lineno})"
    click.echo(f"warning: {text}", err=True)


@cli.command()
@click.argument("name", required=False)
@click.option("--kind", type=click.Choice(KINDS), help="Only plugins of this kind.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output, config schemas included.")
@click.option("--strict", is_flag=True, help="A plugin that fails to load is fatal.")
def plugins(name: str | None, kind: str | None, as_json: bool, strict: bool) -> None:
    """List registered plugins, or show plugin NAME with its config parameters."""
    from vispriv.harness.plugin import plugin_info
    from vispriv.harness.schema import config_schema, plain_text

    registry = _registry(strict)
    classes = registry.all(kind)
    if name is not None:
        classes = [c for c in classes if c.name == name]
        if not classes:
            names = sorted({c.name for c in registry.all(kind)})
            raise VisprivError(f"unknown plugin {name!r}{did_you_mean(name, names)}; registered: {', '.join(names) or 'none'}")
    rows = []
    for cls in classes:
        info = plugin_info(cls)
        info["source"] = registry.source_of(cls)
        info["config"] = config_schema(cls.Config)
        info["settings_by_input"] = settings_by_input(cls)
        rows.append(info)
    if as_json:
        payload = {"plugins": rows, "failures": [f.line() for f in registry.failures]}
        click.echo(json.dumps(payload, indent=2))
    elif name is not None:
        click.echo("\n\n".join(_plugin_page(r) for r in rows))
    else:
        # FROM: the distribution that registered the plugin (`vispriv` for the built-ins).
        click.echo(_text_table(["KIND", "NAME", "SCENARIO", "VERSION", "FROM", "DESCRIPTION"],
                               [[r["kind"], r["name"], r["scenario"], r["version"], _distribution(r["source"]),
                                 plain_text(r["description"])] for r in rows],
                               total_width=120))
        click.echo("\n`vispriv plugins NAME` shows a plugin's parameters.")


def _plugin_page(info: dict) -> str:  # type: ignore[type-arg]
    """The detail view of one plugin: what it is, what flows through it, its parameters."""
    from vispriv.harness.schema import plain_text

    flow = f"{', '.join(info['consumes']) or '-'} -> {', '.join(info['produces']) or '-'}"
    head = [f"{info['kind']} {info['name']} {info['version']} (scenario {info['scenario']}; from {info['source']})",
            plain_text(info["description"]), f"payloads: {flow}", ""]
    params = _schema_rows(info["config"])
    if not params:
        return "\n".join([*head, "parameters: none"])
    table = _text_table(["PARAMETER", "TYPE", "DEFAULT", "BOUNDS", "DESCRIPTION"], params)
    if any(f["utility_only"] for f in info["config"]):
        table += f"\n\n{UTILITY_ONLY_MARK} read only by the utility evaluation or the report: never enters a seed"
    by_input = info.get("settings_by_input") or {}
    if by_input:
        table += "\n\nsettings by input (a matrix cell refuses the others):\n" + "\n".join(
            f"  {payload}: {', '.join(names) or 'none'}" for payload, names in by_input.items()
        )
    return "\n".join([*head, table])


def settings_by_input(cls: type) -> dict[str, list[str]]:
    """The settings a defense takes on each input it declares a config for (``Defense.configs``), in ``Config``'s order; ``{}`` for other plugins."""
    order = list(cls.Config.model_fields)
    return {payload.__name__: [n for n in order if n in config.model_fields]
            for payload, config in getattr(cls, "configs", {}).items()}


#: Leads the description of a utility-only parameter in ``vispriv plugins NAME``.
UTILITY_ONLY_MARK = "[utility only]"


def _schema_rows(schema: list, prefix: str = "") -> list[list[str]]:  # type: ignore[type-arg]
    """The rows of the parameter table: nested configs' fields as dotted names, descriptions as plain text."""
    from vispriv.harness.schema import plain_text

    rows = []
    for f in schema:
        default = "required" if f["required"] else json.dumps(f["default"])
        text = plain_text(f["description"])
        description = f"{UTILITY_ONLY_MARK} {text}".rstrip() if f["utility_only"] else text
        if "fields" in f:
            rows.append([prefix + f["name"], f["type"], "(below)", f["bounds"], description])
            rows.extend(_schema_rows(f["fields"], prefix + f["name"] + "."))
        else:
            rows.append([prefix + f["name"], f["type"], default, f["bounds"], description])
    return rows


def _distribution(source: str) -> str:
    """``vispriv`` of a registry source ``image-release (vispriv)`` (the entry point's distribution)."""
    return source[source.rfind("(") + 1 : -1] if source.endswith(")") and "(" in source else source


def _text_table(header: list[str], rows: list[list[str]], last_width: int | None = None,
                total_width: int | None = None) -> str:
    """A plain aligned table; the last column is not padded, and cut at ``last_width`` with '…'
    (or where a row would pass ``total_width`` characters, but never below 30)."""
    cells = [[str(c) for c in row] for row in rows]
    if total_width is not None:
        lead = sum(max([len(h)] + [len(r[i]) for r in cells]) + 2 for i, h in enumerate(header[:-1]))
        last_width = max(30, total_width - lead)
    if last_width is not None:
        for row in cells:
            if len(row[-1]) > last_width:
                row[-1] = row[-1][: last_width - 1] + "…"
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(header)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row[:-1], widths)) + "  " + row[-1] for row in [header, *cells]]
    return "\n".join(line.rstrip() for line in lines)


@cli.command()
@click.argument("config", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--dry-run", is_flag=True, help="Print the cells and skip reasons; run nothing.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a config value.")
@click.option("--resume", is_flag=True, help="Skip cells already FINISHED in MLflow with the same cell hash.")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Where cells run: this process, or Ray tasks.")
@click.option("--ray-address", default=None, help="Join an existing Ray cluster (with --executor ray).")
@click.option("--tracking-uri", default=None, help="MLflow tracking URI [default: sqlite:///mlflow.db].")
@click.option("--cache-dir", default=None, help="Cache of expensive stages [default: the config's cache_dir].")
@click.option("--quiet", is_flag=True,
              help="No progress output (default: bars on a terminal, one line per cell when stderr is a file or pipe).")
@click.option("--strict", is_flag=True, help="A plugin that fails to load is fatal.")
def matrix(
    config: Path,
    dry_run: bool,
    overrides: tuple[str, ...],
    resume: bool,
    executor: str,
    ray_address: str | None,
    tracking_uri: str | None,
    cache_dir: str | None,
    quiet: bool,
    strict: bool,
) -> None:
    """Run the attack x defense matrix described by CONFIG (YAML)."""
    from vispriv.harness.config import load_config

    cfg = load_config(config, list(overrides))
    result = _run(cfg, dry_run, resume, executor, ray_address, tracking_uri, cache_dir, quiet, strict)
    if result is not None and result.failed:
        sys.exit(EXIT_CELLS_FAILED)


def _run(cfg, dry_run, resume, executor, ray_address, tracking_uri, cache_dir, quiet, strict):  # type: ignore[no-untyped-def]
    from vispriv.harness.errors import ConfigError
    from vispriv.harness.matrix import build_matrix, check_plans_cells
    from vispriv.harness.paths import check_folder
    from vispriv.harness.runner import run_matrix
    from vispriv.harness.tracking import Tracker, check_store, default_tracking_uri

    # A wrong cache dir or store is one line in seconds: checked before any plugin is imported or store created.
    if not dry_run:
        cache = cache_dir if cache_dir is not None else cfg.cache_dir
        if cache is not None:
            check_folder(cache, "cache dir", "pass --cache-dir with a folder you can write to", ConfigError)
        tracking_uri = check_store(tracking_uri or default_tracking_uri())
    registry = _registry(strict)
    mx = build_matrix(cfg, registry)
    check_plans_cells(mx)  # no cell: one error line naming every skip, before a run exists
    if dry_run:
        click.echo(f"{len(mx.cells)} cells in experiment {cfg.name!r} (seed {cfg.seed}):")
        for cell in mx.cells:
            metrics = ",".join(m.label() for m in cell.metrics) or "-"
            click.echo(f"  run   {cell.hash}  {cell.label}  [metrics: {metrics}]")
        for skip in mx.skipped:
            click.echo(f"  skip  {skip.line()}")
        return None
    tracker = Tracker(tracking_uri)
    options = {"address": ray_address} if executor == "ray" else {}
    result = run_matrix(cfg, mx, tracker, resume=resume, executor=executor, executor_options=options,
                        quiet=quiet, cache_dir=cache_dir)
    click.echo(
        f"{len(result.finished)} cells finished, {len(result.failed)} failed, {len(result.resumed)} already done "
        f"(--resume), {len(mx.skipped)} pairs skipped; parent run {result.parent_run_id}"
    )
    if result.claimed_elsewhere:
        click.echo(f"{len(result.claimed_elsewhere)} cells were claimed by another run of this store (--resume)")
    if result.stale:
        click.echo(f"warning: marked {result.stale} stale run(s) KILLED: their process on this host is gone", err=True)
    for cell, outcome in result.finished:
        if outcome.warning:
            click.echo(f"warning: {cell.label}: {outcome.warning}", err=True)
    for cell, outcome in result.failed:
        click.echo(f"  FAILED {cell.label}: {outcome.error.splitlines()[0] if outcome.error else ''}", err=True)
    if _is_server(tracker.uri):
        click.echo(f"browse: {tracker.uri.rstrip('/')}/#/experiments/{result.experiment_id}/runs/{result.parent_run_id}")
    else:
        click.echo(f"browse: {_ui_command(tracker.uri)}")
    return result


@cli.command()
@click.option("--experiment", default="vispriv", show_default=True, help="MLflow experiment (the config's name).")
@click.option("--metric", "metrics", multiple=True, help="Metric to pivot (repeatable); default: all.")
@click.option("--format", "formats", multiple=True, type=click.Choice(["md", "csv", "html"]), help="Repeatable.")
@click.option("--out", "out_dir", default="reports", show_default=True, type=click.Path(path_type=Path))
@click.option("--curve", "curves", multiple=True, metavar="X:Y[:GROUP,...]",
              help="Plot metric Y against param X, one line per attack and GROUP params.")
@click.option("--table", "tables", multiple=True, metavar="ROW,...:COL",
              help="Instead of attack x defense pivots: rows = ROW params, columns = COL param (sweeps); "
                   "attack, defense or dataset alone is the cells' label, e.g. dataset.update:attack.")
@click.option("--frontier", "frontiers", multiple=True, metavar="UTILITY:PRIVACY",
              help="Privacy-utility frontier per scenario: each defense config at (its UTILITY metric, "
                   "the strongest attack's PRIVACY metric), with the Pareto front (repeatable).")
@click.option("--strongest", "strongest", multiple=True, metavar="PRIVACY[:UTILITY]",
              help="Per scenario, each defense config's strongest attack on PRIVACY (adaptive or not), the "
                   "runner-up, and the defense's UTILITY beside it (repeatable).")
@click.option("--paired", "paired", multiple=True, metavar="METRIC",
              help="Rank the cells scored on the same images by METRIC with paired differences between "
                   "neighbours (from the cells' per-image CSVs; repeatable).")
@click.option("--paired-ids", default=None, metavar="REGEX",
              help="With --paired: only images whose id matches REGEX (e.g. disjoint crops: '@[02],[02]$').")
@click.option("--paired-cells", default=None, metavar="REGEX",
              help="With --paired: only cells whose label (attack vs defense) matches REGEX, e.g. 'epsilon=(10|16)'.")
@click.option("--budget-deletions", "budget_deletions", multiple=True, metavar="ROW,...:BUDGET",
              help="Per ROW params and pair of BUDGET values: the fraction of the photos deleted at the lower "
                   "budget but kept at the higher, album by album (from the cells' kept masks; album pruning's "
                   "Table 4), e.g. dataset.collection,defense.mode:defense.budget.")
@click.option("--budget-pairs", default=None, metavar="LOW:HIGH,...",
              help="With --budget-deletions: the budget pairs to compare, e.g. 0.125:0.25,0.25:0.5 "
                   "[default: each budget with the next].")
@click.option("--parent", default=None, help="Only cells of this parent run.")
@click.option("--tracking-uri", default=None)
@click.option("--no-log", is_flag=True, help="Do not log the report on the parent run.")
def report(experiment, metrics, formats, out_dir, curves, tables, frontiers, strongest, paired, paired_ids,  # type: ignore[no-untyped-def]
           paired_cells, budget_deletions, budget_pairs, parent, tracking_uri, no_log):
    """Pivot attack x defense tables (with heatmaps) from MLflow."""
    from vispriv.harness.paths import check_folder
    from vispriv.harness.report import deletions as report_deletions
    from vispriv.harness.report import strongest as report_strongest
    from vispriv.harness.report import write_report
    from vispriv.harness.report.frontier import parse_spec
    from vispriv.harness.tracking import Tracker

    check_folder(out_dir, "report folder", "choose another --out")
    parsed = []
    for spec in curves:
        parts = spec.split(":")
        if len(parts) not in (2, 3):
            raise VisprivError(f"--curve {spec!r}: expected X:Y or X:Y:GROUP1,GROUP2")
        parsed.append((parts[0], parts[1], parts[2].split(",") if len(parts) == 3 and parts[2] else []))
    table_specs = []
    for spec in tables:
        row_part, sep, col = spec.partition(":")
        if not sep or not col or ":" in col:
            raise VisprivError(f"--table {spec!r}: expected ROW1,ROW2:COL, e.g. defense.dictionary_size,defense.m:defense.epsilon")
        table_specs.append(([r for r in row_part.split(",") if r], col))
    frontier_specs = [parse_spec(spec) for spec in frontiers]
    strongest_specs = [report_strongest.parse_spec(spec) for spec in strongest]
    deletion_specs = [report_deletions.parse_spec(spec) for spec in budget_deletions]
    pairs = report_deletions.parse_pairs(budget_pairs)
    if pairs and not deletion_specs:
        raise VisprivError("--budget-pairs needs --budget-deletions ROW,...:BUDGET")
    command = "vispriv report " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    files = write_report(
        Tracker(tracking_uri, create=False), experiment, out_dir, list(metrics) or None, list(formats) or ["md"], parsed,
        parent_id=parent, command=command.strip(), log_to_parent=not no_log, tables=table_specs,
        frontiers=frontier_specs, paired=list(paired), paired_ids=paired_ids, paired_cells=paired_cells,
        budget_deletions=deletion_specs, budget_pairs=pairs, strongest=strongest_specs,
    )
    if "md" in (formats or ["md"]):
        click.echo(files.markdown)
    for f in files.files:
        click.echo(f"wrote {f}")


def _is_server(uri: str) -> bool:
    """Whether ``uri`` is a tracking server, which serves its own UI."""
    return uri.startswith(("http://", "https://"))


def _ui_command(uri: str, port: int = 5000) -> str:
    """The command that browses ``uri``: ``mlflow ui`` where it is on PATH, else through this Python."""
    mlflow = "mlflow" if shutil.which("mlflow") else f"{shlex.quote(sys.executable)} -m mlflow"
    return f"{mlflow} ui --backend-store-uri {uri} --port {port}"


@cli.command()
@click.option("--tracking-uri", default=None)
@click.option("--start", is_flag=True, help="Start the UI instead of printing the command.")
@click.option("--port", default=5000, show_default=True, type=click.IntRange(1, 65535))
def ui(tracking_uri: str | None, start: bool, port: int) -> None:
    """Print (or start) the MLflow UI command for the store."""
    from vispriv.harness.tracking import default_tracking_uri, sqlite_path

    uri = tracking_uri or default_tracking_uri()
    if _is_server(uri):  # `mlflow ui` cannot take a server as its store: the server is the UI
        if start:
            raise VisprivError(f"{uri} is a tracking server, which serves its own UI: open {uri} in a browser")
        click.echo(uri)
        return
    db = sqlite_path(uri)
    if db is not None and not db.exists():  # mlflow ui would open (and create) an empty store
        click.echo(f"warning: no store at {db.resolve()} yet (the UI would show an empty one): run "
                   "`vispriv matrix CONFIG` (or `vispriv demo`) here first, or pass --tracking-uri", err=True)
    if not start:
        click.echo(_ui_command(uri, port))
        return
    # Started through this interpreter: works without an activated virtual environment.
    args = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--port", str(port)]
    try:
        os.execv(sys.executable, args)
    except OSError as exc:
        raise VisprivError(f"cannot start the MLflow UI ({exc}); run: {_ui_command(uri, port)}") from None


@cli.command()
@click.argument("names", nargs=-1)
@click.option("--out", "out_dir", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="Write the configs (all, or NAMES) into this folder instead of listing or printing them.")
@click.option("--force", is_flag=True, help="With --out: replace files that exist.")
def examples(names: tuple[str, ...], out_dir: Path | None, force: bool) -> None:
    """List the example configs, print NAMES, or write them with --out DIR."""
    from vispriv.harness.examples import example_configs, find_example, summary, write_examples
    from vispriv.harness.paths import check_folder

    if out_dir is not None:
        check_folder(out_dir, "examples folder", "choose another --out")
        for path in write_examples(list(names), out_dir, overwrite=force):
            click.echo(f"wrote {path}")
        return
    if names:
        click.echo("\n".join(find_example(n).read_text() for n in names), nl=False)
        return
    configs = example_configs()
    click.echo(_text_table(["EXAMPLE", "WHAT IT RUNS"], [[n, summary(c)] for n, c in configs.items()]))
    click.echo("\n`vispriv examples NAME` prints one; `vispriv examples --out examples` writes them all.")


@cli.command()
@click.argument("name", required=False)
def docs(name: str | None) -> None:
    """List the guides shipped with vispriv, or print guide NAME (e.g. writing-a-plugin)."""
    from importlib.resources import files

    guides = {p.name.removesuffix(".md"): p for p in files("vispriv.docs").iterdir() if p.name.endswith(".md")}
    if name is None:
        click.echo("\n".join(sorted(guides)))
        click.echo("\n`vispriv docs NAME` prints one (Markdown).")
        return
    key = name.removesuffix(".md").replace("_", "-")
    found = guides.get(name.removesuffix(".md")) or guides.get(key)
    if found is None:
        raise VisprivError(f"unknown guide {name!r}; shipped: {', '.join(sorted(guides))}")
    click.echo(found.read_text(encoding="utf-8"), nl=False)


@cli.command()
@click.option("--tracking-uri", default=None)
@click.option("--cache-dir", default=None)
@click.option("--quiet", is_flag=True)
@click.option("--out", "out_dir", default="reports/demo", show_default=True, type=click.Path(path_type=Path))
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE")
def demo(tracking_uri, cache_dir, quiet, out_dir, overrides):  # type: ignore[no-untyped-def]
    """Run the default matrix on bundled data and print the result tables."""
    from vispriv.harness.config import apply_overrides, read_yaml, validate_config
    from vispriv.harness.paths import check_folder
    from vispriv.harness.report import collect, write_report
    from vispriv.harness.tracking import Tracker

    check_folder(out_dir, "report folder", "choose another --out")
    path = Path(__file__).parent / "configs" / "demo.yaml"
    cfg = validate_config(apply_overrides(read_yaml(path), list(overrides)), source=str(path))
    report_spec = read_yaml(path.with_name("demo-report.yaml"))
    result = _run(cfg, False, True, "local", None, tracking_uri, cache_dir, quiet, False)
    # Only this matrix's cells: runs of older versions of a plugin stay in MLflow, not in the report.
    hashes = {c.hash for c, _ in result.finished + result.failed} | {c.hash for c in result.resumed}
    tracker = Tracker(tracking_uri)
    rows = collect(tracker, cfg.name, cell_hashes=hashes)
    present = {m for r in rows for m in r.metrics}
    metrics = [m for m in report_spec.get("metrics", []) if m in present] or None
    curves = _available_curves(rows, report_spec.get("curves", []))
    frontiers = [(f["utility"], f["privacy"]) for f in report_spec.get("frontiers", [])
                 if {f["utility"], f["privacy"]} <= present]
    strongest = [(v["privacy"], v["utility"]) for v in report_spec.get("strongest", [])
                 if {v["privacy"], v["utility"]} <= present]
    files = write_report(tracker, cfg.name, out_dir, metrics, ["md", "html"], curves, command="vispriv demo",
                         cell_hashes=hashes, frontiers=frontiers, strongest=strongest)
    click.echo(files.markdown)
    click.echo(f"HTML report: {(out_dir / 'report.html').resolve()}")


def _available_curves(rows, specs):  # type: ignore[no-untyped-def]
    """The ``{x, y, group}`` curve specs that some finished run has data for."""
    out = []
    for spec in specs:
        x, y, group = spec["x"], spec["y"], list(spec.get("group", []))
        if any(x in r.params and any(m == y or m.split("/")[-1] == y for m in r.metrics) for r in rows):
            out.append((x, y, group))
    return out


@cli.command("new-plugin")
@click.argument("name")
@click.option("--kind", type=click.Choice(["defense", "attack", "metric", "dataset"]), required=True)
@click.option("--dir", "directory", default=".", type=click.Path(file_okay=False, path_type=Path))
def new_plugin(name: str, kind: str, directory: Path) -> None:
    """Scaffold a separate, installable plugin package NAME."""
    from vispriv.harness.scaffold import scaffold

    root = scaffold(name, kind, directory)
    click.echo(f"created {root}; install it with: pip install -e {shlex.quote(str(root))}")
    click.echo("the guide from scaffold to matrix: vispriv docs writing-a-plugin")


def main(prog_name: str | None = None) -> None:
    """Run the command line; ``prog_name`` names it in usage lines (``python -m vispriv``)."""
    try:
        cli.main(prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except VisprivError as exc:
        from vispriv.harness.runner import MatrixInterrupted

        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_INTERRUPTED if isinstance(exc, MatrixInterrupted) else EXIT_USAGE)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except OSError as exc:  # a refusal no writer named (harness.writes names the file it writes)
        click.echo(f"error: {os_refusal(exc)}", err=True)
        sys.exit(EXIT_USAGE)
    except Exception:  # noqa: BLE001 -- a bug: show it, and keep exit 1 for "a cell failed"
        import traceback

        traceback.print_exc()
        click.echo("error: internal error (the traceback above); please report it", err=True)
        sys.exit(EXIT_INTERNAL)


if __name__ == "__main__":
    main()
