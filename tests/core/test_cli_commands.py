"""The commands a new user meets first: plugins (with parameters), examples, ui, and choices."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from core_helpers import free_port, stop, wait_for_http

BUILTINS = {"VISPRIV_PLUGINS": "metrics,image-release"}


def test_plugins_listing_is_a_table_with_a_header(run_cli):
    out = run_cli("plugins", env=BUILTINS)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["KIND", "NAME", "SCENARIO", "VERSION", "FROM", "DESCRIPTION"]
    rows = [line for line in lines[1:] if line and not line.startswith("`")]
    assert {r.split()[1] for r in rows} >= {"pixelate", "as-released", "ssim", "sample-images"}
    # The columns line up under the header, and no row runs to 150 characters.
    name_col = lines[0].index("NAME")
    assert all(r[name_col - 1] == " " and r[name_col] != " " for r in rows)
    assert max(len(r) for r in rows) <= 120


def test_plugins_name_shows_the_config_schema(run_cli):
    out = run_cli("plugins", "pixelate", env=BUILTINS)
    assert out.returncode == 0, out.stderr
    header = next(line for line in out.stdout.splitlines() if line.startswith("PARAMETER"))
    assert header.split() == ["PARAMETER", "TYPE", "DEFAULT", "BOUNDS", "DESCRIPTION"]
    block = next(line for line in out.stdout.splitlines() if line.startswith("block"))
    assert block.split() == ["block", "int", "4", ">=", "1"]
    assert "payloads: Images -> Images" in out.stdout


def test_plugins_json_carries_the_schema(run_cli):
    out = run_cli("plugins", "--json", env=BUILTINS)
    plugins = {(p["kind"], p["name"]): p for p in json.loads(out.stdout)["plugins"]}
    (block,) = plugins[("defense", "pixelate")]["config"]
    assert block == {"name": "block", "type": "int", "default": 4, "required": False, "bounds": ">= 1",
                     "choices": [], "description": "", "utility_only": False}
    assert plugins[("attack", "as-released")]["config"] == []


def test_plugins_name_marks_the_utility_only_settings(run_cli):
    """A setting only the utility evaluation reads (it never enters a seed) says so, nested fields too."""
    out = run_cli("plugins", "affine-lifting", env={"VISPRIV_PLUGINS": "metrics,descriptor-release"})
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line for line in out.stdout.splitlines() if line and not line.startswith("PARAMETER")}
    assert "[utility only]" in rows["matching"] and "[utility only]" in rows["matching.ratio"]
    assert "[utility only]" in rows["utility"]
    assert "[utility only]" not in rows["m"] and "[utility only]" not in rows["mode"]
    assert "[utility only] read only by the utility evaluation or the report: never enters a seed" in out.stdout
    plain = run_cli("plugins", "pixelate", env=BUILTINS)
    assert "utility only" not in plain.stdout


def test_plugins_unknown_name_is_one_line(run_cli):
    out = run_cli("plugins", "pixelat", env=BUILTINS)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [out.stderr.strip()]
    assert "unknown plugin 'pixelat'" in out.stderr and "pixelate" in out.stderr


def test_executor_is_a_choice(run_cli, tmp_path):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"name": "x", "datasets": ["sample-images"],
                                                     "defenses": ["none"], "attacks": ["as-released"]}))
    out = run_cli("matrix", "c.yaml", "--executor", "dask", env=BUILTINS)
    assert out.returncode == 2
    assert "'dask' is not one of 'local', 'ray'" in out.stderr
    assert not (tmp_path / "mlflow.db").exists()


def test_examples_list_print_and_write(run_cli, tmp_path):
    listed = run_cli("examples", env=BUILTINS)
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines()[1:] if line and not line.startswith("`")]
    root = Path(__file__).parents[2] / "examples"
    repo_examples = sorted(str(p.relative_to(root).with_suffix("")) for p in root.rglob("*.yaml"))
    assert names == repo_examples  # the paper tables' configs as paper/<name>
    printed = run_cli("examples", "image-release", env=BUILTINS)
    assert yaml.safe_load(printed.stdout)["name"] == "image-release"
    wrote = run_cli("examples", "image_release", "--out", "cfg", env=BUILTINS)
    assert wrote.returncode == 0, wrote.stderr
    written = tmp_path / "cfg" / "image_release.yaml"
    assert written.read_text() == printed.stdout
    written.write_text("# my edits\n")
    again = run_cli("examples", "image_release", "--out", "cfg", env=BUILTINS)
    assert again.returncode == 2 and "--force" in again.stderr
    assert written.read_text() == "# my edits\n"
    unknown = run_cli("examples", "nosuch", env=BUILTINS)
    assert unknown.returncode == 2 and "shipped examples: adaptive_attacks, album, " in unknown.stderr


def test_ui_start_works_without_an_activated_venv(tmp_path, empty_store):
    """The venv's bin folder is not on PATH: ``vispriv ui --start`` still serves the store.

    The store is the session's migrated copy and the UI runs one server worker (mlflow's default is
    four, each importing mlflow): what is pinned is that the UI starts through this interpreter."""
    port = free_port()
    shutil.copy(empty_store, tmp_path / "mlflow.db")
    env = {**os.environ, "PATH": "/usr/bin:/bin", "MLFLOW_WORKERS": "1"}
    log_path = tmp_path / "ui.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vispriv", "ui", "--start", "--port", str(port),
             "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db"],
            cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        try:
            wait_for_http(f"http://127.0.0.1:{port}/health", proc, log_path)
        finally:
            stop(proc)
