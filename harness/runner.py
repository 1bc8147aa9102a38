"""The matrix driver: resume, executors, MLflow logging, interruption.

The driver opens one parent run per invocation, asks the executor to run the cells that
are not already FINISHED (with ``--resume``) and logs each outcome as a child run the
moment it arrives: a failing cell becomes a FAILED run with ``traceback.txt`` and the
matrix goes on; Ctrl-C marks the parent KILLED and keeps every finished child, so
``--resume`` later runs only what is missing.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from vispriv.harness.cache import check_writable
from vispriv.harness.claims import Claims, RunClaims, pid_alive
from vispriv.harness.config import MatrixConfig
from vispriv.harness.errors import TrackingError, VisprivError
from vispriv.harness.execute import CellOutcome, stderr_is_terminal
from vispriv.harness.executors import Executor, make_executor
from vispriv.harness.matrix import Cell, Matrix, check_plans_cells
from vispriv.harness.tracking import Tracker, sqlite_path

SCRATCH_PREFIX = "vispriv-artifacts-"
HOST_TAG = "vispriv.host"
PID_TAG = "vispriv.pid"


class MatrixInterrupted(VisprivError):
    """Ctrl-C during a matrix: what finished is logged; ``--resume`` runs the rest."""


@dataclass
class MatrixResult:
    parent_run_id: str
    experiment_id: str
    finished: list[tuple[Cell, CellOutcome]] = field(default_factory=list)
    failed: list[tuple[Cell, CellOutcome]] = field(default_factory=list)
    resumed: list[Cell] = field(default_factory=list)
    #: Runs of dead processes of this matrix ended KILLED before this run started.
    stale: int = 0
    #: Cells another live run of this store had claimed (concurrent ``--resume`` runs of one config).
    claimed_elsewhere: list[Cell] = field(default_factory=list)


def run_matrix(
    config: MatrixConfig,
    matrix: Matrix,
    tracker: Tracker,
    resume: bool = False,
    executor: str = "local",
    executor_options: dict[str, object] | None = None,
    quiet: bool = False,
    cache_dir: str | None = None,
) -> MatrixResult:
    """Run every cell of ``matrix`` and log it under one parent run.

    Everything that can be checked (cache folder, executor) is checked before the parent
    run exists; once it exists, every way out of this function ends it: FINISHED, FAILED
    (a cell failed, or the driver raised), or KILLED (Ctrl-C). A parent whose process died
    without ending it (SIGKILL, power loss) is ended KILLED by the next run of the same
    matrix on the same host, see :func:`end_stale_runs`.
    """
    check_plans_cells(matrix)
    cache = cache_dir if cache_dir is not None else config.cache_dir
    check_writable(cache)
    runner = make_executor(executor, **{"resources": config.resources, **(executor_options or {})})
    try:
        return _run_with_parent(config, matrix, tracker, resume, runner, quiet, cache)
    finally:
        runner.close()


def _run_with_parent(
    config: MatrixConfig, matrix: Matrix, tracker: Tracker, resume: bool, runner: Executor, quiet: bool,
    cache: str | None,
) -> MatrixResult:
    experiment_id = tracker.experiment_id(config.name)
    assert experiment_id is not None
    stale = end_stale_runs(tracker, experiment_id, config.name)
    remove_stale_scratch()
    done = tracker.finished_cell_hashes(experiment_id) if resume else set()
    todo = [c for c in matrix.cells if c.hash not in done]
    resumed = [c for c in matrix.cells if c.hash in done]
    parent = tracker.start_parent(
        experiment_id,
        name=f"matrix {config.name}",
        tags={"vispriv.config_name": config.name, "vispriv.resume": str(resume).lower(),
              HOST_TAG: platform.node(), PID_TAG: str(os.getpid())},
        params={"seed": config.seed, "n_cells": len(matrix.cells), "n_skipped_pairs": len(matrix.skipped)},
    )
    result = MatrixResult(parent, experiment_id, resumed=resumed, stale=stale)
    db = sqlite_path(tracker.uri)
    claims: Claims | RunClaims | None = None
    if resume:
        claims = (Claims(db.resolve().with_name(db.name + ".claims")) if db is not None
                  else RunClaims(tracker, experiment_id, parent))
    held: set[str] = set()

    def claimed(jobs: list[tuple[Cell, str]]) -> Iterator[tuple[Cell, str]]:
        """The jobs this process claims, claimed one by one as the executor asks for them."""
        for cell, folder in jobs:
            if claims is not None:
                ok, recheck = claims.claim(cell.hash)
                if not ok:
                    result.claimed_elsewhere.append(cell)
                    continue
                held.add(cell.hash)
                if recheck and tracker.cell_finished(experiment_id, cell.hash):
                    claims.done(cell.hash)
                    held.discard(cell.hash)
                    result.resumed.append(cell)
                    continue
            yield cell, folder

    scratch: Path | None = None
    bar = None
    try:
        tracker.log_text(parent, yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False), "config.yaml")
        tracker.log_text(parent, "\n".join(s.line() for s in matrix.skipped) + "\n", "skipped_pairs.txt")
        scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
        jobs = [(cell, str(scratch / f"{i:04d}-{cell.hash}")) for i, cell in enumerate(todo)]
        bar = _bar(len(jobs), quiet)
        several_datasets = len({c.dataset.label() for c in matrix.cells}) > 1
        for cell, outcome in runner.run(claimed(jobs), cache, quiet):  # type: ignore[arg-type]
            _log_cell(tracker, experiment_id, parent, cell, outcome)
            if outcome.status == "FINISHED" and claims is not None:
                claims.done(cell.hash)
                held.discard(cell.hash)
            (result.finished if outcome.status == "FINISHED" else result.failed).append((cell, outcome))
            if bar is not None:
                label = progress_label(cell, several_datasets)
                if not isinstance(bar, LineProgress):
                    label = label[:60]  # a bar redraws in one terminal line; a log line keeps the whole label
                bar.set_postfix_str(label if outcome.status == "FINISHED" else f"FAILED {label}")
                bar.update(1)
    except KeyboardInterrupt:
        tracker.end(parent, "KILLED")
        raise MatrixInterrupted(
            f"interrupted: {len(result.finished) + len(resumed)} of {len(matrix.cells)} cells finished and logged; "
            f"rerun with --resume to run only the rest"
        ) from None
    except BaseException as exc:
        with suppress(TrackingError):  # a store that refused the write that failed refuses these too
            tracker.set_tags(parent, {"vispriv.error": f"{type(exc).__name__}: {exc}"[:4000]})
            tracker.end(parent, "FAILED")
        raise
    finally:
        if claims is not None:
            with suppress(TrackingError):
                claims.release(held)
        if bar is not None:
            bar.close()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    tracker.set_tags(parent, {"vispriv.n_failed": str(len(result.failed)), "vispriv.n_resumed": str(len(result.resumed)),
                              "vispriv.n_claimed_elsewhere": str(len(result.claimed_elsewhere))})
    tracker.end(parent, "FINISHED" if not result.failed else "FAILED")
    return result


def end_stale_runs(tracker: Tracker, experiment_id: str, config_name: str) -> int:
    """End KILLED the RUNNING parents of this matrix whose process on this host is gone, and their RUNNING children.

    A parent run records its host and process id; one left RUNNING by a process that no
    longer exists (SIGKILL, a crash of the interpreter) can never end itself. Parents of
    other hosts are left alone (their process cannot be checked from here). Returns how
    many runs were ended.
    """
    host, n = platform.node(), 0
    for run in tracker.parent_runs(experiment_id, status="RUNNING"):
        tags = run.data.tags
        if tags.get("vispriv.config_name") != config_name or tags.get(HOST_TAG) != host:
            continue
        pid = tags.get(PID_TAG, "")
        if not pid.isdigit() or int(pid) == os.getpid() or pid_alive(int(pid)):
            continue
        for child in tracker.cell_runs(experiment_id, status="RUNNING", parent_id=run.info.run_id):
            tracker.end(child.info.run_id, "KILLED")
            n += 1
        tracker.set_tags(run.info.run_id, {"vispriv.error": f"process {pid} on {host} ended without ending this run"})
        tracker.end(run.info.run_id, "KILLED")
        n += 1
    return n


def remove_stale_scratch() -> None:
    """Remove the scratch folders of dead processes of this host (``vispriv-artifacts-PID-*``)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*"):
        pid = folder.name[len(SCRATCH_PREFIX):].split("-", 1)[0]
        if folder.is_dir() and pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _bar(total: int, quiet: bool):  # type: ignore[no-untyped-def]
    """The cells' progress: a tqdm bar on a terminal, one line per cell where stderr is a
    file or a pipe (CI, SLURM, ``nohup``: no bar redraws in the log), none with ``--quiet``."""
    if quiet or total == 0:
        return None
    if not stderr_is_terminal():
        return LineProgress(total)
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="cells", unit="cell", dynamic_ncols=True)


