"""Four captured updates in one matrix: short labels, one table, a ``--table`` with no hole.

Each dataset named its four absolute paths (labels of about 230 characters), reported as four
tables, and ``--table dataset.update:attack`` repeated the attack in every row, one filled cell
per row.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_fork import run_vispriv
from mlflow.tracking import MlflowClient
from test_deep_matrix import run
from torch import nn

CLIENTS = ("astronaut", "camera", "coffee", "rocket")


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> Path:
    """One round's global model and the update of each of four clients, with its true image and label."""
    out = tmp_path_factory.mktemp("round")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.Sigmoid(), nn.Flatten(), nn.Linear(4 * 8 * 8, 4))
    program = torch.export.export(model, (torch.rand(2, 3, 8, 8),), dynamic_shapes=({0: torch.export.Dim.AUTO},))
    torch.export.save(program, out / "model.pt2")
    for i, client in enumerate(CLIENTS):
        folder = out / client
        folder.mkdir()
        images, labels = torch.rand(1, 3, 8, 8), torch.tensor([i])
        grads = torch.autograd.grad(nn.functional.cross_entropy(model(images), labels), list(model.parameters()))
        torch.save({k: g for (k, _), g in zip(model.named_parameters(), grads)}, folder / "update.pt")
        np.save(folder / "images.npy", images.numpy())
        np.save(folder / "labels.npy", labels.numpy())
    return out


def _config(folder: Path) -> dict:
    datasets = [{"name": "captured-update", "model": str(folder / "model.pt2"), "update": str(folder / c / "update.pt"),
                 "images": str(folder / c / "images.npy"), "labels": str(folder / c / "labels.npy")} for c in CLIENTS]
    return {"name": "four", "datasets": datasets, "defenses": ["none"],
            "attacks": [{"name": "dlg", "steps": 1}, {"name": "idlg", "steps": 1}], "metrics": ["ssim"]}


def _text(metrics: dict[str, float]) -> str:
    """A cell's SSIM as the tables write it: ± its standard error, "(n = 1)" where one image leaves none."""
    se = metrics["images/ssim_se"]
    return f"{metrics['images/ssim']:.3f}" + (" (n = 1)" if math.isnan(se) else f" ± {se:.3f}")


def _report(folder: Path, *args: str) -> str:
    done = run_vispriv(["report", "--experiment", "four", "--metric", "images/ssim", "--no-log",
                        "--tracking-uri", f"sqlite:///{folder / 'mlflow.db'}", "--out", str(folder / "rep"), *args],
                       cwd=folder, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_four_captures_have_short_labels_one_table_and_a_full_update_by_attack_table(captures, tmp_path):
    config = _config(captures)
    dry = run(tmp_path, config, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    datasets = sorted({line.split("  ")[3].split(" | ")[0] for line in dry.stdout.splitlines() if line.startswith("  run ")})
    assert datasets == [f"captured-update(update={c}/update)" for c in CLIENTS]
    assert max(len(d) for d in datasets) < 60

    done = run(tmp_path, config)
    assert done.returncode == 0, done.stderr
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    cells = client.search_runs([client.get_experiment_by_name("four").experiment_id], "tags.mlflow.parentRunId != ''")
    assert len(cells) == 8
    # The label is short; the params keep every full path.
    assert {(r.data.tags["vispriv.dataset"], r.data.params["dataset.update"], r.data.params["dataset.model"])
            for r in cells} == {(f"captured-update(update={c}/update)", str(captures / c / "update.pt"),
                                 str(captures / "model.pt2")) for c in CLIENTS}
    ssim = {(r.data.tags["vispriv.dataset"], r.data.tags["vispriv.attack"]): _text(r.data.metrics) for r in cells}

    report = _report(tmp_path)
    assert report.count("**images/ssim**") == 1
    rows = [line for line in report.splitlines() if line.startswith("| captured-update(")]
    assert [row.split(" | ")[0] for row in rows] == [f"| captured-update(update={c}/update), {a}(steps=1)"
                                                     for c in CLIENTS for a in ("dlg", "idlg")]

    table = _report(tmp_path, "--table", "dataset.update:attack")
    lines = [line for line in table.splitlines() if line.startswith("| ")]
    assert lines[0] == "| dataset.update \\ attack | dlg(steps=1) | idlg(steps=1) |"
    assert [re.sub(r"\*\*", "", line) for line in lines[1:]] == [
        f"| update={c}/update | {ssim[(f'captured-update(update={c}/update)', 'dlg(steps=1)')]} | "
        f"{ssim[(f'captured-update(update={c}/update)', 'idlg(steps=1)')]} |" for c in CLIENTS]
