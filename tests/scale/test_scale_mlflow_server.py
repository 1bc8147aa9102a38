"""A real ``mlflow server`` on loopback serves the runs a matrix logged to its sqlite store (slow tier)."""

from __future__ import annotations

import json
import urllib.request

import pytest
from scale_helpers import metrics_by_hash, mlflow_server, new_tracker, run_toy, toy_config


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


@pytest.mark.slow
def test_mlflow_server_serves_the_matrix_runs(tmp_path):
    tracker = new_tracker(tmp_path / "store")
    result = run_toy(toy_config(), tracker, tmp_path / "cache")
    assert len(result.finished) == 2
    logged = metrics_by_hash(tracker, "toy-scale")
    exp_id = tracker.experiment_id("toy-scale", create=False)
    with mlflow_server(tmp_path / "server", backend_uri=tracker.uri) as base:
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
