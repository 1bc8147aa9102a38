"""Tracking URIs, checked before MLflow loads: sqlite paths, ``http://`` and ``https://`` stores, refusals word for word."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from vispriv.harness.errors import TrackingError
from vispriv.harness.tracking import SUPPORTED_STORES, check_store, sqlite_path, store_location

PROXIES = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY")


@pytest.fixture
def no_proxy(monkeypatch):
    for name in PROXIES:
        monkeypatch.delenv(name, raising=False)


def _refusal(uri: str, create: bool = True) -> str:
    with pytest.raises(TrackingError) as err:
        check_store(uri, create=create)
    return str(err.value)


def test_sqlite_paths_relative_and_absolute():
    assert sqlite_path("sqlite:///mlflow.db") == Path("mlflow.db")
    assert sqlite_path("sqlite:///runs/mlflow.db") == Path("runs/mlflow.db")
    absolute = sqlite_path("sqlite:////tmp/x/mlflow.db")
    assert absolute.is_absolute() and absolute.resolve() == Path("/tmp/x/mlflow.db")
    assert sqlite_path("http://127.0.0.1:5000") is None
    assert store_location("http://h:1") == "http://h:1"
    assert store_location("sqlite:////abs/m.db") == "sqlite:////abs/m.db"


def test_an_https_store_is_probed_on_port_443_by_default(no_proxy):
    assert _refusal("https://127.0.0.1") == (
        "cannot open tracking store https://127.0.0.1: no server answers at 127.0.0.1:443 (Connection refused); "
        "start one (mlflow server --port 443) or fix --tracking-uri / MLFLOW_TRACKING_URI")
    assert "127.0.0.1:80 " in _refusal("http://127.0.0.1")


def test_an_https_store_that_accepts_a_connection_passes(no_proxy):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        uri = f"https://127.0.0.1:{server.getsockname()[1]}"
        assert check_store(uri) == uri
        assert check_store(uri.replace("https", "http"), create=False) == uri.replace("https", "http")


def test_an_https_store_behind_a_proxy_is_left_to_mlflow(monkeypatch, no_proxy):
    monkeypatch.setenv("https_proxy", "http://127.0.0.1:9")
    assert check_store("https://tracking.invalid") == "https://tracking.invalid"


def test_bad_uris_are_one_line_each(no_proxy, tmp_path):
    assert _refusal("https://") == "cannot open tracking store https://: no host in the URI; use http://HOST:PORT"
    assert _refusal("http://127.0.0.1:70000") == (
        "cannot open tracking store http://127.0.0.1:70000: the port is not a number in 1-65535")
    assert _refusal(str(tmp_path)) == f"cannot open tracking store {tmp_path}: {SUPPORTED_STORES}"
    assert _refusal("ftp://h/x") == f"cannot open tracking store ftp://h/x: {SUPPORTED_STORES}"
    missing = tmp_path / "none" / "m.db"
    assert _refusal(f"sqlite:///{missing}") == f"cannot open tracking store sqlite:///{missing}: folder {missing.parent} does not exist"
    absent = tmp_path / "m.db"
    assert _refusal(f"sqlite:///{absent}", create=False).startswith(f"no tracking store at {absent} (sqlite:///{absent}): ")
    assert check_store(f"sqlite:///{absent}") == f"sqlite:///{absent}"
