"""Sweeping a descriptor defense's utility-only setting leaves every attack metric as it was, to the last digit.

``matching`` (the utility evaluator's settings), ``utility`` and LDP-Feat's privacy audit
(``audit_trials``, ``audit_confidence``) are read only after the release is drawn, from
random streams of their own: marked :data:`~vispriv.harness.UtilityOnly`, they enter no
seed, so the release, each attack's draws and every score stay put. Before they were
marked, ``matching: {ratio: [0.7, 0.9]}`` moved affine lifting's draws (m = 2 x nearest:
desc_cosine .6406 vs .6403).
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from vispriv.harness.config import validate_config
from vispriv.harness.execute import clear_memo, run_cell
from vispriv.harness.matrix import Cell, build_matrix
from vispriv.harness.registry import load_registry

#: Timing metrics (as tests/faults/test_reproducible_metrics.py names them): wall-clock, not drawn.
TIMING = re.compile(r"(^|[/_])(seconds|per_second)($|[/_])")

SMALL_MATCHING = {"homographies_per_image": 1, "stereo": False}


def swept_cells(config: dict) -> dict[tuple[str, str, str], list[Cell]]:
    """The config's cells grouped by what may change an attack: dataset, defense name, attack chain."""
    groups: dict[tuple[str, str, str], list[Cell]] = defaultdict(list)
    for cell in build_matrix(validate_config(config), load_registry(strict=True)).cells:
        groups[(cell.dataset.label(), cell.defense.name, cell.attack_label)].append(cell)
    return groups


def run_metrics(cell: Cell, folder: Path) -> dict[str, float]:
    outcome = run_cell(cell, str(folder / "cache"), str(folder / "art" / cell.hash))
    assert outcome.status == "FINISHED", outcome.traceback
    return outcome.metrics


def attack_side(metrics: dict[str, float]) -> dict[str, float]:
    """Every metric but the defense's utility and wall-clock timings."""
    return {k: v for k, v in metrics.items() if not k.startswith("utility/") and not TIMING.search(k)}


def test_utility_only_sweeps_leave_every_attack_metric_identical(tmp_path: Path) -> None:
    config = {
        "name": "utility-only",
        "seed": 0,
        "datasets": [{"name": "bundled-images", "size": 96}],
        "defenses": [
            {"name": "affine-lifting", "m": 2, "mode": "sub-hybrid", "database_size": 256, "database_augment": 1,
             "matching": {**SMALL_MATCHING, "ratio": [0.7, 0.9]}},
            {"name": "ldp-feat", "epsilon": 10, "m": 2, "dictionary_size": 64, "dictionary_augment": 1,
             "audit_trials": [0, 300], "audit_confidence": 0.9, "utility": [True, False], "matching": SMALL_MATCHING},
        ],
        "attacks": [{"name": "nearest", "database_size": 256, "database_augment": 1}, {"name": "invert-patches"}],
        "metrics": ["descriptor-recovery", "psnr"],
    }
    clear_memo()
    groups = swept_cells(config)
    assert sorted(len(cells) for cells in groups.values()) == [2, 4]  # affine x nearest, ldp-feat x invert-patches
    for (_, defense, attack), cells in groups.items():
        assert len({c.hash for c in cells}) == len(cells)  # --resume still tells them apart
        assert len({tuple(c.stage_seeds()) for c in cells}) == 1, f"{defense} x {attack}: seeds differ"
        runs = [run_metrics(c, tmp_path) for c in cells]
        first = attack_side(runs[0])
        assert len(first) >= 2, first
        for cell, metrics in zip(cells[1:], runs[1:]):
            assert attack_side(metrics) == first, f"{cells[0].label} vs {cell.label}"
        utilities = [{k: v for k, v in m.items() if k.startswith("utility/")} for m in runs]
        assert any(u != utilities[0] for u in utilities[1:]), f"{defense}: the swept setting changed no utility"
