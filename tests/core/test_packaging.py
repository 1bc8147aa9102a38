"""The distribution installs one import package, ``vispriv``: no bare ``harness`` or ``plugins``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11; the package itself supports 3.10

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _python(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VISPRIV_PLUGINS")}
    full_env.update(env or {})
    return subprocess.run([sys.executable, *args], cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=300)


def _source_packages() -> set[str]:
    """Every folder with an ``__init__.py`` under the mapped source roots, as its import name."""
    found = set()
    for name, folder in PYPROJECT["tool"]["setuptools"]["package-dir"].items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base).parts
            found.add(".".join((name, *rel)))
    return found


def test_every_source_package_is_listed_under_vispriv():
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    assert "vispriv.examples" in listed  # the example configs ship with the wheel
    assert _source_packages() == listed
    assert all(p == "vispriv" or p.startswith("vispriv.") for p in listed)


def test_entry_points_name_only_vispriv_modules():
    targets = [PYPROJECT["project"]["scripts"]["vispriv"], *PYPROJECT["project"]["entry-points"]["vispriv"].values()]
    assert all(t.startswith("vispriv.") for t in targets), targets


def test_bare_names_are_not_installed(tmp_path):
    probe = _python("-c", "import importlib.util as u; print(u.find_spec('harness'), u.find_spec('plugins'))",
                    cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == ["None", "None"]


def test_python_m_vispriv_lists_every_builtin_beside_foreign_harness_and_plugins(tmp_path):
    """A research repo with its own ``plugins/`` and ``harness/`` packages on the path."""
    for package in ("harness", "plugins", "plugins/image_release", "plugins/metrics"):
        (tmp_path / package).mkdir(parents=True)
        (tmp_path / package / "__init__.py").write_text(f"raise ImportError('the user’s own {package}')\n")
    listed = _python("-m", "vispriv", "plugins", "--json", cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)})
    assert listed.returncode == 0, listed.stderr
    assert "warning" not in listed.stderr, listed.stderr
    sources = {p["source"] for p in json.loads(listed.stdout)["plugins"]}
    builtins = {f"{name} (vispriv)" for name in PYPROJECT["project"]["entry-points"]["vispriv"]}
    assert builtins <= sources, builtins - sources


def test_python_m_vispriv_names_itself(tmp_path):
    shown = _python("-m", "vispriv", "--help", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("Usage: vispriv ")
