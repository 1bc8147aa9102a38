"""A user's mistake is one ``error:`` line and exit status 2, never a traceback.

Folders the CLI writes (report, store, cache, scaffold, examples) are checked before
anything is created; a read-only store is not replaced by a new empty one; a misspelt
plugin name gets the closest registered names. Real subprocesses, real sqlite stores.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cli_fork import run_vispriv
from core_helpers import SITE_OK, toy_config

from vispriv.harness.config import validate_config
from vispriv.harness.matrix import build_matrix
from vispriv.harness.runner import run_matrix


def _error_line(out: subprocess.CompletedProcess) -> str:
    """The one line on stderr (plugin-load warnings aside), asserted to be an ``error:`` with exit status 2."""
    lines = [line for line in out.stderr.strip().splitlines() if not line.startswith("warning: plugin")]
    assert out.returncode == 2, out.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    return lines[0]


def _a_file(tmp_path: Path) -> Path:
    """A regular file where a folder would have to be (blocks root too, unlike chmod)."""
    path = tmp_path / "afile"
    path.write_text("a file, not a folder")
    return path


@pytest.fixture
def store_with_runs(toy_registry, tracker, tmp_path):
    """``tmp_path/mlflow.db`` holding the FINISHED cells of the toy experiment."""
    cfg = validate_config(toy_config())
    run_matrix(cfg, build_matrix(cfg, toy_registry), tracker, quiet=True, cache_dir=str(tmp_path / "cache"))
    return tmp_path / "mlflow.db"


def _read_only(folder: Path) -> list[str]:
    """A command prefix that runs the command with ``folder`` read-only (a private read-only bind mount as root)."""
    if os.geteuid() != 0:
        folder.chmod(0o500)
        return []
    if shutil.which("unshare") is None or os.system("unshare -m true 2>/dev/null") != 0:
        pytest.skip("as root a read-only folder needs a private mount namespace (unshare -m)")
    script = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" && exec "$@"'
    return ["unshare", "-m", "sh", "-c", script, str(folder)]


def _vispriv(tmp_path: Path, *args: str, wrap: list[str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(SITE_OK), "VISPRIV_PLUGINS": "toy,metrics,image-release"}
    if wrap:  # a command around the process (a mount namespace, a limit): a real exec
        return subprocess.run([*wrap, sys.executable, "-m", "vispriv", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
    return run_vispriv(args, cwd=tmp_path, env=env, timeout=300)


# -- folders the CLI writes, checked before anything is written --------------------------
def test_report_out_under_a_file_is_one_line(store_with_runs, run_cli, tmp_path):
    """Was a 24-line NotADirectoryError traceback and exit status 3."""
    blocker = _a_file(tmp_path)
    out = run_cli("report", "--experiment", "toy", "--out", "afile/out")
    line = _error_line(out)
    assert f"report folder {blocker / 'out'} cannot be written: {blocker} is a file, not a folder" in line
    assert "--out" in line


def test_every_folder_the_cli_writes_is_checked_before_anything_is_created(run_cli, write_config, tmp_path):
    """Cache, scaffold and examples folders under a file: one line each, and no store, folder or file left behind."""
    blocker = _a_file(tmp_path)
    config = write_config(toy_config())
    cases = [
        (["matrix", str(config), "--quiet", "--cache-dir", "afile/cache"], "cache dir", "--cache-dir"),
        (["new-plugin", "my-defense", "--kind", "defense", "--dir", "afile/plugins"], "folder", "--dir"),
        (["examples", "image-release", "--out", "afile/examples"], "examples folder", "--out"),
    ]
    for args, what, hint in cases:
        line = _error_line(run_cli(*args))
        assert f"{what} {blocker}/" in line and f"{blocker} is a file, not a folder" in line and hint in line, line
        assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", config.name], args


def test_read_only_folders_are_named_not_writable(tmp_path):
    """Report, sqlite store and cache in a read-only folder: each one line naming the folder."""
    folder = tmp_path / "ro"
    folder.mkdir()
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(toy_config()))
    cases = [
        (["report", "--out", str(folder / "report")], f"report folder {folder / 'report'} cannot be written"),
        (["matrix", str(config), "--tracking-uri", f"sqlite:///{folder}/mlflow.db"], "cannot open tracking store"),
        (["matrix", str(config), "--cache-dir", str(folder / "cache")], f"cache dir {folder / 'cache'}"),
    ]
    for args, message in cases:
        line = _error_line(_vispriv(tmp_path, *args, wrap=_read_only(folder)))
        assert message in line and f"folder {folder} is not writable" in line, line
    assert not any(folder.iterdir())


# -- tracking stores ---------------------------------------------------------------------
def test_report_without_a_store_creates_nothing_and_names_the_absolute_path(run_cli, tmp_path):
    """Was "no experiment 'vispriv' in sqlite:///mlflow.db", after creating an empty 950 KB store and a lock file."""
    line = _error_line(run_cli("report"))
    assert f"no tracking store at {tmp_path / 'mlflow.db'} (sqlite:///mlflow.db)" in line
    assert "--tracking-uri" in line
    assert list(tmp_path.iterdir()) == []


def test_report_on_an_unknown_experiment_names_the_absolute_path(store_with_runs, run_cli, tmp_path):
    line = _error_line(run_cli("report", "--experiment", "nope"))
    assert f"no experiment 'nope' in sqlite:///mlflow.db ({store_with_runs})" in line
    assert "toy" in line


def test_store_under_a_file_says_the_parent_is_a_file(run_cli, write_config, tmp_path):
    """Was "folder .../afile does not exist"."""
    blocker = _a_file(tmp_path)
    config = str(write_config(toy_config()))
    uri = f"sqlite:///{blocker}/mlflow.db"
    line = _error_line(run_cli("matrix", config, "--tracking-uri", uri))
    assert line.startswith(f"error: cannot open tracking store {uri}: {blocker} is a file, not a folder"), line


def test_a_store_other_than_sqlite_or_a_server_is_refused_with_the_supported_stores(run_cli, write_config, tmp_path):
    """A folder path or another scheme is one line naming the supported stores, and nothing is created."""
    config = str(write_config(toy_config()))
    for uri in (str(tmp_path / "runs"), "runs", "postgresql://localhost/vispriv"):
        line = _error_line(run_cli("matrix", config, "--tracking-uri", uri))
        assert line == (f"error: cannot open tracking store {uri}: not a supported store; use sqlite:///PATH/mlflow.db "
                        "(the default is sqlite:///mlflow.db) or http://HOST:PORT (an MLflow server)"), line
    assert not (tmp_path / "runs").exists()


# -- misspelt plugin names ---------------------------------------------------------------
def test_unknown_plugin_names_get_the_closest_registered_names(run_cli, write_config):
    config = str(write_config(toy_config()))
    cases = [
        (["plugins", "toy-nois"], "unknown plugin 'toy-nois' (did you mean 'toy-noise', 'toy-denoise' or 'toy-images'?)"),
        (["matrix", str(write_config(toy_config(attacks=["toy-denoize"]), "a.yaml")), "--dry-run"],
         "unknown attack 'toy-denoize' (did you mean 'toy-denoise'?); registered attacks: "),
        (["matrix", config, "--dry-run", "--set", "defenses.0.name=toy-nosie"],
         "unknown defense 'toy-nosie' (did you mean 'toy-noise'?); registered defenses: "),
    ]
    for args, message in cases:
        assert message in _error_line(run_cli(*args)), args


# -- examples --out into a folder that holds them ----------------------------------------
def test_examples_out_into_a_folder_holding_them_is_one_short_line(run_cli, tmp_path):
    """As in a checkout (examples/ holds every config): was one line of about 1,000 characters listing each file."""
    assert run_cli("examples", "--out", "examples").returncode == 0
    line = _error_line(run_cli("examples", "--out", "examples"))
    count = len(list((tmp_path / "examples").rglob("*.yaml")))
    assert f"folder examples already holds {count} of the {count} configs to write" in line
    assert "--force" in line and "another --out" in line and len(line) < 200, line
