"""The whole path: matrix -> runner -> MLflow sqlite store -> report, read back."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_fork import run_vispriv
from core_helpers import SITE_OK, toy_config

from vispriv.harness.config import validate_config
from vispriv.harness.errors import TrackingError
from vispriv.harness.matrix import build_matrix
from vispriv.harness.report import collect, write_report
from vispriv.harness.runner import MatrixInterrupted, run_matrix
from vispriv.harness.tracking import Tracker


def _run(cfg_dict, registry, tracker, tmp_path, **kw):
    cfg = validate_config(cfg_dict)
    matrix = build_matrix(cfg, registry)
    return matrix, run_matrix(cfg, matrix, tracker, quiet=True, cache_dir=str(tmp_path / "cache"), **kw)


def test_end_to_end_store_layout_and_report(toy_registry, tracker, tmp_path):
    _matrix, result = _run(toy_config(), toy_registry, tracker, tmp_path)
    assert len(result.finished) == 2 and not result.failed
    exp = tracker.experiment_id("toy", create=False)
    parents = tracker.parent_runs(exp)
    children = tracker.cell_runs(exp)
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert len(children) == 2
    for run in children:
        tags, metrics, params = run.data.tags, run.data.metrics, run.data.params
        assert tags["mlflow.parentRunId"] == parents[0].info.run_id
        assert tags["vispriv.scenario"] == "toy" and tags["vispriv.attack"] == "toy-denoise"
        assert {"vispriv.cell_hash", "vispriv.seed", "vispriv.git_sha", "vispriv.versions"} <= set(tags)
        assert {"images/ssim", "images/mae", "images/psnr", "labels/accuracy", "utility/distortion", "attack/calls"} <= set(metrics)
        assert metrics["labels/accuracy"] == 1.0
        assert json.loads(tags["vispriv.higher_is_better"])["images/mae"] is False
        assert params["defense"] == "toy-noise" and "defense.sigma" in params
        artifacts = [a.path for a in tracker.client.list_artifacts(run.info.run_id)]
        assert "note.txt" in artifacts
    by_sigma = {r.data.params["defense.sigma"]: r.data.metrics["images/ssim"] for r in children}
    assert by_sigma["0.05"] > by_sigma["0.2"]  # more noise, worse reconstruction
    out = write_report(tracker, "toy", tmp_path / "report", ["ssim"], ["md", "csv", "html"], command="test")
    names = {f.name for f in out.files}
    assert {"report.md", "report.csv", "report.html", "heatmap_toy__images_ssim.png"} <= names
    assert "| toy-denoise |" in out.markdown and "toy-noise(sigma=0.05)" in out.markdown
    assert "Data: SIMULATED toy images (uniform noise)" in out.markdown
    assert children[0].data.tags["vispriv.provenance"].startswith("SIMULATED")
    logged = [a.path for a in tracker.client.list_artifacts(parents[0].info.run_id, "report")]
    assert "report/report.md" in logged


def _reachable(value, seen=None):
    """Every value reachable from ``value`` through attributes, dicts, lists and tuples (numpy arrays as lists)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return []
    seen.add(id(value))
    out = [value]
    children = []
    if isinstance(value, dict):
        children = list(value.keys()) + list(value.values())
    elif isinstance(value, (list, tuple)):
        children = list(value)
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        children = list(vars(value).values())
    elif hasattr(value, "tolist"):
        flat = value.tolist()
        children = flat if isinstance(flat, list) else [flat]
    for child in children:
        out.extend(_reachable(child, seen))
    return out


def test_secret_config_never_reaches_the_attack(toy_registry, tracker, tmp_path):
    """What the attack is handed (release and public knowledge) holds no value of the defense's secret."""
    import vispriv_toy

    from vispriv.harness import Attack, AttackResult, Defense, Images

    received = []

    class Spy(Attack):
        name, version, scenario = "toy-spy", "1.0", "toy"
        consumes, produces = (vispriv_toy.NoisyImages,), (Images,)

        def attack(self, release, public, ctx):
            received.append((release, public))
            return AttackResult(estimate={"images": Images(release.images, ids=list(release.ids))})

    class Leaky(Defense):
        """Puts its key where an attacker can read it: the check below must catch it."""

        Config = vispriv_toy.ToyNoise.Config
        name, version, scenario = "toy-leaky", "1.0", "toy"
        consumes, produces = (Images,), (vispriv_toy.NoisyImages,)

        def protect(self, private, public, ctx):
            protected = vispriv_toy.ToyNoise(self.config).protect(private, public, ctx)
            protected.release.ids = [f"{i}-{self.config.secret_key}" for i in protected.release.ids]
            return protected

    class Hooks:
        @staticmethod
        def vispriv_register_attacks(register):
            register(Spy)

        @staticmethod
        def vispriv_register_defenses(register):
            register(Leaky)

    toy_registry.add_module(Hooks(), "spy")
    secret = 987654321
    cfg = toy_config(defenses=[{"name": "toy-noise", "secret_key": secret}, {"name": "toy-leaky", "secret_key": secret}],
                     attacks=["toy-spy"])
    _run(cfg, toy_registry, tracker, tmp_path)
    assert len(received) == 2
    leaks = [any(str(secret) in str(v) for v in _reachable(got)) for got in received]
    assert sorted(leaks) == [False, True]  # the honest defense leaks nothing; the leaky one is caught


