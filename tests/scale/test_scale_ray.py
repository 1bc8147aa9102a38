"""``--executor ray`` on a local Ray instance: same metrics as local, resume, dying workers.

End-to-end runs against a real Ray instance (~10 s to start one): the slow tier (make test-all).
"""

from __future__ import annotations

import pytest
import yaml

pytestmark = pytest.mark.slow

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'vispriv[ray]')")

from scale_helpers import SITE_OK, metrics_by_hash, new_tracker, run_cli, run_toy, toy_config, toy_registry  # noqa: E402

from vispriv.harness.ray_executor import UNKNOWN_WORKER_CPU, RayExecutor, cell_resources, worker_env  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance (2 CPUs) for this module; executors reuse it and leave it running."""
    toy_registry()  # puts the toy distribution on sys.path, which worker_env() passes on
    assert str(SITE_OK) in worker_env()["PYTHONPATH"].split(":")
    executor = RayExecutor(address=None, num_cpus=2)
    executor._connect()
    yield
    executor.close()
    assert not ray.is_initialized()


def test_ray_gives_the_local_metrics_and_artifacts(local_ray, tmp_path):
    config = toy_config()
    local = new_tracker(tmp_path / "local")
    remote = new_tracker(tmp_path / "ray")
    res_local = run_toy(config, local, tmp_path / "cache-local")
    res_ray = run_toy(config, remote, tmp_path / "cache-ray", executor="ray")
    assert len(res_ray.finished) == len(res_local.finished) == 2 and not res_ray.failed
    a, b = metrics_by_hash(local, "toy-scale"), metrics_by_hash(remote, "toy-scale")
    assert set(a) == set(b) and len(a) == 2
    for h in a:
        assert a[h] == b[h]  # same seed, same cells: bit-identical metrics
        assert {"images/ssim", "utility/distortion"} <= set(b[h])
    exp = remote.experiment_id("toy-scale", create=False)
    for run in remote.cell_runs(exp):
        assert "note.txt" in [f.path for f in remote.client.list_artifacts(run.info.run_id)]
    assert ray.is_initialized()  # a Ray the executor did not start is left running


def test_resume_under_ray_runs_only_the_missing_cells(local_ray, tmp_path):
    tracker = new_tracker(tmp_path / "store")
    first = run_toy(toy_config(defenses=[{"name": "toy-noise", "sigma": 0.05}]), tracker, tmp_path / "c", executor="ray")
    assert len(first.finished) == 1
    second = run_toy(toy_config(), tracker, tmp_path / "c", executor="ray", resume=True)
    assert len(second.resumed) == 1 and len(second.finished) == 1 and not second.failed
    assert second.resumed[0].hash == first.finished[0][0].hash
    third = run_toy(toy_config(), tracker, tmp_path / "c", executor="ray", resume=True)
    assert len(third.resumed) == 2 and not third.finished
    exp = tracker.experiment_id("toy-scale", create=False)
    assert len(tracker.cell_runs(exp)) == 2


def test_a_dying_worker_fails_its_cell_and_the_rest_completes(local_ray, tmp_path):
    tracker = new_tracker(tmp_path / "store")
    config = toy_config(attacks=[{"name": "toy-denoise"}, {"name": "toy-denoise", "crash": True}])
    result = run_toy(config, tracker, tmp_path / "c", executor="ray")
    assert len(result.finished) == 2 and len(result.failed) == 2
    for cell, outcome in result.failed:
        assert cell.attack[0].config.crash
        assert outcome.status == "FAILED" and ("Crashed" in outcome.error or "died" in outcome.error.lower())
        assert outcome.cpu == UNKNOWN_WORKER_CPU and outcome.device == cell.device
    exp = tracker.experiment_id("toy-scale", create=False)
    statuses = sorted(r.info.status for r in tracker.cell_runs(exp))
    assert statuses == ["FAILED", "FAILED", "FINISHED", "FINISHED"]
    cpu_tags = sorted(r.data.tags["vispriv.cpu"] for r in tracker.cell_runs(exp) if r.info.status == "FAILED")
    assert cpu_tags == [UNKNOWN_WORKER_CPU] * 2
    parent = tracker.parent_runs(exp)[0]
    assert parent.info.status == "FAILED" and parent.data.tags["vispriv.n_failed"] == "2"


def test_resources_come_from_the_config_and_the_plugins(local_ray):
    from vispriv.harness.config import validate_config
    from vispriv.harness.matrix import build_matrix

    registry = toy_registry()
    cell = build_matrix(validate_config(toy_config()), registry).cells[0]
    assert cell_resources(cell) == {"cpus": 1.0, "gpus": 0.0}
    assert cell_resources(cell, {"cpus": 2}) == {"cpus": 2.0, "gpus": 0.0}
    attack_cls = cell.attack[0].cls
    try:
        attack_cls.resources = {"cpus": 0.5, "gpus": 1}
        assert cell_resources(cell, {"cpus": 2}) == {"cpus": 2.0, "gpus": 1.0}
    finally:
        del attack_cls.resources


def test_cli_starts_and_stops_a_local_ray_with_the_local_metrics(tmp_path):
    """The command line path: entry-point plugins found through PYTHONPATH load in the workers."""
    config = tmp_path / "toy.yaml"
    config.write_text(yaml.safe_dump(toy_config(resources={"cpus": 1})))
    for name, extra in [("ray", ["--executor", "ray"]), ("local", [])]:
        out = run_cli(tmp_path, "matrix", str(config), "--quiet", "--tracking-uri", f"sqlite:///{tmp_path / name}.db",
                      "--cache-dir", str(tmp_path / f"cache-{name}"), *extra)
        assert out.returncode == 0, out.stderr[-3000:]
        assert "2 cells finished, 0 failed" in out.stdout
    from vispriv.harness.tracking import Tracker

    a = metrics_by_hash(Tracker(f"sqlite:///{tmp_path / 'local'}.db"), "toy-scale")
    b = metrics_by_hash(Tracker(f"sqlite:///{tmp_path / 'ray'}.db"), "toy-scale")
    assert a == b and len(a) == 2
