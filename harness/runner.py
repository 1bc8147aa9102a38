"""The matrix driver: resume, executors, MLflow logging, interruption.

The driver opens one parent run per invocation, asks the executor to run the cells that
are not already FINISHED (with ``--resume``) and logs each outcome as a child run the
moment it arrives: a failing cell becomes a FAILED run with ``traceback.txt`` and the
matrix goes on; Ctrl-C marks the parent KILLED and keeps every finished child, so
``--resume`` later runs only what is missing.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from vispriv.harness.config import MatrixConfig
from vispriv.harness.errors import VisprivError
from vispriv.harness.execute import CellOutcome
from vispriv.harness.executors import make_executor
from vispriv.harness.matrix import Cell, Matrix
from vispriv.harness.tracking import Tracker


class MatrixInterrupted(VisprivError):
    """Ctrl-C during a matrix: what finished is logged; ``--resume`` runs the rest."""


@dataclass
class MatrixResult:
    parent_run_id: str
    experiment_id: str
    finished: list[tuple[Cell, CellOutcome]] = field(default_factory=list)
    failed: list[tuple[Cell, CellOutcome]] = field(default_factory=list)
    resumed: list[Cell] = field(default_factory=list)


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
    """Run every cell of ``matrix`` and log it under one parent run."""
    experiment_id = tracker.experiment_id(config.name)
    assert experiment_id is not None
    done = tracker.finished_cell_hashes(experiment_id) if resume else set()
    todo = [c for c in matrix.cells if c.hash not in done]
    resumed = [c for c in matrix.cells if c.hash in done]
    parent = tracker.start_parent(
        experiment_id,
        name=f"matrix {config.name}",
        tags={"vispriv.config_name": config.name, "vispriv.resume": str(resume).lower()},
        params={"seed": config.seed, "n_cells": len(matrix.cells), "n_skipped_pairs": len(matrix.skipped)},
    )
    tracker.log_text(parent, yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False), "config.yaml")
    tracker.log_text(parent, "\n".join(s.line() for s in matrix.skipped) + "\n", "skipped_pairs.txt")
    result = MatrixResult(parent, experiment_id, resumed=resumed)
    cache = cache_dir if cache_dir is not None else config.cache_dir
    scratch = Path(tempfile.mkdtemp(prefix="vispriv-artifacts-"))
    runner = make_executor(executor, **{"resources": config.resources, **(executor_options or {})})
    jobs = [(cell, str(scratch / f"{i:04d}-{cell.hash}")) for i, cell in enumerate(todo)]
    bar = _bar(len(jobs), quiet)
    try:
        for cell, outcome in runner.run(jobs, cache, quiet):
            _log_cell(tracker, experiment_id, parent, cell, outcome)
            (result.finished if outcome.status == "FINISHED" else result.failed).append((cell, outcome))
            if bar is not None:
                bar.set_postfix_str(cell.label[:60])
                bar.update(1)
    except KeyboardInterrupt:
        tracker.end(parent, "KILLED")
        raise MatrixInterrupted(
            f"interrupted: {len(result.finished) + len(resumed)} of {len(matrix.cells)} cells finished and logged; "
            f"rerun with --resume to run only the rest"
        ) from None
    finally:
        if bar is not None:
            bar.close()
        runner.close()
        shutil.rmtree(scratch, ignore_errors=True)
    tracker.set_tags(parent, {"vispriv.n_failed": str(len(result.failed)), "vispriv.n_resumed": str(len(resumed))})
    tracker.end(parent, "FINISHED" if not result.failed else "FAILED")
    return result


def _bar(total: int, quiet: bool):  # type: ignore[no-untyped-def]
    if quiet or total == 0:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="cells", unit="cell", dynamic_ncols=True)


def cell_tags(cell: Cell) -> dict[str, str]:
    tags = {
        "vispriv.cell_hash": cell.hash,
        "vispriv.seed": str(cell.seed),
        "vispriv.scenario": cell.scenario,
        "vispriv.dataset": cell.dataset.label(),
        "vispriv.defense": cell.defense_label,
        "vispriv.attack": cell.attack_label,
        "vispriv.device": "cpu",
        "vispriv.provenance": cell.dataset.instance().provenance(),  # type: ignore[attr-defined]
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
            "vispriv.seconds": f"{outcome.seconds:.2f}",
        },
    )
    if outcome.artifact_dir:
        tracker.log_artifacts(run_id, Path(outcome.artifact_dir))
    if outcome.status != "FINISHED":
        tracker.set_tags(run_id, {"vispriv.error": outcome.error[:4000]})
        tracker.log_text(run_id, outcome.traceback, "traceback.txt")
    tracker.end(run_id, outcome.status, end_time=outcome.end_ms)
