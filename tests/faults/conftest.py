"""Fixtures of the fault-injection suite: a migrated empty store and clean reference runs, made once."""

from __future__ import annotations

from pathlib import Path

import pytest
from fault_helpers import DESCRIPTOR, copy_store, finished_metrics, vispriv, write_config

from vispriv.harness.tracking import Tracker


@pytest.fixture(scope="session")
def empty_store(tmp_path_factory) -> Path:
    """A freshly migrated MLflow sqlite store (migrations take seconds), copied per test."""
    path = tmp_path_factory.mktemp("faults-store") / "mlflow.db"
    Tracker(f"sqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def descriptor_reference(tmp_path_factory, empty_store) -> tuple[Path, dict[str, dict[str, float]]]:
    """A clean run of the two-cell descriptor config: its folder (store, cache) and metrics per cell hash."""
    folder = tmp_path_factory.mktemp("faults-reference")
    copy_store(empty_store, folder)
    proc = vispriv(folder, write_config(folder, DESCRIPTOR))
    assert proc.returncode == 0, proc.stderr
    metrics = finished_metrics(folder / "mlflow.db")
    assert len(metrics) == 2 and all(metrics.values())
    return folder, metrics
