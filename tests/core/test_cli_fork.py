"""The tests' forked ``vispriv`` processes (tests/cli_fork.py) answer as fresh interpreters do."""

from __future__ import annotations

import os
import subprocess
import sys

import cli_fork
import pytest
from cli_fork import run_vispriv
from core_helpers import SITE_OK


def _fresh(args: list[str], cwd, env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vispriv", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("args", [["--help"], ["plugins", "toy-noise"], ["matrix", "missing.yaml"],
                                  ["report", "--experiment", "none-here"]],
                         ids=["help", "toy-plugin-page", "missing-config", "no-store"])
def test_a_forked_call_gives_what_a_fresh_interpreter_gives(tmp_path, args):
    """Exit status, stdout and stderr are the same, a toy plugin found through PYTHONPATH included."""
    env = {**os.environ, "PYTHONPATH": str(SITE_OK), "VISPRIV_PLUGINS": "toy,metrics"}
    forked, fresh = run_vispriv(args, cwd=tmp_path, env=env), _fresh(args, tmp_path, env)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)


def test_the_environment_and_folder_are_the_calls_own(tmp_path):
    """A variable set for one call is gone in the next; each call runs in its own folder."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "c.yaml").write_text("name: t\ndatasets: [sample-images]\ndefenses: [pixelate]\nattacks: [as-released]\n")
    only_metrics = {**os.environ, "VISPRIV_PLUGINS": "metrics"}
    everything = {k: v for k, v in os.environ.items() if k != "VISPRIV_PLUGINS"}
    first = run_vispriv(["plugins"], cwd=tmp_path, env=only_metrics)
    second = run_vispriv(["plugins"], cwd=tmp_path, env=everything)
    assert "image-release" not in first.stdout and "image-release" in second.stdout
    assert first.stdout == _fresh(["plugins"], tmp_path, only_metrics).stdout
    assert run_vispriv(["matrix", "c.yaml", "--dry-run"], cwd=tmp_path / "a", env=everything).returncode == 0
    missing = run_vispriv(["matrix", "c.yaml", "--dry-run"], cwd=tmp_path / "b", env=everything)
    assert missing.returncode == 2 and "c.yaml" in missing.stderr


@pytest.mark.parametrize(("variable", "forked"), [("OMP_NUM_THREADS", False), ("OPENBLAS_VERBOSE", False),
                                                  ("PYTHONHASHSEED", False), ("PYTHONPATH", True),
                                                  ("VISPRIV_TOY_STARTED", True)])
def test_a_call_changing_what_libraries_read_at_load_runs_fresh(tmp_path, variable, forked):
    """A forked child's parent is the server; a fresh interpreter's is this process."""
    (tmp_path / "parent.py").write_text("import os\nprint(os.getppid())\n")
    env = {**os.environ, variable: os.environ.get(variable, "") + "7"}
    out = run_vispriv([], cwd=tmp_path, env=env, script=tmp_path / "parent.py")
    assert out.returncode == 0, out.stderr
    assert (int(out.stdout) != os.getpid()) is forked


def test_a_call_past_its_timeout_is_killed_and_raises(tmp_path):
    (tmp_path / "slow.py").write_text("import time\ntime.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        run_vispriv([], cwd=tmp_path, timeout=1, script=tmp_path / "slow.py")


def test_a_server_with_a_thread_is_not_forked_from(tmp_path, monkeypatch):
    """Imports that start a thread make the server refuse: every call then runs fresh."""
    server = cli_fork._Server()
    monkeypatch.setattr(cli_fork, "_SERVER", server)
    monkeypatch.setattr(cli_fork, "PRELOAD", ())
    monkeypatch.setattr(cli_fork, "SERVER", "import threading, time\nthreading.Thread(target=time.sleep, args=(30,), "
                                            "daemon=True).start()\n" + cli_fork.SERVER)
    out = run_vispriv(["--help"], cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.startswith("Usage: vispriv ")
    assert server.unusable == "2 threads after the imports"
