"""The shipped examples' cells keep their labels, hashes and seeds: a change that moves them fails here.

Every example (``examples/*.yaml`` and ``examples/paper/*.yaml``) is expanded into its
cells (no plugin runs: what ``vispriv matrix CONFIG --dry-run`` does), and each cell's
label, hash (``--resume`` identity), stage seeds (dataset, defense, each attack stage) and
own seed (its metrics') are compared with ``tests/golden/example_seeds.json``. A seed that
moves changes the numbers every documented command draws, so a move must be deliberate:

    VISPRIV_UPDATE_GOLDEN=1 .venv/bin/pytest -q tests/core/test_golden_seeds.py

rewrites the file (the test then reports itself skipped); commit it with a CHANGELOG.md
line saying which examples moved and why. Placeholder folders (``root: /path/to/...``) are
set to a folder named after the key, relative to the working directory, so that the hash
(which holds the folder's text) is the same on every machine.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "datasets"))  # the native-layout writers
from core_helpers import placeholder_files, placeholder_roots
from dataset_layouts import write_celeba_layout, write_feature_file, write_flower_capture

from vispriv.harness.config import load_config
from vispriv.harness.matrix import build_matrix
from vispriv.harness.registry import Registry, load_registry

ROOT = Path(__file__).resolve().parents[2] / "examples"
EXAMPLES = sorted(ROOT.rglob("*.yaml"))
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "example_seeds.json"
UPDATE = "VISPRIV_UPDATE_GOLDEN"
REGENERATE = f"{UPDATE}=1 .venv/bin/pytest -q tests/core/test_golden_seeds.py"


#: Fixture files of the examples whose inputs are files (deep features), written under the
#: working directory by the native-layout writers of tests/datasets and named relatively.
FILE_FIXTURES: dict[str, Callable[[], dict[str, Path]]] = {
    "dphe_table1_features": lambda: {"features": write_feature_file(Path("table1.npz"), classes=3)},
    "dphe_table3_celeba": lambda: write_celeba_layout(Path("celeba")),
    "dphe_table4_sensitive_places": lambda: {"features": write_feature_file(Path("table4.npz"), attributes=1)},
    "dphe_table5_video_attributes": lambda: {"features": write_feature_file(Path("table5.npz"), attributes=12)},
    "dphe_table6_clustering": lambda: {"features": write_feature_file(Path("table6.npz"), classes=3)},
    "attack": lambda: {"capture": write_flower_capture(Path("flower-capture"))},  # examples/flower/attack.yaml
}


def example_cells(path: Path, registry: Registry) -> list[dict[str, Any]]:
    """Label, hash and seeds of every cell of one example, in the matrix's order."""
    overrides = []
    for key, _ in placeholder_roots(path):
        Path(key).mkdir(exist_ok=True)
        overrides.append(f"datasets.0.{key}={key}")
    if placeholder_files(path):
        if path.stem not in FILE_FIXTURES:
            pytest.fail(f"{path.name} reads placeholder files: add a fixture writer to FILE_FIXTURES")
        overrides += [f"datasets.0.{key}={file}" for key, file in FILE_FIXTURES[path.stem]().items()]
    matrix = build_matrix(load_config(path, overrides), registry)
    return [
        {"label": cell.label, "hash": cell.hash, "stage_seeds": cell.stage_seeds(), "seed": cell.seed}
        for cell in matrix.cells
    ]


def _dump(examples: dict[str, list[dict[str, Any]]]) -> str:
    """JSON with one cell a line, so that a diff of the file names the cells that moved."""
    blocks = []
    for name, cells in examples.items():
        rows = ",\n".join(f"  {json.dumps(cell)}" for cell in cells)
        blocks.append(f" {json.dumps(name)}: [\n{rows}\n ]")
    return "{\n" + ",\n".join(blocks) + "\n}\n"


def _moved(name: str, want: list[dict[str, Any]], got: list[dict[str, Any]]) -> str:
    """One line per cell of ``name`` that differs (or is new, or gone), naming what moved."""
    lines = []
    for i in range(max(len(want), len(got))):
        old = want[i] if i < len(want) else None
        new = got[i] if i < len(got) else None
        if old == new:
            continue
        if old is None or new is None:
            cell = (new or old or {}).get("label", "")
            lines.append(f"{name} cell {i} {'new' if old is None else 'gone'}: {cell}")
            continue
        fields = ", ".join(k for k in ("label", "hash", "stage_seeds", "seed") if old.get(k) != new.get(k))
        lines.append(f"{name} cell {i} ({old['label']}) moved: {fields}")
    return "\n".join(lines)


def test_shipped_examples_keep_their_cells_and_seeds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VISPRIV_PLUGINS", raising=False)  # every built-in plugin, as a user has them
    registry = load_registry(strict=True)
    # an example whose defense runs Flower builds only with the flower extra (its cells are pinned where it is)
    skipped = {"flower/matrix.yaml"} if importlib.util.find_spec("flwr") is None else set()
    got = {str(p.relative_to(ROOT)): example_cells(p, registry) for p in EXAMPLES if str(p.relative_to(ROOT)) not in skipped}
    if os.environ.get(UPDATE):
        if skipped:
            pytest.fail(f"install the flower extra before regenerating: {sorted(skipped)} would drop out")
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(_dump(got))
        pytest.skip(f"rewrote {GOLDEN.name} ({sum(map(len, got.values()))} cells)")
    want = {k: v for k, v in json.loads(GOLDEN.read_text()).items() if k not in skipped}
    moved = [line for name in sorted(set(want) | set(got)) if (line := _moved(name, want.get(name, []), got.get(name, [])))]
    assert not moved, (
        "shipped examples' cells moved (a seed that moves changes every documented number):\n"
        + "\n".join(moved)
        + f"\nif deliberate, regenerate with `{REGENERATE}` and add a CHANGELOG.md line"
    )


def test_the_golden_file_covers_every_shipped_example() -> None:
    """A new example gets its cells pinned too (regenerate to add it)."""
    want = json.loads(GOLDEN.read_text())
    assert sorted(want) == sorted(str(p.relative_to(ROOT)) for p in EXAMPLES), f"regenerate with `{REGENERATE}`"
