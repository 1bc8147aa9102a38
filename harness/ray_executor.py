"""Run matrix cells as Ray tasks (``vispriv matrix --executor ray``).

Each cell is one ``ray.remote`` task running :func:`vispriv.harness.execute.run_cell`; outcomes
come back to the driver in completion order (``ray.wait``) and the driver alone logs
them to MLflow, so the sqlite store never sees concurrent writers (docs/scaling.md).

* ``address=None`` starts a local Ray instance that stops with the command; an address
  (``ray://...`` or ``HOST:PORT`` of ``ray start --head``) joins an existing cluster. A
  Ray already initialised in this process is used as it is and left running.
* Resources per cell: the most that the config's ``resources`` (default: one CPU, no
  GPU) or any of the cell's plugins (their ``resources`` ClassVar) asks for.
* The cache directory is passed to the workers as an absolute path: on a cluster it
  must be a shared filesystem (NFS, a mounted bucket) for cached stages to be reused.
* Artifacts a cell writes are sent back with its outcome (files as bytes) and written
  into the driver's artifact folder, so workers need no shared artifact store.
* A worker that dies (``os._exit``, a segfault, the OOM killer) makes its cell a FAILED
  outcome carrying the Ray error; the other cells go on.
* The workers get the driver's ``PYTHONPATH`` (with the driver's extra ``sys.path``
  entries) and ``VISPRIV_PLUGINS``, so plugins found through entry points on the
  driver load in the workers too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import sysconfig
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import ray

from vispriv.harness.execute import CellOutcome, run_cell
from vispriv.harness.executors import EXECUTORS, Job
from vispriv.harness.matrix import Cell

DEFAULT_RESOURCES: dict[str, float] = {"cpus": 1.0, "gpus": 0.0}
#: The ``vispriv.cpu`` tag of a cell whose Ray task died before it reported (the worker's CPU is not known here).
UNKNOWN_WORKER_CPU = "unknown: the Ray worker failed before reporting its CPU"


def cell_resources(cell: Cell, default: dict[str, float] | None = None) -> dict[str, float]:
    """CPUs and GPUs one task of ``cell`` asks Ray for: the most that ``default`` or any plugin asks."""
    out = {**DEFAULT_RESOURCES, **(default or {})}
    declared = [s.cls.resources for s in (cell.dataset, cell.defense, *cell.attack)]
    declared += [m.cls.resources for m in cell.metrics]
    for key in ("cpus", "gpus"):
        out[key] = max([float(out[key])] + [float(r[key]) for r in declared if key in r])
    return out


def worker_env() -> dict[str, str]:
    """Environment variables the workers need to import the driver's plugins."""
    paths: list[str] = []
    for entry in [*os.environ.get("PYTHONPATH", "").split(os.pathsep), os.getcwd(), *_extra_sys_path()]:
        if entry and entry not in paths:
            paths.append(entry)
    env = {"PYTHONPATH": os.pathsep.join(paths)}
    if os.environ.get("VISPRIV_PLUGINS"):
        env["VISPRIV_PLUGINS"] = os.environ["VISPRIV_PLUGINS"]
    return env


def _extra_sys_path() -> list[str]:
    """``sys.path`` entries added by the user (not the interpreter's own or site-packages)."""
    system = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    out = []
    for entry in sys.path:
        if not entry or not os.path.isdir(entry):
            continue
        if any(entry.startswith(s) for s in system) or entry.endswith((".zip", "site-packages", "dist-packages")):
            continue
        out.append(os.path.abspath(entry))
    return out


def _run_remote(cell: Cell, cache_dir: str | None, quiet: bool) -> tuple[CellOutcome, dict[str, bytes]]:
    """The task body: run the cell in a scratch folder and send its artifacts back as bytes."""
    scratch = Path(tempfile.mkdtemp(prefix="vispriv-ray-"))
    try:
        outcome = run_cell(cell, cache_dir, str(scratch), quiet=quiet)
        files = {str(p.relative_to(scratch)): p.read_bytes() for p in sorted(scratch.rglob("*")) if p.is_file()}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return outcome, files


class RayExecutor:
    """Runs each cell as a Ray task; yields outcomes as they complete."""

    def __init__(
        self,
        address: str | None = None,
        num_cpus: int | None = None,
        resources: dict[str, float] | None = None,
        **_: object,
    ) -> None:
        self.address = address
        self.num_cpus = num_cpus
        self.default_resources = dict(resources or {})
        self._started = False
        self._pending: dict[Any, Cell] = {}

    def _connect(self) -> None:
        if ray.is_initialized():
            return
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        runtime_env = {"env_vars": worker_env()}
        common: dict[str, Any] = {"runtime_env": runtime_env, "log_to_driver": False, "logging_level": "WARNING"}
        if self.address:
            ray.init(address=self.address, **common)
        else:
            ray.init(address="local", num_cpus=self.num_cpus or os.cpu_count() or 1, include_dashboard=False, **common)
        self._started = True

    def run(self, jobs: Iterable[Job], cache_dir: str | None, quiet: bool) -> Iterator[tuple[Cell, CellOutcome]]:
        jobs = list(jobs)  # every cell is submitted at once (so, with --resume, claimed at once)
        if not jobs:
            return
        self._connect()
        cache = str(Path(cache_dir).resolve()) if cache_dir else None
        task = ray.remote(_run_remote)
        folders: dict[Any, str] = {}
        for cell, artifact_dir in jobs:
            need = cell_resources(cell, self.default_resources)
            ref = task.options(num_cpus=need["cpus"], num_gpus=need["gpus"], max_retries=0).remote(cell, cache, quiet)
            self._pending[ref] = cell
            folders[ref] = artifact_dir
        while self._pending:
            done, _ = ray.wait(list(self._pending), num_returns=1)
            for ref in done:
                cell = self._pending.pop(ref)
                yield cell, self._collect(ref, folders.pop(ref), cell)

    @staticmethod
    def _collect(ref: Any, artifact_dir: str, cell: Cell) -> CellOutcome:
        try:
            outcome, files = ray.get(ref)
        except ray.exceptions.RayError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            return CellOutcome(
                status="FAILED",
                error=f"{type(exc).__name__}: {first}"[:2000],
                traceback=str(exc),
                device=cell.device,
                cpu=UNKNOWN_WORKER_CPU,
            )
        folder = Path(artifact_dir)
        folder.mkdir(parents=True, exist_ok=True)
        for rel, data in files.items():
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        outcome.artifact_dir = str(folder)
        return outcome

    def close(self) -> None:
        """Cancel what is still pending (Ctrl-C) and stop the Ray instance this executor started."""
        for ref in list(self._pending):
            with contextlib.suppress(Exception):  # best effort while shutting down
                ray.cancel(ref, force=True)
        self._pending.clear()
        if self._started:
            ray.shutdown()
            self._started = False


EXECUTORS["ray"] = RayExecutor
