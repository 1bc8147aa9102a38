"""A real ``mlflow server`` on loopback serves the runs a matrix logged to its sqlite store."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from scale_helpers import metrics_by_hash, new_tracker, run_toy, toy_config

STARTUP_S = 180


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def _wait_ready(base: str, proc: subprocess.Popen, log_path) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"mlflow server exited with {proc.returncode}: {log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(base + "/health", timeout=5) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(1)
    pytest.fail(f"mlflow server not ready after {STARTUP_S}s")


def test_mlflow_server_serves_the_matrix_runs(tmp_path):
    tracker = new_tracker(tmp_path / "store")
    result = run_toy(toy_config(), tracker, tmp_path / "cache")
    assert len(result.finished) == 2
    logged = metrics_by_hash(tracker, "toy-scale")
    exp_id = tracker.experiment_id("toy-scale", create=False)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", tracker.uri,
         "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        _wait_ready(base, proc, tmp_path / "server.log")
        exp = _post(base + "/api/2.0/mlflow/experiments/search", {"max_results": 100})
        assert exp_id in {e["experiment_id"] for e in exp["experiments"]}
        found = _post(base + "/api/2.0/mlflow/runs/search", {
            "experiment_ids": [exp_id], "filter": "tags.`vispriv.kind` = 'cell'", "max_results": 100,
        })
        runs = found["runs"]
        assert len(runs) == 2
        served = {}
        for run in runs:
            tags = {t["key"]: t["value"] for t in run["data"]["tags"]}
            assert run["info"]["status"] == "FINISHED" and tags["vispriv.scenario"] == "toy"
            served[tags["vispriv.cell_hash"]] = {m["key"]: m["value"] for m in run["data"]["metrics"]}
        assert served == logged
        parents = _post(base + "/api/2.0/mlflow/runs/search", {
            "experiment_ids": [exp_id], "filter": "tags.`vispriv.kind` = 'matrix'"})
        assert len(parents["runs"]) == 1
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)
        log.close()
