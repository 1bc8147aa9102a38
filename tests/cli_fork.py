"""``python -m vispriv ARGS`` for the tests, in a process forked from a warm one.

Each CLI test used to start a fresh interpreter and import vispriv, torch and MLflow again
(2-3 s a call, most of the suite's time). Here one server process per test worker imports
them once and forks a child per call: the child is still a process of its own (its own exit
status, stdout and stderr files, working folder, environment, ``PYTHONPATH`` entries on
``sys.path``, process group killed at the timeout), so a test sees what ``subprocess.run``
would show it.

Falls back to a real ``subprocess.run`` where a fork could differ from a fresh interpreter:
no ``os.fork`` (Windows), ``VISPRIV_TEST_FORK=0``, a server whose imports started a thread
(its locks would stay held in the children), or a call whose environment changes a variable
libraries read when they are imported (thread counts, CPU kernels). Tests that
signal the process (SIGKILL, Ctrl-C) or race two processes keep ``subprocess.Popen``.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

#: Imported once by the server: what the commands import (the plugins' modules come with the registry).
PRELOAD = ("mlflow", "mlflow.tracking", "numpy", "torch", "torch.export", "torch.func", "lightning", "kornia", "faiss",
           "skimage.metrics", "sklearn.metrics", "sklearn.datasets", "scipy.optimize", "cvxpy", "phe")

#: Prefixes of the variables that the native libraries (OpenMP, MKL, OpenBLAS/GotoBLAS, ATen) and
#: Python read once, when they load: a call that sets one of them otherwise than the server runs fresh.
IMPORT_TIME_PREFIXES = ("OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_", "GOTO", "ATEN_", "PYTHON", "VIRTUAL_ENV")
#: ...except these, which the child applies itself.
APPLIED_IN_CHILD = ("PYTHONPATH",)

SERVER = r'''
import atexit, importlib, importlib.util, json, os, runpy, signal, sys, threading, time, traceback

from vispriv.harness.cli import main
from vispriv.harness.registry import load_registry
# What the commands import, once, here: the libraries they run on and the plugins' modules.
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except ImportError:
        pass
os.environ.pop("VISPRIV_PLUGINS", None)
load_registry()  # imports every built-in plugin module; each child builds its own registry

BASE_PATH = sys.path[1:]
ARGV0 = importlib.util.find_spec("vispriv.__main__").origin  # sys.argv[0] under `python -m vispriv`
replies = os.fdopen(os.dup(1), "w")
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
if threading.active_count() != 1:  # a thread's locks would stay held in every child: no forks from here
    replies.write(json.dumps({"ready": False, "why": f"{threading.active_count()} threads after the imports"}) + "\n")
    replies.flush()
    sys.exit(0)
replies.write(json.dumps({"ready": True}) + "\n")
replies.flush()


def child(req):
    code = 1
    try:
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
        os.dup2(os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
        os.setpgid(0, 0)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        extra = [p for p in req["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:] = [os.getcwd(), *extra, *BASE_PATH]  # as `python -m` in that folder with that PYTHONPATH
        importlib.invalidate_caches()
        sys.argv = [req["script"] or ARGV0, *req["args"]]
        try:
            if req["script"]:  # `python SCRIPT ARGS`: the script's folder first on the path, as python puts it
                sys.path[0] = os.path.dirname(os.path.abspath(req["script"]))
                runpy.run_path(req["script"], run_name="__main__")
            else:
                main(prog_name="vispriv")
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                code = 1
    except BaseException:  # noqa: BLE001 -- shown as an uncaught exception would be
        traceback.print_exc()
        code = 1
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        child(req)
    deadline = time.monotonic() + req["timeout"]
    timed_out = False
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            timed_out = True
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, status = os.waitpid(pid, 0)
            break
        time.sleep(0.005)
    replies.write(json.dumps({"rc": os.waitstatus_to_exitcode(status), "timed_out": timed_out}) + "\n")
    replies.flush()
'''


class _Server:
    """One warm server per test process, started on first use, stopped at exit."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.env: dict[str, str] = {}
        self.unusable = ""  # why this process runs every call fresh (the server could not fork safely)

    def start(self) -> subprocess.Popen | None:
        """The running server, started if needed; ``None`` when it cannot fork safely here."""
        if self.unusable:
            return None
        if self.proc is None or self.proc.poll() is not None:
            self.env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            self.proc = subprocess.Popen([sys.executable, "-c", SERVER, json.dumps(PRELOAD)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         env=self.env, text=True, cwd=tempfile.gettempdir())
            atexit.register(self.stop)
            hello = json.loads(self.proc.stdout.readline() or '{"ready": false, "why": "the server did not start"}')
            if not hello["ready"]:
                self.unusable = hello["why"]
                self.stop()
                return None
        return self.proc

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        elif self.proc is not None:
            self.proc.stdin.close()


_SERVER = _Server()


def _import_time(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(IMPORT_TIME_PREFIXES) and k not in APPLIED_IN_CHILD}


def _forkable(env: Mapping[str, str]) -> bool:
    """Whether a child forked from the server sees what a fresh interpreter with ``env`` would (the server
    started, or will start, with the environment it holds or this process's own)."""
    if not hasattr(os, "fork") or os.environ.get("VISPRIV_TEST_FORK", "1") == "0":
        return False
    running = _SERVER.proc is not None and _SERVER.proc.poll() is None
    server_env = _SERVER.env if running else os.environ
    return _import_time(env) == _import_time(server_env)


def run_vispriv(args: Sequence[str], cwd: str | Path, env: Mapping[str, str] | None = None,
                timeout: float = 600, script: str | Path | None = None) -> subprocess.CompletedProcess:
    """What ``subprocess.run([python, -m, vispriv, *args], cwd, env, capture_output, text, timeout)`` returns;
    with ``script``, what ``python SCRIPT *args`` returns (a test's own driver around the CLI)."""
    args = [str(a) for a in args]
    env = dict(os.environ if env is None else env)
    command = [sys.executable, *([str(script)] if script else ["-m", "vispriv"]), *args]
    if not Path(cwd).is_dir():  # as subprocess.run: refused before any process starts
        raise NotADirectoryError(f"not a folder to run in: {cwd}")
    if not _forkable(env):
        return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    with tempfile.TemporaryDirectory() as tmp, _SERVER.lock:
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        server = _SERVER.start()
        if server is None:
            return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        request = {"args": args, "cwd": str(Path(cwd).resolve()), "env": env, "timeout": timeout,
                   "stdout": str(out), "stderr": str(err),
                   "script": str(Path(script).resolve()) if script else None}
        server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        line = server.stdout.readline()
        if not line:
            raise RuntimeError(f"the vispriv test server died (exit {server.wait()})")
        reply = json.loads(line)
        stdout, stderr = out.read_text(errors="replace"), err.read_text(errors="replace")
    if reply["timed_out"]:
        raise subprocess.TimeoutExpired(command, timeout, output=stdout, stderr=stderr)
    return subprocess.CompletedProcess(command, reply["rc"], stdout, stderr)
