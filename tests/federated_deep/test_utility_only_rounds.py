"""The deep defenses' ``rounds`` (and DP-SGD's ``delta``) only measure utility: sweeping them moves no attack metric.

The attacks see round 0, drawn before any later round from the same streams, and the
release's protocol does not name the number of rounds; DP-SGD's ``delta`` enters only the
reported epsilon. Marked :data:`~vispriv.harness.UtilityOnly`, these settings enter no
seed, so every attack metric agrees to the last digit. (The linear federated defenses'
``rounds`` is not marked: their release holds every round.)
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

TINY = {"name": "federated-deep", "size": 8, "test_images": 8, "public_images": 8, "n_users": 2, "batch_size": 1}


def test_rounds_and_delta_sweeps_leave_every_attack_metric_identical(tmp_path: Path) -> None:
    config = {
        "name": "deep-utility-only",
        "seed": 0,
        "datasets": [TINY],
        "defenses": [
            {"name": "gradient-pruning", "prune": 0.5, "rounds": [1, 3]},
            {"name": "dp-sgd", "noise_multiplier": 0.5, "rounds": [1, 3], "delta": [1e-5, 1e-3]},
        ],
        "attacks": [{"name": "inverting-gradients", "steps": 2}],
        "metrics": ["psnr", "accuracy"],
    }
    clear_memo()
    groups: dict[str, list[Cell]] = defaultdict(list)
    for cell in build_matrix(validate_config(config), load_registry(strict=True)).cells:
        groups[cell.defense.name].append(cell)
    assert {name: len(cells) for name, cells in groups.items()} == {"gradient-pruning": 2, "dp-sgd": 4}
    dp_epsilons: list[float] = []
    for name, cells in groups.items():
        assert len({tuple(c.stage_seeds()) for c in cells}) == 1, f"{name}: seeds differ"
        runs = []
        for cell in cells:
            outcome = run_cell(cell, str(tmp_path / "cache"), str(tmp_path / "art" / cell.hash))
            assert outcome.status == "FINISHED", outcome.traceback
            runs.append(outcome.metrics)
            if name == "dp-sgd":
                dp_epsilons.append(outcome.metrics["utility/epsilon"])
        attack = [{k: v for k, v in m.items() if not k.startswith("utility/") and not TIMING.search(k)} for m in runs]
        assert len(attack[0]) >= 2 and all(a == attack[0] for a in attack[1:]), f"{name}: {attack}"
        for cell in cells:  # the rounds did run: one accuracy per round, and the one before them
            rows = (tmp_path / "art" / cell.hash / "accuracy_per_round.csv").read_text().splitlines()
            assert len(rows) == 1 + cell.defense.config.rounds + 1, (name, rows)
    assert len(set(dp_epsilons)) == 4, dp_epsilons  # DP-SGD's epsilon does follow rounds and delta
