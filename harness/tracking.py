"""MLflow tracking: one experiment per config name, a parent run per matrix invocation,
a child run per cell.

Only the driver process talks to MLflow (executors return plain outcomes), so a sqlite
store never sees concurrent writers. The default store is ``sqlite:///mlflow.db`` in the
working directory; artifacts of a sqlite store live beside it in ``mlartifacts/``.

Child runs carry
  params   the cell's immutable configuration (``dataset.*``, ``defense.*``, ``attack.*``);
  tags     ``vispriv.kind=cell``, scenario, plugin names and versions, labels, cell hash,
           seed, vispriv version and git sha (a checkout's; ``unknown`` for a wheel), device,
           ``vispriv.higher_is_better`` (JSON: metric -> bool), ``vispriv.headline`` (JSON: the
           metrics the plugins declare a report's default view), ``vispriv.anchors`` (JSON: what
           values of a metric mean, ``Metric.anchors``) and ``vispriv.no_leak`` (1: an attack that
           uses nothing the release carries);
  metrics  utility (``utility/...``), attack diagnostics (``attack/...``) and the scores of
           metric plugins (``<key>/<metric>``, e.g. ``images/ssim``);
  artifacts whatever the plugins wrote (grids, CSVs), ``traceback.txt`` for failed cells.
"""

from __future__ import annotations

import fcntl
import functools
import json
import logging
import os
import platform
import socket
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

from vispriv.harness.errors import TrackingError
from vispriv.harness.paths import existing_ancestor

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
CELL = "cell"
MATRIX = "matrix"
CLAIM = "claim"



def _quiet_mlflow_logs() -> None:
    """MLflow logs INFO lines (schema migrations) on every new store: keep stderr for errors."""
    for name in ("mlflow", "mlflow.store.db.utils", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # It logs every failed commit with a traceback before raising; :func:`store_write` reports it in one line.
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)


