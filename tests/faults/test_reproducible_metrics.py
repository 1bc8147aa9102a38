"""Every non-timing metric is a function of config + seed: two runs of a matrix over all four scenarios agree.

Each run has its own clean store and clean cache, and the in-process memo of datasets and
defenses is cleared between them, so nothing is shared but the config. DPHE draws its
permutations and padding from the OS CSPRNG: the protocol's randomness differs between the
two runs, so equal DPHE metrics show they do not depend on it (``utility/slot_origin_candidates``
is logged as its expectation over that draw).

Timing metrics are those whose name says so (:data:`TIMING`: ``seconds``, ``per_second``):
wall-clock time, rates per second. docs/mlflow.md lists them. Everything else must be equal
(NaN equal to NaN).
"""

from __future__ import annotations

import math
import re
import shutil
import sqlite3
from pathlib import Path

import yaml
from click.testing import CliRunner
from fault_helpers import finished_metrics

from vispriv.harness.cli import cli
from vispriv.harness.execute import clear_memo

#: A metric name with one of these words measures time, not the config: left out of the comparison.
TIMING = re.compile(r"(^|[/_])(seconds|per_second)($|[/_])")

CONFIG = {
    "name": "faults-all-scenarios",
    "seed": 0,
    "datasets": [
        {"name": "sample-images", "size": 16, "n_private": 2},
        {"name": "bundled-images", "size": 48, "sift": {"max_keypoints": 48}},
        {"name": "federated-images", "source": "digits", "n_users": 3, "max_per_user": 20},
        {"name": "album-world", "n_places": 16, "n_albums": 4, "train_per_place": 8, "epochs": 1},
    ],
    "defenses": [
        {"name": "pixelate", "block": 4},
        {"name": "affine-lifting", "mode": "random", "m": 4, "database_size": 32, "database_augment": 0,
         "kmeans_niter": 4, "utility": False},
        {"name": "dphe", "rounds": 2, "key_bits": 256},
        {"name": "album-pruning", "mode": "greedy", "k": 1, "scores_from": "adversary"},
    ],
    "attacks": [
        "as-released",
        {"name": "nearest", "database_size": 32, "database_augment": 0, "kmeans_niter": 4},
        "gradient-leakage",
        "proxy-geolocator",
    ],
}


def _scenarios(db: Path) -> set[str]:
    with sqlite3.connect(db) as con:
        return {v for (v,) in con.execute("select value from tags where key = 'vispriv.scenario'")}


def _run(folder: Path, config: Path, empty_store: Path) -> dict[str, dict[str, float]]:
    folder.mkdir()
    shutil.copy(empty_store, folder / "mlflow.db")
    clear_memo()
    result = CliRunner().invoke(cli, ["matrix", str(config), "--quiet", "--tracking-uri",
                                      f"sqlite:///{folder / 'mlflow.db'}", "--cache-dir", str(folder / "cache")])
    assert result.exit_code == 0, result.output
    assert _scenarios(folder / "mlflow.db") == {"image-release", "descriptor-release", "federated-learning",
                                                "album-sharing"}
    return finished_metrics(folder / "mlflow.db")


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def test_timing_names():
    timing = ["utility/encryption_seconds_per_user_round", "attack/train_seconds", "attack/train_images_per_second"]
    assert all(TIMING.search(n) for n in timing)
    assert not any(TIMING.search(n) for n in ["utility/values_encrypted_per_user_round", "images/ssim",
                                              "utility/slot_origin_candidates", "utility/bytes_per_user_round"])


def test_two_runs_of_every_scenario_log_the_same_non_timing_metrics(tmp_path, empty_store):
    config = tmp_path / "all.yaml"
    config.write_text(yaml.safe_dump(CONFIG, sort_keys=False))
    first = _run(tmp_path / "first", config, empty_store)
    second = _run(tmp_path / "second", config, empty_store)
    assert first.keys() == second.keys() and len(first) == 4
    compared = 0
    for cell, metrics in first.items():
        assert metrics.keys() == second[cell].keys()
        for name, value in metrics.items():
            if TIMING.search(name):
                continue
            assert _same(value, second[cell][name]), f"{name} of cell {cell}: {value} vs {second[cell][name]}"
            compared += 1
    assert "utility/slot_origin_candidates" in {n for m in first.values() for n in m}
    assert compared >= 20
