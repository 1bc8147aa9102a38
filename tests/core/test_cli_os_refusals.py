"""A write the operating system refuses is one ``error: cannot write PATH: reason`` line, exit status 2.

The folder pre-checks (tests/core/test_cli_user_errors.py) pass as root where the kernel
still refuses: ``/proc`` and ``/sys``, a full disk (a 8 KiB tmpfs in a private mount
namespace: a real ENOSPC), a folder where a file should be. Each case is a real ``vispriv``
subprocess; each asserts one line, exit status 2, no traceback, no half-written or temporary
file left, and the store as it was (nothing already logged is lost).
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from cli_fork import run_vispriv
from core_helpers import SITE_OK, toy_config

from vispriv.harness.config import validate_config
from vispriv.harness.errors import WriteError
from vispriv.harness.matrix import build_matrix
from vispriv.harness.runner import run_matrix
from vispriv.harness.writes import write_file

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the kernel refuses these paths to root; a user is refused by the pre-check")


@pytest.fixture
def store_with_runs(toy_registry, tracker, tmp_path):
    """``tmp_path/mlflow.db`` holding the FINISHED cells of the toy experiment."""
    cfg = validate_config(toy_config())
    run_matrix(cfg, build_matrix(cfg, toy_registry), tracker, quiet=True, cache_dir=str(tmp_path / "cache"))
    return tmp_path / "mlflow.db"


def _runs(db: Path) -> list[tuple[str, str]]:
    """(run id, status) of every run of the store."""
    with sqlite3.connect(db) as con:
        return sorted(con.execute("select run_uuid, status from runs").fetchall())


def _one_error_line(out: subprocess.CompletedProcess) -> str:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    return lines[0]


def _full_disk(folder: Path) -> list[str]:
    """A command prefix that runs the command with an 8 KiB tmpfs on ``folder``, then lists what it left there on stdout."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or os.system("unshare -m true 2>/dev/null") != 0:
        pytest.skip("a small tmpfs needs root and a private mount namespace (unshare -m)")
    script = 'mount -t tmpfs -o size=8k tmpfs "$0" || exit 99; "$@"; rc=$?; echo "left: $(ls -A "$0")"; exit $rc'
    return ["unshare", "-m", "sh", "-c", script, str(folder)]


def _report(tmp_path: Path, *args: str, wrap: list[str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(SITE_OK), "VISPRIV_PLUGINS": "toy,metrics,image-release"}
    if wrap:  # a command around the process (a mount namespace, a limit): a real exec
        return subprocess.run([*wrap, sys.executable, "-m", "vispriv", "report", "--experiment", "toy", *args],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    return run_vispriv(["report", "--experiment", "toy", *args], cwd=tmp_path, env=env, timeout=300)


@as_root
def test_report_under_proc_and_sys_is_one_line_as_root(store_with_runs, tmp_path):
    """Was a FileNotFoundError / PermissionError traceback and exit status 3: the pre-check passes as root."""
    before = _runs(store_with_runs)
    cases = [
        ("/proc/vispriv-x", "error: cannot write /proc/vispriv-x: No such file or directory"),
        ("/sys/vispriv-x", "error: cannot write /sys/vispriv-x: Operation not permitted"),
    ]
    for out_dir, expected in cases:
        assert _one_error_line(_report(tmp_path, "--out", out_dir)) == expected
    line = _one_error_line(_report(tmp_path, "--out", "/proc"))  # the folder exists; its files are refused
    assert line == "error: cannot write /proc/heatmap_toy__images_faithful_share.png: No such file or directory"
    assert _runs(store_with_runs) == before


def test_report_on_a_full_disk_leaves_no_partial_file_and_keeps_the_store(store_with_runs, tmp_path):
    """A real ENOSPC: the first heatmap does not fit; not even its temporary file is left behind."""
    folder = tmp_path / "small"
    folder.mkdir()
    before = _runs(store_with_runs)
    out = _report(tmp_path, "--out", str(folder), wrap=_full_disk(folder))
    assert _one_error_line(out) == f"error: cannot write {folder}/heatmap_toy__images_faithful_share.png: No space left on device"
    assert out.stdout.strip().splitlines()[-1] == "left:"
    assert _runs(store_with_runs) == before
    assert _report(tmp_path, "--out", "reports").returncode == 0  # the store still reports


def test_a_folder_where_a_report_file_should_be_is_one_line(store_with_runs, tmp_path):
    """``reports/report.md`` is a folder: the rename into place is refused; the heatmaps already written stay whole."""
    (tmp_path / "reports" / "report.md").mkdir(parents=True)
    line = _one_error_line(_report(tmp_path, "--out", "reports"))
    assert line == f"error: cannot write {tmp_path}/reports/report.md: Is a directory"
    left = sorted(p.name for p in (tmp_path / "reports").iterdir())
    assert "report.md" in left and not [n for n in left if ".tmp-" in n], left


def test_write_file_keeps_the_old_file_when_the_writer_fails(tmp_path):
    """The mechanism: a writer that hits a full disk leaves the previous file and no temporary file."""
    target = tmp_path / "report.md"
    target.write_text("the report of yesterday")

    def full(tmp: Path) -> None:
        tmp.write_text("half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(WriteError) as caught:
        write_file(target, full)
    assert str(caught.value) == f"cannot write {target}: No space left on device"
    assert target.read_text() == "the report of yesterday"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]

