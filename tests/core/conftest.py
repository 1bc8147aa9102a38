"""Fixtures of the core's tests: a toy plugin distribution on the path, a CLI runner."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from cli_fork import run_vispriv
from core_helpers import SITE_OK

from vispriv.harness.execute import clear_memo
from vispriv.harness.tracking import Tracker


@pytest.fixture
def toy_registry(monkeypatch):
    """A registry holding the built-ins and the toy plugins (loaded through their entry point)."""
    from vispriv.harness.registry import load_registry

    monkeypatch.syspath_prepend(str(SITE_OK))
    monkeypatch.delenv("VISPRIV_PLUGINS", raising=False)
    return load_registry()


@pytest.fixture
def write_config(tmp_path):
    def write(data: dict, name: str = "config.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write


@pytest.fixture
def run_cli(tmp_path):
    """Run ``vispriv ...`` as a process of its own (:mod:`cli_fork`) in ``tmp_path`` with the toy plugins on the path."""

    def run(*args: str, sites=(SITE_OK,), env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
        full_env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(s) for s in sites)}
        # Load only what these tests use: the heavy scenario plugins have their own tests.
        full_env["VISPRIV_PLUGINS"] = "toy,broken,metrics,image-release"
        full_env.update(env or {})
        return run_vispriv(args, cwd=tmp_path, env=full_env, timeout=timeout)

    return run


@pytest.fixture(scope="session")
def empty_store(tmp_path_factory) -> Path:
    """A freshly migrated MLflow sqlite store, made once (migrations take seconds) and copied per test."""
    path = tmp_path_factory.mktemp("store") / "mlflow.db"
    Tracker(f"sqlite:///{path}")
    return path


@pytest.fixture
def tracker(tmp_path, empty_store):
    clear_memo()
    db = tmp_path / "mlflow.db"
    shutil.copy(empty_store, db)
    return Tracker(f"sqlite:///{db}")
