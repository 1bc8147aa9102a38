"""Run ``vispriv`` with one injected fault at a deterministic point (the fault-injection suite's subprocess).

    python driver.py FAULT[:N] vispriv-args...

The fault is applied by wrapping one of the real writers of this process, then the real
CLI runs (``vispriv.harness.cli.main``); nothing else is replaced. Faults:

``none``
    no fault (the same process layout for reference runs).
``kill-cache-write:N``
    the N-th cache entry written (1-based) gets half of its payload bytes into its
    temporary file, then the process SIGKILLs itself: a crash mid-write.
``kill-cache-rename:N``
    the N-th cache entry's payload is renamed into place, then SIGKILL before its
    checksum file is: a crash between the two renames.
``kill-artifact:N``
    the N-th ``log_artifacts`` of a cell run copies half of the cell's first artifact file
    into the run's artifact folder (as MLflow's copy would have got that far), then SIGKILL.
``readonly-cache:N``
    after the N-th cell is logged, the cache folder (env ``FAULT_CACHE_DIR``) becomes
    read-only: a read-only bind mount (as root, inside the private mount namespace the test
    starts this process in with ``unshare -m``), else ``chmod a-w`` on every folder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path


def _kill() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _nth(n: int):  # type: ignore[no-untyped-def]
    """A counter that is true on its n-th call only."""
    calls = [0]

    def hit() -> bool:
        calls[0] += 1
        return calls[0] == n

    return hit


def _kill_cache_write(n: int) -> None:
    from vispriv.harness import cache_io

    real, hit = cache_io.store, _nth(n)

    def store(payload, namespace, key, write):  # type: ignore[no-untyped-def]
        if not hit():
            return real(payload, namespace, key, write)

        def half_then_die(tmp: Path) -> None:
            write(tmp)
            data = tmp.read_bytes()
            tmp.write_bytes(data[: len(data) // 2])
            _kill()

        return real(payload, namespace, key, half_then_die)

    cache_io.store = store


def _kill_cache_rename(n: int) -> None:
    from vispriv.harness import cache_io

    real_store, real_replace, hit = cache_io.store, os.replace, _nth(n)

    def store(payload, namespace, key, write):  # type: ignore[no-untyped-def]
        if not hit():
            return real_store(payload, namespace, key, write)

        def replace(src, dst):  # type: ignore[no-untyped-def]
            real_replace(src, dst)
            if Path(dst) == payload:
                _kill()

        cache_io.os.replace = replace  # type: ignore[attr-defined]
        try:
            return real_store(payload, namespace, key, write)
        finally:
            cache_io.os.replace = real_replace  # type: ignore[attr-defined]

    cache_io.store = store


def _kill_artifact(n: int) -> None:
    from mlflow.store.artifact.local_artifact_repo import LocalArtifactRepository

    from vispriv.harness import runner

    real_log_cell, hit = runner._log_cell, _nth(n)
    real_log_artifacts = LocalArtifactRepository.log_artifacts

    def log_artifacts(self, local_dir, artifact_path=None):  # type: ignore[no-untyped-def]
        first = sorted(p for p in Path(local_dir).rglob("*") if p.is_file())[0]
        dest = Path(self.artifact_dir) / (artifact_path or "") / first.relative_to(local_dir)
        dest.parent.mkdir(parents=True, exist_ok=True)
        data = first.read_bytes()
        dest.write_bytes(data[: len(data) // 2])
        _kill()

    def log_cell(*args, **kwargs):  # type: ignore[no-untyped-def]
        if hit():
            LocalArtifactRepository.log_artifacts = log_artifacts
        try:
            return real_log_cell(*args, **kwargs)
        finally:
            LocalArtifactRepository.log_artifacts = real_log_artifacts

    runner._log_cell = log_cell


def _readonly_cache(n: int) -> None:
    from vispriv.harness import runner

    folder = Path(os.environ["FAULT_CACHE_DIR"])
    real_log_cell, hit = runner._log_cell, _nth(n)

    def log_cell(*args, **kwargs):  # type: ignore[no-untyped-def]
        out = real_log_cell(*args, **kwargs)
        if hit():
            if os.geteuid() == 0:
                subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True)
                subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True)
            else:
                for sub in [folder, *(p for p in folder.rglob("*") if p.is_dir())]:
                    sub.chmod(0o555)
        return out

    runner._log_cell = log_cell


FAULTS = {
    "kill-cache-write": _kill_cache_write,
    "kill-cache-rename": _kill_cache_rename,
    "kill-artifact": _kill_artifact,
    "readonly-cache": _readonly_cache,
}


def main() -> None:
    fault, _, n = sys.argv[1].partition(":")
    if fault != "none":
        FAULTS[fault](int(n or 1))
    from vispriv.harness.cli import main as cli_main

    sys.argv = ["vispriv", *sys.argv[2:]]
    cli_main()


if __name__ == "__main__":
    main()