def test_failing_cell_is_failed_with_traceback_and_matrix_goes_on(toy_registry, tracker, tmp_path):
    cfg = toy_config(attacks=[{"name": "toy-denoise", "fail": [True, False]}])
    _, result = _run(cfg, toy_registry, tracker, tmp_path)
    assert len(result.failed) == 2 and len(result.finished) == 2
    exp = tracker.experiment_id("toy", create=False)
    failed = tracker.cell_runs(exp, status="FAILED")
    assert len(failed) == 2
    text = tracker.client.download_artifacts(failed[0].info.run_id, "traceback.txt", str(tmp_path))
    assert "toy attack failed on purpose" in Path(text).read_text()
    assert tracker.parent_runs(exp)[0].info.status == "FAILED"


def test_resume_skips_finished_cells(toy_registry, tracker, tmp_path):
    _run(toy_config(), toy_registry, tracker, tmp_path)
    _, again = _run(toy_config(defenses=[{"name": "toy-noise", "sigma": [0.05, 0.2, 0.4]}]), toy_registry,
                    tracker, tmp_path, resume=True)
    assert len(again.resumed) == 2 and len(again.finished) == 1


def test_interrupt_keeps_finished_cells(toy_registry, tracker, tmp_path, monkeypatch):
    from vispriv.harness import executors

    real = executors.run_cell
    calls = {"n": 0}

    def interrupt_second(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(executors, "run_cell", interrupt_second)
    with pytest.raises(MatrixInterrupted, match=r"1 of 2 cells finished.*--resume"):
        _run(toy_config(), toy_registry, tracker, tmp_path)
    exp = tracker.experiment_id("toy", create=False)
    assert len(tracker.cell_runs(exp, status="FINISHED")) == 1
    assert tracker.parent_runs(exp)[0].info.status == "KILLED"
    monkeypatch.setattr(executors, "run_cell", real)
    _, resumed = _run(toy_config(), toy_registry, tracker, tmp_path, resume=True)
    assert len(resumed.resumed) == 1 and len(resumed.finished) == 1


def test_unopenable_tracking_uri(tmp_path):
    with pytest.raises(TrackingError, match=r"cannot open tracking store .*does not exist"):
        Tracker(f"sqlite:///{tmp_path}/missing/dir/mlflow.db")
    with pytest.raises(TrackingError, match=r"mlflow\.db: not a supported store; use sqlite:"):
        Tracker("mlflow.db")
    bad = tmp_path / "notadb.db"
    bad.write_text("this is not sqlite")
    with pytest.raises(TrackingError, match="cannot open tracking store"):
        Tracker(f"sqlite:///{bad}")


def test_report_on_unknown_experiment(tracker):
    from vispriv.harness.errors import VisprivError

    with pytest.raises(VisprivError, match="no experiment 'nope'"):
        collect(tracker, "nope")


def _error_lines(stderr: str) -> list[str]:
    """stderr less plugin-load warnings: a user error must be exactly one line, no traceback."""
    return [line for line in stderr.strip().splitlines() if not line.startswith("warning: plugin")]


def _count(db: Path, status: str) -> int:
    with sqlite3.connect(db) as con:
        return con.execute(
            "select count(*) from runs r join tags t on r.run_uuid = t.run_uuid "
            "where t.key = 'vispriv.kind' and t.value = 'cell' and r.status = ?", (status,)
        ).fetchone()[0]


def test_ctrl_c_then_resume_in_a_real_process(tmp_path, write_config):
    """SIGINT to a running ``vispriv matrix``: finished cells stay, --resume runs the rest."""
    cfg = write_config(toy_config(attacks=[{"name": "toy-denoise", "delay": 1.0}],
                                  defenses=[{"name": "toy-noise", "sigma": [0.1, 0.2, 0.3, 0.4]}]))
    env = {**os.environ, "PYTHONPATH": str(SITE_OK), "VISPRIV_TOY_STARTED": str(tmp_path / "started.txt"),
           "VISPRIV_PLUGINS": "toy,metrics"}
    cmd = [sys.executable, "-m", "vispriv", "matrix", str(cfg), "--quiet"]
    # As from a shell: SIGINT at its default in the child, whatever this test process inherited
    # (a child of a process that ignores SIGINT ignores it too, and Python then never raises KeyboardInterrupt).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # caught here = default after exec
    try:
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    started = tmp_path / "started.txt"
    deadline = time.time() + 120
    while time.time() < deadline and (not started.exists() or started.read_text().count("started") < 2):
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert _error_lines(err) == [_error_lines(err)[0]] and "rerun with --resume" in err
    db = tmp_path / "mlflow.db"
    done = _count(db, "FINISHED")
    assert 1 <= done < 4
    again = run_vispriv([*cmd[3:], "--resume"], cwd=tmp_path, env=env, timeout=120)
    assert again.returncode == 0, again.stderr
    assert f"{4 - done} cells finished, 0 failed, {done} already done" in again.stdout
    assert _count(db, "FINISHED") == 4


def test_cli_errors_are_one_line_and_exit_2(run_cli, write_config, tmp_path):
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("datasets: [\n")
    cases = [
        (["matrix", str(bad_yaml)], "not valid YAML"),
        (["matrix", str(write_config(toy_config(attacks=["nope"]), "a.yaml"))], "unknown attack 'nope'"),
        (["matrix", str(write_config(toy_config(defenses=[{"name": "toy-noise", "sgma": 1}]), "b.yaml"))],
         "unknown key 'sgma'"),
        (["matrix", str(write_config(toy_config(), "c.yaml")), "--tracking-uri", "sqlite:////nonexistent/x/mlflow.db"],
         "cannot open tracking store"),
        (["report", "--experiment", "nothing-here"], f"no tracking store at {tmp_path / 'mlflow.db'}"),
    ]
    for args, message in cases:
        out = run_cli(*args)
        assert out.returncode == 2, (args, out.stderr)
        assert message in out.stderr and len(_error_lines(out.stderr)) == 1, out.stderr


def test_cli_dry_run_and_run_and_report(run_cli, write_config, tmp_path):
    cfg = write_config(toy_config())
    dry = run_cli("matrix", str(cfg), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count("  run  ") == 2 and dry.stdout.count("  skip  ") == 1
    assert not (tmp_path / "mlflow.db").exists()
    run = run_cli("matrix", str(cfg), "--quiet", "--set", "seed=3")
    assert run.returncode == 0, run.stderr
    assert "2 cells finished, 0 failed" in run.stdout and "mlflow ui --backend-store-uri sqlite:///mlflow.db" in run.stdout
    rep = run_cli("report", "--experiment", "toy", "--metric", "ssim", "--format", "md", "--format", "csv")
    assert rep.returncode == 0, rep.stderr
    assert (tmp_path / "reports" / "report.csv").read_text().count("\n") == 3


def test_parameter_table_of_a_sweep(toy_registry, tracker, tmp_path):
    """``--table ROWS:COL``: rows are row-param combinations, columns the col param, in numeric order."""
    cfg = toy_config(datasets=[{"name": "toy-images", "n": [3, 2]}], defenses=[{"name": "toy-noise", "sigma": [0.2, 0.05]}])
    _run(cfg, toy_registry, tracker, tmp_path)
    runs = tracker.cell_runs(tracker.experiment_id("toy", create=False))
    assert {"dataset.n", "defense.sigma"} <= set(runs[0].data.params)
    expected = {(r.data.params["dataset.n"], r.data.params["defense.sigma"]): r.data.metrics["images/ssim"] for r in runs}
    se = {(r.data.params["dataset.n"], r.data.params["defense.sigma"]): r.data.metrics["images/ssim_se"] for r in runs}
    out = write_report(tracker, "toy", tmp_path / "table", ["images/ssim", "utility/distortion"], ["md", "html"],
                       tables=[(["dataset.n"], "defense.sigma")], log_to_parent=False)
    lines = out.markdown.splitlines()
    header = next(line for line in lines if line.startswith("| dataset.n \\ defense.sigma"))
    assert header.split(" | ")[1:] == ["0.05", "0.2 |"]
    ssim_rows = [line for line in lines if line.startswith("| toy-denoise, n=")]
    assert [row.split(" | ")[0] for row in ssim_rows] == ["| toy-denoise, n=2", "| toy-denoise, n=3"]
    cells = ssim_rows[0].strip("| ").split(" | ")[1:]
    assert cells == [f"{expected[(n, s)]:.3f} ± {se[(n, s)]:.3f}" for n, s in [("2", "0.05"), ("2", "0.2")]]  # as in the pivots
    assert any(line.startswith("| n=2 |") for line in lines)  # a utility metric has no attack in its rows
    assert "attack \\ defense" not in out.markdown


def test_table_spec_without_a_column_is_one_clear_error(run_cli, tmp_path):
    out = run_cli("report", "--table", "defense.m", "--tracking-uri", f"sqlite:///{tmp_path / 'none.db'}")
    assert out.returncode == 2
    assert "--table 'defense.m': expected ROW1,ROW2:COL" in out.stderr


def test_parameter_table_labels_nested_configs_by_the_keys_that_vary():
    from vispriv.harness.report import CellRow, _varying_part

    def row(params: dict) -> CellRow:
        return CellRow("r", "s", "d", "def", "att", params, {}, {}, "")

    nested = [row({"defense.matching": json.dumps({"criterion": c, "ratio": 0.8})}) for c in ("mutual-nn", "vocabulary")]
    label = _varying_part(nested, "defense.matching")
    assert label(nested[1].params["defense.matching"]) == "criterion=vocabulary"
    same = _varying_part(nested[:1], "defense.matching")
    assert same(nested[0].params["defense.matching"]) == "matching=default"
    assert _varying_part([row({"defense.m": "2"})], "defense.m")("2") == "m=2"