class LineProgress:
    """tqdm's ``set_postfix_str`` / ``update`` / ``close`` as one line per finished cell."""

    def __init__(self, total: int) -> None:
        self.total, self.n, self.postfix = total, 0, ""
        self.start = time.monotonic()

    def set_postfix_str(self, text: str) -> None:
        self.postfix = text

    def update(self, n: int = 1) -> None:
        self.n += n
        elapsed = time.monotonic() - self.start
        print(f"cells {self.n}/{self.total} ({elapsed:.0f} s): {self.postfix}", file=sys.stderr, flush=True)

    def close(self) -> None:
        return None


def progress_label(cell: Cell, several_datasets: bool) -> str:
    """What a progress line names of a finished cell: its defense and attack, after its dataset
    when the matrix has more than one (else two datasets' cells read the same)."""
    label = f"{cell.defense_label} | {cell.attack_label}"
    return f"{cell.dataset.label()} | {label}" if several_datasets else label


def cell_tags(cell: Cell) -> dict[str, str]:
    tags = {
        "vispriv.cell_hash": cell.hash,
        "vispriv.seed": str(cell.seed),
        "vispriv.scenario": cell.scenario,
        "vispriv.dataset": cell.dataset.label(),
        "vispriv.defense": cell.defense_label,
        "vispriv.attack": cell.attack_label,
        "vispriv.provenance": cell.dataset.instance().provenance(),  # type: ignore[attr-defined]
        # An attack that uses nothing the release carries: the floor of a report's colours.
        "vispriv.no_leak": "1" if len(cell.attack) == 1 and cell.attack[0].cls.no_leak else "0",  # type: ignore[attr-defined]
        "vispriv.versions": json.dumps(
            {s.cls.kind + ":" + s.name: s.cls.version for s in (cell.dataset, cell.defense, *cell.attack)}
        ),
    }
    return tags


