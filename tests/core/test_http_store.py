"""``http://`` tracking stores, against real processes and a real ``mlflow server`` on loopback."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
from core_helpers import SITE_BROKEN, SITE_OK, free_port, mlflow_server, toy_config

from vispriv.harness.claims import RunClaims
from vispriv.harness.tracking import Tracker


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One ``mlflow server`` (sqlite backend, proxied artifacts in tmp): the end-to-end runs on it are slow-tier tests."""
    with mlflow_server(tmp_path_factory.mktemp("mlflow-server")) as url:
        yield url


def _ran(stdout: str) -> int:
    """How many cells a ``vispriv matrix`` run executed (its summary line)."""
    return int(stdout.split(" cells finished")[0].split()[-1])


def test_unreachable_http_store_is_one_line_before_any_plugin_loads(run_cli, write_config):
    """A closed loopback port: exit 2 and one line; the store is probed first, so no plugin warning comes before it."""
    uri = f"http://127.0.0.1:{free_port()}"
    out = run_cli("matrix", str(write_config(toy_config())), "--quiet", "--tracking-uri", uri,
                  sites=(SITE_OK, SITE_BROKEN), timeout=90)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [
        f"error: cannot open tracking store {uri}: no server answers at 127.0.0.1:{uri.rsplit(':', 1)[1]} "
        f"(Connection refused); start one (mlflow server --port {uri.rsplit(':', 1)[1]}) or fix --tracking-uri / "
        "MLFLOW_TRACKING_URI"
    ], out.stderr
    assert out.stdout == ""


@pytest.mark.slow
def test_matrix_on_a_mlflow_server_logs_and_resumes(server, run_cli, write_config):
    cfg = write_config(toy_config(name="toy-http"))
    first = run_cli("matrix", str(cfg), "--quiet", "--tracking-uri", server)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("2 cells finished, 0 failed, 0 already done"), first.stdout
    tracker = Tracker(server)
    exp = tracker.experiment_id("toy-http", create=False)
    runs = tracker.cell_runs(exp)
    assert sorted(r.info.status for r in runs) == ["FINISHED", "FINISHED"]
    for run in runs:
        assert 0 < run.data.metrics["images/ssim"] <= 1 and run.data.metrics["attack/calls"] == 1.0
    (parent,) = tracker.parent_runs(exp)
    assert "config.yaml" in {a.path for a in tracker.client.list_artifacts(parent.info.run_id)}  # proxied artifacts
    # One link to the parent run in the server's own UI, not MLflow's two "View run" lines per run.
    assert first.stdout.splitlines()[1:] == [f"browse: {server}/#/experiments/{exp}/runs/{parent.info.run_id}"]

    again = run_cli("matrix", str(cfg), "--quiet", "--resume", "--tracking-uri", server)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("0 cells finished, 0 failed, 2 already done"), again.stdout
    assert len(tracker.cell_runs(exp)) == 2
    assert tracker.claim_runs(exp, runs[0].data.tags["vispriv.cell_hash"]) == []


@pytest.mark.slow
def test_concurrent_resumes_on_a_mlflow_server_split_the_cells(server, write_config, tmp_path):
    """Two real processes, one http store: each cell runs exactly once, and no claim run is left."""
    sigmas = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    cfg = write_config(toy_config(name="toy-http-race", attacks=[{"name": "toy-denoise", "delay": 1.0}],
                                  defenses=[{"name": "toy-noise", "sigma": sigmas}]))
    env = {**os.environ, "PYTHONPATH": str(SITE_OK), "VISPRIV_PLUGINS": "toy,metrics"}
    cmd = [sys.executable, "-m", "vispriv", "matrix", str(cfg), "--quiet", "--resume", "--tracking-uri", server]
    procs = [subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for proc, (_out, err) in zip(procs, outs):
        assert proc.returncode == 0, err
    tracker = Tracker(server)
    exp = tracker.experiment_id("toy-http-race", create=False)
    hashes = [r.data.tags["vispriv.cell_hash"] for r in tracker.cell_runs(exp, status="FINISHED")]
    assert len(hashes) == len(sigmas) and len(set(hashes)) == len(sigmas)
    assert sum(_ran(out) for out, _ in outs) == len(sigmas), outs
    assert all(tracker.claim_runs(exp, h) == [] for h in hashes)


# -- the claim protocol, step by step (a real sqlite-backed MLflow store) --------------------
@pytest.fixture
def claims_of(tracker):
    exp = tracker.experiment_id("claims")
    parent = tracker.start_parent(exp, "matrix claims", {}, {})
    return lambda: RunClaims(tracker, exp, parent, backoff_s=(0.0, 0.01))


def test_the_later_reader_sees_both_claims_and_withdraws(claims_of, tracker):
    a, b = claims_of(), claims_of()
    mine_a, mine_b = a.post("h"), b.post("h")
    assert a.decide("h", mine_a) is None  # contended: withdrawn, post again later
    assert b.decide("h", mine_b) is True  # a's claim is gone: b alone
    assert [r.info.run_id for r in tracker.claim_runs(b.experiment_id, "h")] == [mine_b]
    assert a.claim("h") == (False, True)  # b's claim is marked won: a skips the cell
    assert [r.info.run_id for r in tracker.claim_runs(b.experiment_id, "h")] == [mine_b]
    b.done("h")
    assert tracker.claim_runs(b.experiment_id, "h") == []
    assert a.claim("h") == (True, True)  # free again: a wins, and must look for b's FINISHED run


def test_a_claim_of_a_dead_process_is_taken_over(claims_of, tracker):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    a = claims_of()
    a.owner = a.owner.rsplit(":", 1)[0] + ":" + dead.stdout.strip()
    a.decide("h", a.post("h"))
    b = claims_of()
    assert b.claim("h") == (True, True)
    assert len(tracker.claim_runs(b.experiment_id, "h")) == 1


def test_threads_racing_for_one_cell_never_both_win(claims_of):
    """Eight claimants at once, five cells: exactly one wins each cell."""
    claimants = [claims_of() for _ in range(8)]
    won: dict[str, list[int]] = {h: [] for h in "abcde"}
    start = threading.Barrier(len(claimants))

    def race(i: int) -> None:
        start.wait()
        for h in won:
            if claimants[i].claim(h)[0]:
                won[h].append(i)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(claimants))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert all(len(w) == 1 for w in won.values()), won