def default_tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI", DEFAULT_TRACKING_URI)


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI, else ``None``."""
    if not uri.startswith("sqlite:"):
        return None
    parsed = urlparse(uri)
    path = parsed.path
    if uri.startswith("sqlite:////"):
        return Path(path)
    return Path(path.lstrip("/")) if path else None


#: Seconds the probe of an ``http(s)://`` store waits before "cannot open tracking store" (no retries).
HTTP_PROBE_TIMEOUT_S = 10


#: The stores vispriv writes to, named in the message that refuses any other URI.
SUPPORTED_STORES = ("not a supported store; use sqlite:///PATH/mlflow.db (the default is sqlite:///mlflow.db) "
                    "or http://HOST:PORT (an MLflow server)")


def check_store(uri: str, create: bool = True) -> str:
    """Cheap checks of a tracking URI, without importing MLflow; returns ``uri`` or raises :class:`TrackingError`.

    A ``sqlite:///`` store's folder must exist and be writable, and an existing database be
    writable; an ``http(s)://``
    server must accept a TCP connection within :data:`HTTP_PROBE_TIMEOUT_S` (unless a proxy
    is configured for its host, which only MLflow's own probe can go through). With
    ``create=False`` (a command that only reads, such as ``vispriv report``) a sqlite
    database must exist already. Nothing is created here. The CLI runs this before it
    loads any plugin, so a wrong URI is one line in seconds whatever the plugins cost to
    import. Any other URI (a folder path, another scheme) is refused with the supported stores.
    """
    db = sqlite_path(uri)
    if db is not None:
        path = db.expanduser().resolve()
        parent = path.parent
        if not parent.is_dir():
            blocker = existing_ancestor(parent)
            why = f"folder {parent} does not exist" if blocker.is_dir() else f"{blocker} is a file, not a folder"
            raise TrackingError(f"cannot open tracking store {uri}: {why}")
        if not create and not path.exists():
            raise TrackingError(
                f"no tracking store at {path} ({uri}): run `vispriv matrix CONFIG` in {parent} first, "
                "or pass --tracking-uri (or set MLFLOW_TRACKING_URI) to the store of your runs"
            )
        if path.exists() and not os.access(path, os.W_OK):
            raise TrackingError(f"cannot open tracking store {uri}: {path} is not writable")
        if create and not os.access(parent, os.W_OK | os.X_OK):
            raise TrackingError(f"cannot open tracking store {uri}: folder {parent} is not writable "
                                "(the store, its lock and its artifacts live there); choose another --tracking-uri")
    elif uri.startswith(("http://", "https://")):
        _probe_http(uri)
    else:
        raise TrackingError(f"cannot open tracking store {uri}: {SUPPORTED_STORES}")
    return uri


def store_location(uri: str) -> str:
    """``uri`` as a user reads it in a message: a sqlite store with the absolute path of its database."""
    db = sqlite_path(uri)
    if db is None or db.is_absolute():
        return uri
    return f"{uri} ({db.expanduser().resolve()})"


def _probe_http(uri: str) -> None:
    """Raise :class:`TrackingError` when nothing accepts a connection at the host and port of ``uri``."""
    parsed = urlparse(uri)
    host = parsed.hostname
    if not host:
        raise TrackingError(f"cannot open tracking store {uri}: no host in the URI; use http://HOST:PORT")
    try:
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
    except ValueError:
        raise TrackingError(f"cannot open tracking store {uri}: the port is not a number in 1-65535") from None
    if urllib.request.getproxies().get(parsed.scheme) and not urllib.request.proxy_bypass(host):
        return
    try:
        socket.create_connection((host, port), timeout=HTTP_PROBE_TIMEOUT_S).close()
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__)
        raise TrackingError(
            f"cannot open tracking store {uri}: no server answers at {host}:{port} ({reason}); "
            f"start one (mlflow server --port {port}) or fix --tracking-uri / MLFLOW_TRACKING_URI"
        ) from None


@contextmanager
def store_lock(db: Path | None) -> Iterator[None]:
    """An exclusive lock (``flock`` on ``<db>.lock``) serialising whoever holds it across processes; no-op without ``db``."""
    if db is None:
        yield
        return
    with open(db.resolve().with_name(db.name + ".lock"), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextmanager
def _no_http_retries() -> Iterator[None]:
    """MLflow retries an unreachable server for minutes: probe it once, with a short timeout."""
    saved = {k: os.environ.get(k) for k in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT")}
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(HTTP_PROBE_TIMEOUT_S)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@functools.lru_cache(maxsize=1)
def git_sha() -> str:
    """The commit of the vispriv checkout this code runs from, or ``unknown`` (a wheel install:
    then :func:`package_version` says which release ran). A checkout is a git work tree whose
    top level holds this file as ``harness/tracking.py``, so a wheel installed inside some
    other repository does not log that repository's commit."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--show-toplevel", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = out.stdout.split()
    if out.returncode != 0 or len(lines) != 2 or Path(lines[0]).resolve() != here.parent:
        return "unknown"
    return lines[1]


@functools.lru_cache(maxsize=1)
def package_version() -> str:
    """The installed vispriv distribution's version (logged beside :func:`git_sha`)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vispriv")
    except PackageNotFoundError:
        return "unknown"


def version_tags() -> dict[str, str]:
    """Which code ran: ``vispriv.version`` always, ``vispriv.git_sha`` from a checkout (else ``unknown``)."""
    return {"vispriv.version": package_version(), "vispriv.git_sha": git_sha()}


F = TypeVar("F", bound=Callable[..., Any])


def store_write(method: F) -> F:
    """A write to the store that fails (disk full, file-size limit, read-only, server gone) is one-line :class:`TrackingError`.

    Whatever the store holds stays as it was written: a run that cannot be ended stays
    RUNNING and the next ``vispriv matrix`` of its config on this host ends it KILLED.
    """

    @functools.wraps(method)
    def wrapper(self: Tracker, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except TrackingError:
            raise
        except Exception as exc:
            text = str(exc).strip()
            msg = text.splitlines()[0] if text else type(exc).__name__
            raise TrackingError(
                f"tracking store {self.uri} refused a write ({msg[:200]}); everything logged before it is kept: "
                "free the space or fix the store, then rerun with --resume"
            ) from exc

    return wrapper  # type: ignore[return-value]


class Tracker:
    """A thin layer over :class:`mlflow.MlflowClient` for the harness's run layout."""

    def __init__(self, uri: str | None = None, create: bool = True) -> None:
        """Open the store at ``uri``; with ``create=False`` a sqlite store that does not exist is an error, not a new store."""
        self.uri = uri or default_tracking_uri()
        self._client = self._open(create)

    def _open(self, create: bool) -> Any:
        db = sqlite_path(self.uri)
        check_store(self.uri, create=create)
        try:
            from mlflow.tracking import MlflowClient

            _quiet_mlflow_logs()
            # A server's client prints two "View run" lines per ended run on stdout: the CLI prints one link itself.
            os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
            # One process at a time creates (migrates) a new sqlite store; an HTTP server is probed without retries.
            with store_lock(db), _no_http_retries():
                client = MlflowClient(tracking_uri=self.uri)
                client.search_experiments(max_results=1)
        except Exception as exc:  # noqa: BLE001 -- any backend failure is one line for the user
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise TrackingError(f"cannot open tracking store {self.uri}: {_sentences(msg, 300)}") from None
        return client

    @property
    def client(self) -> Any:
        return self._client

    def experiment_id(self, name: str, create: bool = True) -> str | None:
        exp = self._client.get_experiment_by_name(name)
        if exp is not None:
            return exp.experiment_id
        if not create:
            return None
        db = sqlite_path(self.uri)
        location = None
        if db is not None:
            location = (db.resolve().parent / "mlartifacts" / name.replace("/", "_")).as_uri()
        try:
            return self._client.create_experiment(name, artifact_location=location)
        except Exception:
            exp = self._client.get_experiment_by_name(name)
            if exp is None:
                raise
            return exp.experiment_id

    # -- runs ----------------------------------------------------------------------
    @store_write
    def start_parent(self, experiment_id: str, name: str, tags: dict[str, str], params: dict[str, Any]) -> str:
        run = self._client.create_run(
            experiment_id, run_name=name, tags={"vispriv.kind": MATRIX, **version_tags(), **tags}
        )
        self.log_params(run.info.run_id, params)
        return run.info.run_id

    @store_write
    def start_child(
        self, experiment_id: str, parent_id: str, name: str, tags: dict[str, str], start_time: int | None = None
    ) -> str:
        """A cell's run; ``start_time`` (epoch ms) is when the cell started, else now."""
        run = self._client.create_run(
            experiment_id,
            run_name=name,
            start_time=start_time,
            tags={
                "mlflow.parentRunId": parent_id,
                "vispriv.kind": CELL,
                **version_tags(),
                "vispriv.host": platform.node(),
                **tags,
            },
        )
        return run.info.run_id

    @store_write
    def log_params(self, run_id: str, params: dict[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(k, _param_value(v)) for k, v in params.items()]
        for i in range(0, len(items), 100):
            self._client.log_batch(run_id, params=items[i : i + 100])

    @store_write
    def log_metrics(self, run_id: str, metrics: dict[str, float]) -> None:
        import time

        from mlflow.entities import Metric as MlflowMetric

        now = int(time.time() * 1000)
        items = [MlflowMetric(k, float(v), now, 0) for k, v in metrics.items() if _is_number(v)]
        for i in range(0, len(items), 500):
            self._client.log_batch(run_id, metrics=items[i : i + 500])

    @store_write
    def set_tags(self, run_id: str, tags: dict[str, str]) -> None:
        for key, value in tags.items():
            self._client.set_tag(run_id, key, value)

    @store_write
    def log_artifacts(self, run_id: str, folder: Path) -> None:
        if folder.is_dir() and any(folder.iterdir()):
            self._client.log_artifacts(run_id, str(folder))

    @store_write
    def log_artifact(self, run_id: str, path: Path, folder: str) -> None:
        """Copy the file ``path`` into the run's artifacts under ``folder``."""
        self._client.log_artifact(run_id, str(path), artifact_path=folder)

    @store_write
    def log_text(self, run_id: str, text: str, name: str) -> None:
        self._client.log_text(run_id, text, name)

    @store_write
    def end(self, run_id: str, status: str, end_time: int | None = None) -> None:
        """Terminate ``run_id``; ``end_time`` (epoch ms) is when its work ended, else now."""
        self._client.set_terminated(run_id, status=status, end_time=end_time)

    @store_write
    def delete_run(self, run_id: str) -> None:
        self._client.delete_run(run_id)

    # -- claims (stores without a claims file, see vispriv.harness.claims) ------------
    @store_write
    def start_claim(self, experiment_id: str, parent_id: str, cell_hash: str, owner: str) -> str:
        """A claim run of ``cell_hash`` (tag ``vispriv.kind=claim``), nested under the matrix run ``parent_id``."""
        run = self._client.create_run(
            experiment_id,
            run_name=f"claim {cell_hash}",
            tags={"mlflow.parentRunId": parent_id, "vispriv.kind": CLAIM, "vispriv.cell_hash": cell_hash,
                  "vispriv.owner": owner},
        )
        return run.info.run_id

    def claim_runs(self, experiment_id: str, cell_hash: str) -> list[Any]:
        """The live (not deleted) claim runs of ``cell_hash``."""
        return self._search(experiment_id, f"tags.`vispriv.kind` = '{CLAIM}' and tags.`vispriv.cell_hash` = '{cell_hash}'")

    # -- queries -------------------------------------------------------------------
    def cell_finished(self, experiment_id: str, cell_hash: str) -> bool:
        """Whether a FINISHED run of the cell ``cell_hash`` exists."""
        return bool(self._search(experiment_id, f"tags.`vispriv.kind` = '{CELL}' and tags.`vispriv.cell_hash` = "
                                                f"'{cell_hash}' and attributes.status = 'FINISHED'"))

    def finished_cell_hashes(self, experiment_id: str) -> set[str]:
        runs = self.cell_runs(experiment_id, status="FINISHED")
        return {r.data.tags.get("vispriv.cell_hash", "") for r in runs}

    def cell_runs(self, experiment_id: str, status: str | None = None, parent_id: str | None = None) -> list[Any]:
        clauses = [f"tags.`vispriv.kind` = '{CELL}'"]
        if status:
            clauses.append(f"attributes.status = '{status}'")
        if parent_id:
            clauses.append(f"tags.`mlflow.parentRunId` = '{parent_id}'")
        return self._search(experiment_id, " and ".join(clauses))

    def parent_runs(self, experiment_id: str, status: str | None = None) -> list[Any]:
        status_clause = f" and attributes.status = '{status}'" if status else ""
        return self._search(experiment_id, f"tags.`vispriv.kind` = '{MATRIX}'{status_clause}")

    def _search(self, experiment_id: str, filter_string: str) -> list[Any]:
        out, token = [], None
        while True:
            page = self._client.search_runs(
                [experiment_id], filter_string=filter_string, max_results=1000, page_token=token,
                order_by=["attributes.start_time DESC"],
            )
            out.extend(page)
            token = page.token
            if not token:
                return out


def _sentences(text: str, limit: int) -> str:
    """``text`` cut to its whole sentences within ``limit`` characters (its first ``limit`` and '...' if none ends there)."""
    if len(text) <= limit:
        return text
    end = text.rfind(". ", 0, limit)
    return text[: end + 1] if end > 0 else text[: limit - 3] + "..."


def _param_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 6000 else text[:5997] + "..."


def _is_number(value: Any) -> bool:
    """Whether ``value`` can be logged as a metric (NaN and infinities included: MLflow keeps them)."""
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True
