"""Every shipped example (`vispriv examples`) is a valid matrix: a typo in one is caught here,
not by the user who runs it for half an hour. Examples over the user's own folders
(``root: /path/to/...``) stop at that placeholder with one config error naming it, before
any run exists; with the root set as their header says (``--set datasets.0.root=...``, here
an empty folder) they build."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vispriv.harness.config import load_config
from vispriv.harness.errors import ConfigError
from vispriv.harness.matrix import build_matrix
from vispriv.harness.registry import load_registry

ROOT = Path(__file__).resolve().parents[2] / "examples"
EXAMPLES = sorted(ROOT.rglob("*.yaml"))  # examples/*.yaml and examples/paper/*.yaml


@pytest.fixture(scope="module")
def registry():
    registry = load_registry(strict=True)
    assert not registry.failures
    return registry


@pytest.mark.parametrize("path", EXAMPLES, ids=[str(p.relative_to(ROOT).with_suffix("")) for p in EXAMPLES])
def test_shipped_example_builds_its_matrix(path: Path, registry, tmp_path: Path) -> None:
    placeholder = re.search(r"^\s+root: (/path/to/\S+)", path.read_text(), re.MULTILINE)
    overrides = []
    if placeholder:
        with pytest.raises(ConfigError, match=f"root: folder '{placeholder.group(1)}' does not exist"):
            build_matrix(load_config(path), registry)
        overrides = [f"datasets.0.root={tmp_path}"]
    mx = build_matrix(load_config(path, overrides), registry)
    assert mx.cells, f"{path.name}: no cell to run"
    assert all(cell.metrics for cell in mx.cells), f"{path.name}: a cell without metrics"