def _log_cell(tracker: Tracker, experiment_id: str, parent: str, cell: Cell, outcome: CellOutcome) -> None:
    run_id = tracker.start_child(experiment_id, parent, cell.label[:250], cell_tags(cell), start_time=outcome.start_ms)
    tracker.log_params(run_id, cell.params())
    tracker.log_metrics(run_id, outcome.metrics)
    tracker.set_tags(
        run_id,
        {
            "vispriv.higher_is_better": json.dumps(outcome.higher_is_better, sort_keys=True),
            "vispriv.headline": json.dumps(outcome.headline),
            "vispriv.anchors": json.dumps(outcome.anchors, sort_keys=True),
            "vispriv.seconds": f"{outcome.seconds:.2f}",
            "vispriv.device": outcome.device,
            "vispriv.cpu": outcome.cpu,
        },
    )
    if outcome.artifact_dir:
        tracker.log_artifacts(run_id, Path(outcome.artifact_dir))
    if outcome.warning:
        tracker.set_tags(run_id, {"vispriv.warning": outcome.warning[:4000]})
    if outcome.status != "FINISHED":
        tracker.set_tags(run_id, {"vispriv.error": outcome.error[:4000]})
        tracker.log_text(run_id, outcome.traceback, "traceback.txt")
    tracker.end(run_id, outcome.status, end_time=outcome.end_ms)
