"""Faults injected into real ``vispriv matrix`` processes: damaged cache, SIGKILL mid-write, refused writes.

Each run is a subprocess through ``driver.py``, which wraps one real writer to fail at a
fixed point (the N-th cache entry, the N-th cell's artifacts, after the N-th cell); the
tiny two-cell configs of ``fault_helpers`` keep each run to seconds.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import sqlite3
from pathlib import Path

import pytest
from fault_helpers import (
    DESCRIPTOR,
    IMAGES,
    artifact_root,
    cell_runs,
    copy_store,
    finished_metrics,
    statuses,
    stderr_lines,
    vispriv,
    write_config,
)

from vispriv.harness.cache_io import sum_path


def _entries(folder: Path, suffix: str = ".npz") -> list[Path]:
    """The payloads in ``folder`` (not the ``.tmp-*`` files of interrupted writes)."""
    return [p for p in folder.glob(f"*{suffix}") if not p.name.startswith(".")]


def _fresh(tmp_path: Path, empty_store: Path, config: dict, cache_from: Path | None = None) -> Path:
    copy_store(empty_store, tmp_path)
    if cache_from is not None:
        shutil.copytree(cache_from / "cache", tmp_path / "cache")
    return write_config(tmp_path, config)


def test_truncated_npz_entries_finish_with_one_warning_each_and_the_clean_metrics(tmp_path, empty_store,
                                                                                  descriptor_reference):
    """Every ``.npz`` entry truncated to 10 bytes (a partial copy, a full disk): was a FAILED cell (BadZipFile), every run."""
    reference, clean = descriptor_reference
    config = _fresh(tmp_path, empty_store, DESCRIPTOR, cache_from=reference)
    entries = sorted((tmp_path / "cache").rglob("*.npz"))
    assert len(entries) == 4  # SIFT of 2 private image sets, 2 dictionaries (the dictionaries' views stream to .f32 files)
    for entry in entries:
        with open(entry, "r+b") as fh:
            fh.truncate(10)
    proc = vispriv(tmp_path, config)
    assert proc.returncode == 0, proc.stderr
    warnings = stderr_lines(proc, "warning:")
    assert len(warnings) == len(entries), proc.stderr
    for entry in entries:
        assert sum(f"cache entry {entry} is truncated or overwritten (10 bytes" in w for w in warnings) == 1, warnings
        assert entry.stat().st_size > 10 and sum_path(entry).exists()
    assert finished_metrics(tmp_path / "mlflow.db") == clean


@pytest.mark.slow
def test_sigkill_mid_cache_write_and_between_renames_then_resume(tmp_path, empty_store, descriptor_reference):
    """Killed while cell 2 writes its 2nd entry (its dictionary views' SIFT, a streamed ``.f32`` file), then
    (resumed) between payload and checksum of its 3rd (its dictionary). Each cell writes, in order: the
    private images' SIFT, the dictionary views' SIFT, the dictionary."""
    _, clean = descriptor_reference
    config = _fresh(tmp_path, empty_store, DESCRIPTOR)
    db = tmp_path / "mlflow.db"
    killed = vispriv(tmp_path, config, fault="kill-cache-write:5")
    assert killed.returncode == -signal.SIGKILL
    partial = list((tmp_path / "cache" / "dictionary-sift").glob(".tmp-*"))
    assert len(partial) == 1 and partial[0].stat().st_size > 0
    assert len(_entries(tmp_path / "cache" / "sift")) == 2  # both cells' private SIFT
    assert len(_entries(tmp_path / "cache" / "dictionary-sift", ".f32")) == 1  # cell 1's views'
    assert len(_entries(tmp_path / "cache" / "dictionary")) == 1  # cell 1's dictionary
    assert [s["FINISHED"] for s in statuses(db).values()] == [1]

    killed = vispriv(tmp_path, config, "--resume", fault="kill-cache-rename:2")
    assert killed.returncode == -signal.SIGKILL
    unchecked = [p for p in _entries(tmp_path / "cache" / "dictionary") if not sum_path(p).exists()]
    assert len(unchecked) == 1

    done = vispriv(tmp_path, config, "--resume")
    assert done.returncode == 0, done.stderr
    warnings = stderr_lines(done, "warning: cache entry")
    assert len(warnings) == 1 and str(unchecked[0]) in warnings[0] and "no checksum file" in warnings[0]
    assert {cell: dict(s) for cell, s in statuses(db).items()} == {cell: {"FINISHED": 1} for cell in clean}
    assert finished_metrics(db) == clean


def test_sigkill_mid_artifact_copy_then_resume(tmp_path, empty_store):
    """Killed while MLflow copies cell 2's artifact: that run ends KILLED; --resume logs the cell once, whole."""
    config = _fresh(tmp_path, empty_store, IMAGES)
    db = tmp_path / "mlflow.db"
    killed = vispriv(tmp_path, config, fault="kill-artifact:2")
    assert killed.returncode == -signal.SIGKILL
    (running,) = [(run, cell) for run, cell, status in cell_runs(db) if status == "RUNNING"]

    done = vispriv(tmp_path, config, "--resume")
    assert done.returncode == 0, done.stderr
    assert "1 cells finished, 0 failed, 1 already done" in done.stdout
    assert stderr_lines(done, "warning: marked 2 stale run(s) KILLED")
    counts = statuses(db)
    assert len(counts) == 2 and all(c["FINISHED"] == 1 for c in counts.values())
    assert dict(counts[running[1]]) == {"FINISHED": 1, "KILLED": 1}
    (finished,) = [run for run, cell, status in cell_runs(db) if cell == running[1] and status == "FINISHED"]
    (partial,) = [p for p in artifact_root(db, running[0]).rglob("*") if p.is_file()]
    whole = artifact_root(db, finished) / partial.relative_to(artifact_root(db, running[0]))
    data, cut = whole.read_bytes(), partial.read_bytes()
    assert len(cut) == len(data) // 2 and data.startswith(cut)  # the KILLED run holds the partial copy, only it


def _unshare() -> list[str]:
    if os.geteuid() != 0:
        return []  # chmod is enough
    if shutil.which("unshare") is None or os.system("unshare -m true 2>/dev/null") != 0:
        pytest.skip("as root a read-only cache needs a private mount namespace (unshare -m)")
    return ["unshare", "-m"]


def test_cache_dir_read_only_mid_run_is_one_warning_and_the_clean_metrics(tmp_path, empty_store, descriptor_reference):
    _, clean = descriptor_reference
    config = _fresh(tmp_path, empty_store, DESCRIPTOR)
    (tmp_path / "cache").mkdir()
    proc = vispriv(tmp_path, config, fault="readonly-cache:1", wrap=_unshare(),
                   env={"FAULT_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr
    assert len(stderr_lines(proc, "warning:")) == 1, proc.stderr
    assert "refused a write" in stderr_lines(proc, "warning:")[0] and not stderr_lines(proc, "error:")
    assert finished_metrics(tmp_path / "mlflow.db") == clean


def test_store_refusing_writes_is_one_error_line_and_keeps_what_was_logged(tmp_path, empty_store):
    """RLIMIT_FSIZE at the store's size: sqlite cannot grow it mid-run (as on a full disk)."""
    config = _fresh(tmp_path, empty_store, {**IMAGES, "defenses": [{"name": "pixelate", "block": list(range(2, 10))}]})
    db = tmp_path / "mlflow.db"
    limit = db.stat().st_size

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() fails with EFBIG instead of killing the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = vispriv(tmp_path, config, preexec=limited)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.strip().splitlines() if not line.startswith("warning:")]
    assert len(errors) == 1 and errors[0].startswith("error: tracking store") and "refused a write" in errors[0], errors
    with sqlite3.connect(db) as con:
        assert con.execute("pragma integrity_check").fetchone() == ("ok",)
    before = finished_metrics(db)
    assert 1 <= len(before) < 8

    done = vispriv(tmp_path, config, "--resume")
    assert done.returncode == 0, done.stderr
    after = finished_metrics(db)
    assert len(after) == 8 and all(after[cell] == metrics for cell, metrics in before.items())
    assert all(dict(s) == {"FINISHED": 1} for s in statuses(db).values())
