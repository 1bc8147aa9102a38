"""Deep gradient inversion through the CLI on a real sqlite store: pairing, defenses, insider, bad input."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from cli_fork import run_vispriv
from mlflow import MlflowClient


def run(folder: Path, config: dict, *args: str) -> subprocess.CompletedProcess:
    path = folder / "matrix.yaml"
    path.write_text(yaml.safe_dump(config))
    return run_vispriv(["matrix", str(path), "--quiet", "--tracking-uri", f"sqlite:///{folder / 'mlflow.db'}",
                        "--cache-dir", str(folder / "cache"), *args], cwd=folder, timeout=600)


def cell_metrics(folder: Path, experiment: str) -> dict[str, dict[str, float]]:
    # A client of its own: mlflow.set_tracking_uri would export MLFLOW_TRACKING_URI to every later subprocess.
    client = MlflowClient(tracking_uri=f"sqlite:///{folder / 'mlflow.db'}")
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id]) if exp is not None else []
    return {r.info.run_name: r.data.metrics for r in runs if "mlflow.parentRunId" in r.data.tags}


TINY = {"name": "federated-deep", "size": 8, "test_images": 8, "public_images": 8}


def test_every_defense_runs_and_pairs_only_with_the_deep_attacks(tmp_path):
    config = {
        "name": "deep-pairs",
        "seed": 0,
        "datasets": [{**TINY, "n_users": 3, "batch_size": 2}],
        "defenses": [
            {"name": "none", "rounds": 2},
            {"name": "gradient-pruning", "prune": 0.5, "rounds": 2},
            {"name": "dp-sgd", "noise_multiplier": 0.5, "rounds": 2},
            {"name": "dphe", "key_bits": 256, "rounds": 2},
            {"name": "prr10"},
        ],
        "attacks": [{"name": "idlg", "steps": 1}, {"name": "inverting-gradients", "steps": 2}, {"name": "gradient-leakage"}],
        "metrics": ["psnr", "accuracy", "recognisable"],
    }
    dry = run(tmp_path, config, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "gradient-leakage: needs FederatedRelease" in dry.stdout + dry.stderr
    assert "prr10" in dry.stdout + dry.stderr and "needs FederatedData" in dry.stdout + dry.stderr
    done = run(tmp_path, {**config, "attacks": [{"name": "inverting-gradients", "steps": 2}]})
    assert done.returncode == 0, done.stderr
    cells = cell_metrics(tmp_path, "deep-pairs")
    assert len(cells) == 4
    for name, m in cells.items():
        assert 0 <= m["images/recognisable_share"] <= 1 and "labels/accuracy" in m, name
        assert 0 <= m["utility/test_accuracy"] <= 1
    dp = next(m for n, m in cells.items() if "dp-sgd" in n)
    assert 0 < dp["utility/epsilon"] < float("inf")
    dphe = next(m for n, m in cells.items() if "dphe" in n)
    assert dphe["utility/secure_sum_max_abs_error"] < 1e-6  # Paillier's sum is the plaintext mean
    assert dphe["attack/images_per_inversion"] == 6  # the published average: all N x B images at once


def test_insider_with_two_users_recovers_the_other_image_the_aggregator_does_not(tmp_path):
    """DPHE section 2.5: with N = 2 the insider's 2 w̄ - w_own is the other user's update."""
    config = {
        "name": "deep-insider",
        "seed": 0,
        "datasets": [{**TINY, "n_users": 2, "batch_size": 1}],
        "defenses": [{"name": "dphe", "key_bits": 256, "force": True, "rounds": 1},
                     {"name": "dphe", "key_bits": 256, "force": True, "observer": 0, "rounds": 1}],
        "attacks": [{"name": "idlg", "steps": 8}],
        "metrics": ["psnr", "recognisable"],
    }
    done = run(tmp_path, config)
    assert done.returncode == 0, done.stderr
    cells = cell_metrics(tmp_path, "deep-insider")
    insider = next(m for n, m in cells.items() if "observer=0" in n)
    aggregator = next(m for n, m in cells.items() if "observer" not in n)
    assert insider["attack/insider_view"] == 1.0 and aggregator["attack/insider_view"] == 0.0
    assert insider["images/psnr_median"] > 30
    assert insider["images/psnr_median"] > aggregator["images/psnr_median"] + 10


@pytest.mark.parametrize(
    ("dataset", "message"),
    [
        ({**TINY, "batch_size": 4, "images_per_user": 2}, "a user cannot form a batch larger than its data"),
        # a bundled source's size is known before any run
        ({**TINY, "n_users": 200, "batch_size": 4}, "has 192 images but the config needs"),
        ({**TINY, "head_classes": 5}, "head_classes (5) is smaller than the 12 classes"),
    ],
)
def test_bad_dataset_settings_are_one_line_before_any_run(tmp_path, dataset, message):
    config = {"name": "deep-bad", "datasets": [dataset], "defenses": ["none"], "attacks": [{"name": "dlg", "steps": 1}]}
    done = run(tmp_path, config)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), done.stderr[-2000:]
    assert message in lines[0]
    assert cell_metrics(tmp_path, "deep-bad") == {}  # no parent run, no cell


def test_a_budget_of_zero_steps_is_a_config_error(tmp_path):
    config = {"name": "deep-zero", "datasets": [TINY], "defenses": ["none"], "attacks": [{"name": "dlg", "steps": 0}]}
    done = run(tmp_path, config)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error:") and "steps" in done.stderr
