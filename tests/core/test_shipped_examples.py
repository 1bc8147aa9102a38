"""Every shipped example (`vispriv examples`) is a valid matrix: a typo in one is caught here,
not by the user who runs it for half an hour. Examples over the user's own folders
(``root: /path/to/...``) stop at that placeholder with one config error naming it, before
any run exists; with the root set as their header says (``--set datasets.0.root=...``, here
an empty folder) they build."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from core_helpers import placeholder_files, placeholder_roots

from vispriv.harness.config import load_config
from vispriv.harness.errors import ConfigError, VisprivError
from vispriv.harness.matrix import build_matrix
from vispriv.harness.registry import load_registry

ROOT = Path(__file__).resolve().parents[2] / "examples"
EXAMPLES = sorted(ROOT.rglob("*.yaml"))  # examples/*.yaml and examples/paper/*.yaml
#: examples whose defense runs Flower: without the flower extra they stop at one config error naming it
NEEDS_FLOWER = {"flower/matrix.yaml"}


@pytest.fixture(scope="module")
def registry():
    registry = load_registry(strict=True)
    assert not registry.failures
    return registry


@pytest.mark.parametrize("path", EXAMPLES, ids=[str(p.relative_to(ROOT).with_suffix("")) for p in EXAMPLES])
def test_shipped_example_builds_its_matrix(path: Path, registry, tmp_path: Path) -> None:
    """Every placeholder folder (``root``, and ``database_root`` / ``test_root`` of the paper
    tables' three data roles) stops the build with a config error naming it, until set."""
    if str(path.relative_to(ROOT)) in NEEDS_FLOWER and importlib.util.find_spec("flwr") is None:
        with pytest.raises(VisprivError, match=re.escape("pip install 'vispriv[flower]'")):
            build_matrix(load_config(path), registry)
        return
    files = placeholder_files(path)
    if files:
        # a placeholder file stops the build with one line naming it; the paper-table tests run these
        # configs on fixture files (tests/datasets/test_paper_examples.py)
        with pytest.raises(VisprivError, match=re.escape(files[0][1])):
            build_matrix(load_config(path), registry)
        return
    placeholders = placeholder_roots(path)
    overrides = []
    if placeholders:
        with pytest.raises(ConfigError, match=f"root: folder '{placeholders[0][1]}' does not exist"):
            build_matrix(load_config(path), registry)
        for key, _ in placeholders:
            (tmp_path / key).mkdir()
            overrides.append(f"datasets.0.{key}={tmp_path / key}")
    mx = build_matrix(load_config(path, overrides), registry)
    assert mx.cells, f"{path.name}: no cell to run"
    assert all(cell.metrics for cell in mx.cells), f"{path.name}: a cell without metrics"
