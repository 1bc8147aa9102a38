"""Helpers shared by the core's tests (a module of its own: two conftest.py files cannot both be imported as ``conftest``)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
SITE_OK = FIXTURES / "site_ok"
SITE_BROKEN = FIXTURES / "site_broken"


def toy_config(**overrides) -> dict:
    config = {
        "name": "toy",
        "seed": 1,
        "datasets": [{"name": "toy-images", "n": 3}],
        "defenses": [{"name": "toy-noise", "sigma": [0.05, 0.2]}, {"name": "toy-histogram"}],
        "attacks": [{"name": "toy-denoise"}],
    }
    config.update(overrides)
    return config


def placeholder_roots(path: Path) -> list[tuple[str, str]]:
    """The placeholder folders of a shipped example: ``(key, /path/to/...)`` of each ``*root:`` line."""
    return re.findall(r"^\s+(\w*root): (/path/to/\S+)", path.read_text(), re.MULTILINE)


def placeholder_files(path: Path) -> list[tuple[str, str]]:
    """The placeholder files of a shipped example: ``(key, /path/to/...)`` of each ``features:``,
    ``attributes:`` or ``partition:`` line (the deep-feature inputs) and each ``capture:`` line (a Flower
    capture folder, whose files are read when the config is built)."""
    return re.findall(r"^\s+(features|attributes|partition|capture): (/path/to/\S+)", path.read_text(), re.MULTILINE)


def free_port() -> int:
    """A TCP port of the loopback that nothing listens on (right now)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_http(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 240) -> None:
    """Wait until ``url`` answers 200, failing the test when ``proc`` exits first or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s  # mlflow's import and store migration are slow on a loaded machine
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{proc.args[:4]} exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    pytest.fail(f"{url} did not answer within {timeout_s:.0f}s: {log.read_text()[-2000:]}")


def stop(proc: subprocess.Popen) -> None:
    """End ``proc`` and its process group (started with ``start_new_session=True``)."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


@contextmanager
def mlflow_server(folder: Path, backend_uri: str | None = None) -> Iterator[str]:
    """A real ``mlflow server`` on a free loopback port (artifacts proxied into ``folder``); yields its URL.

    The backend store is ``backend_uri``, else a new ``sqlite:///`` file in ``folder``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = folder / "server.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
             "--backend-store-uri", backend_uri or f"sqlite:///{folder / 'server.db'}",
             "--artifacts-destination", str(folder / "artifacts")],
            cwd=folder, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        try:
            wait_for_http(url + "/health", proc, log_path)
            yield url
        finally:
            stop(proc)
