"""Bring your own federated system: a model and update written by a plain PyTorch script are attacked."""

from __future__ import annotations

import html
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_fork import run_vispriv
from test_deep_matrix import cell_metrics, run

#: What a practitioner's own training code does: no vispriv import anywhere.
USER_SCRIPT = textwrap.dedent('''
    import sys
    import numpy as np
    import torch
    from torch import nn

    out = sys.argv[1]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.Sigmoid(), nn.Flatten(), nn.Linear(6 * 8 * 8, 4))
    images = torch.rand(1, 3, 8, 8)
    labels = torch.tensor([2])
    loss = nn.functional.cross_entropy(model(images), labels)
    grads = torch.autograd.grad(loss, list(model.parameters()))
    torch.save({k: g for (k, _), g in zip(model.named_parameters(), grads)}, f"{out}/update.pt")
    program = torch.export.export(model, (torch.rand(2, 3, 8, 8),), dynamic_shapes=({0: torch.export.Dim.AUTO},))
    torch.export.save(program, f"{out}/model.pt2")
    np.save(f"{out}/images.npy", images.numpy())
    np.save(f"{out}/labels.npy", labels.numpy())
''')


def captured(folder: Path, **extra) -> dict:
    return {"name": "captured-update", "model": str(folder / "model.pt2"), "update": str(folder / "update.pt"), **extra}


def test_a_plain_pytorch_update_is_inverted(tmp_path):
    script = tmp_path / "user.py"
    script.write_text(USER_SCRIPT)
    subprocess.run([sys.executable, str(script), str(tmp_path)], check=True, timeout=120)
    config = {
        "name": "byo",
        "datasets": [captured(tmp_path, images=str(tmp_path / "images.npy"), labels=str(tmp_path / "labels.npy"))],
        "defenses": ["none"],
        "attacks": [{"name": "idlg", "steps": 10}],
        "metrics": ["psnr", "accuracy", "recognisable"],
    }
    done = run(tmp_path, config)
    assert done.returncode == 0, done.stderr
    (metrics,) = cell_metrics(tmp_path, "byo").values()
    assert metrics["labels/accuracy"] == 1.0
    assert metrics["images/psnr_median"] > 30


def test_bad_captured_files_are_one_line(tmp_path):
    script = tmp_path / "user.py"
    script.write_text(USER_SCRIPT)
    subprocess.run([sys.executable, str(script), str(tmp_path)], check=True, timeout=120)
    (tmp_path / "broken.pt2").write_bytes(b"not a model")
    state = torch.load(tmp_path / "update.pt", weights_only=True)
    state["0.weight"] = torch.zeros(3, 3)
    torch.save(state, tmp_path / "wrong_shape.pt")
    np.save(tmp_path / "two_images.npy", np.zeros((2, 3, 8, 8), np.float32))
    cases = [
        (captured(tmp_path, model=str(tmp_path / "broken.pt2")), "does not load as a torch.export program"),
        (captured(tmp_path, update=str(tmp_path / "wrong_shape.pt")), "0.weight has shape (3, 3)"),
        (captured(tmp_path, images=str(tmp_path / "two_images.npy")), "expected (1, 3, 8, 8)"),
    ]
    for i, (dataset, message) in enumerate(cases):
        folder = tmp_path / f"case{i}"
        folder.mkdir()
        done = run(folder, {"name": f"bad{i}", "datasets": [dataset], "defenses": ["none"],
                            "attacks": [{"name": "dlg", "steps": 1}]})
        assert message in done.stderr, done.stderr
        assert "Traceback" not in done.stderr.split("FAILED")[0]


DOC = Path(__file__).resolve().parents[2] / "docs" / "federated.md"


def _walkthrough() -> tuple[str, str, list[str]]:
    """The script, the config and the commands of docs/federated.md, "Bring your own model and update"."""
    text = DOC.read_text()
    section = text.split("### Bring your own model and update\n", 1)[1].split("\n### ", 1)[0]
    (script,) = re.findall(r"```python\n(.*?)```", section, re.S)
    (config,) = re.findall(r"```yaml\n(.*?)```", section, re.S)
    commands = re.findall(r"^    ((?:python|vispriv) .*)$", section, re.M)
    return script, config, commands


@pytest.mark.slow
def test_the_documented_walkthrough_runs_as_written(tmp_path):
    """The doc's capture script, config and commands, run from its text: the model exports with a
    dynamic batch, the attack recovers the label, and the report shows the headline metrics."""
    script, config, commands = _walkthrough()
    assert commands[0] == "python capture.py" and [c.split()[:2] for c in commands[1:]] == [
        ["vispriv", "matrix"], ["vispriv", "report"]]
    (tmp_path / "capture.py").write_text(script)
    (tmp_path / "byo.yaml").write_text(config)
    outputs = []
    for command in commands:
        args = shlex.split(command)
        if args[0] == "python":
            done = subprocess.run([sys.executable, *args[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=600)
        else:
            done = run_vispriv(args[1:], cwd=tmp_path, timeout=600)
        assert done.returncode == 0, f"{command}: {done.stderr[-2000:]}"
        outputs.append(done.stdout)
    (metrics,) = cell_metrics(tmp_path, "byo-update").values()
    assert metrics["labels/accuracy"] == 1.0
    report = outputs[-1]
    shown = sorted(set(re.findall(r"^\*\*([a-z_/]+)\*\* \(", report, re.M)))
    assert shown == ["images/psnr", "images/psnr_median", "images/recognisable_share", "images/ssim", "labels/accuracy"]
    page = html.unescape((tmp_path / "reports" / "report.html").read_text())
    assert re.search(r"<h3>images/psnr <small>\([^<]*colours: (green at|red at or beyond) [^<]*the recognisable threshold \(20\)", page)
