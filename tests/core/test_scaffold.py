"""`vispriv new-plugin` makes a package that, pip-installed, joins a matrix untouched."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml


def _pip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=300)


def test_scaffolded_defense_installs_lists_and_runs(run_cli, tmp_path):
    made = run_cli("new-plugin", "gauss-noise", "--kind", "defense")
    assert made.returncode == 0, made.stderr
    root = tmp_path / "gauss-noise"
    assert (root / "pyproject.toml").exists() and (root / "vispriv_gauss_noise" / "plugin.py").exists()
    again = run_cli("new-plugin", "gauss-noise", "--kind", "defense")
    assert again.returncode == 2 and "already exists" in again.stderr
    # Installed into a folder of its own, put on the subprocesses' path: installing into the
    # shared environment would show its entry point to tests running beside this one in other
    # processes, which cannot import it (their sys.path was fixed at start).
    site = tmp_path / "site"
    install = _pip("install", "-q", "--no-deps", "--no-build-isolation", "--target", str(site), str(root))
    assert install.returncode == 0, install.stderr
    env = {"VISPRIV_PLUGINS": "gauss-noise,metrics,image-release"}
    listed = run_cli("plugins", "--kind", "defense", "--json", sites=(site,), env=env)
    plugin = next(p for p in json.loads(listed.stdout)["plugins"] if p["name"] == "gauss-noise")
    assert plugin["source"] == "gauss-noise (vispriv-gauss-noise)"
    config = {
        "name": "scaffold",
        "datasets": [{"name": "sample-images", "size": 16, "n_private": 2}],
        "defenses": ["none", {"name": "gauss-noise", "sigma": [0.05, 0.3]}],
        "attacks": ["as-released"],
        "metrics": ["ssim"],
    }
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(config))
    ran = run_cli("matrix", "m.yaml", "--quiet", sites=(site,), env=env)
    assert ran.returncode == 0, ran.stderr
    assert "3 cells finished, 0 failed" in ran.stdout
    report = run_cli("report", "--experiment", "scaffold", "--metric", "ssim", sites=(site,), env=env)
    assert "gauss-noise(sigma=0.05)" in report.stdout and "gauss-noise(sigma=0.3)" in report.stdout
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(root / "tests")],
                           capture_output=True, text=True, timeout=300, cwd=root,
                           env={**os.environ, "PYTHONPATH": str(site), "VISPRIV_PLUGINS": "gauss-noise"})
    assert "2 passed" in tests.stdout, tests.stdout + tests.stderr


@pytest.mark.parametrize("kind", ["attack", "metric", "dataset"])
def test_every_kind_scaffolds_valid_python(run_cli, tmp_path, kind):
    made = run_cli("new-plugin", f"my-{kind}", "--kind", kind)
    assert made.returncode == 0, made.stderr
    source = (tmp_path / f"my-{kind}" / f"vispriv_my_{kind}" / "plugin.py").read_text()
    compile(source, "plugin.py", "exec")
    assert f"vispriv_register_{kind}s" in source


def test_bad_plugin_name(run_cli):
    out = run_cli("new-plugin", "Bad Name", "--kind", "defense")
    assert out.returncode == 2 and "lowercase" in out.stderr
