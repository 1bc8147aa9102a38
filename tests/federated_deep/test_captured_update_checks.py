"""A captured update's bad files are one ``error:`` line when the config is built, before any run exists.

Each case is ``vispriv matrix CONFIG`` in a real subprocess (exit status 2, one line, no
traceback) and leaves no store behind: the check ran before the parent run was created.
Was a FAILED cell (exit 1) seconds later, after a parent run; the TorchScript message did not
say TorchScript, the batch message pointed at image_shape, and ``module.`` names got no hint.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from test_deep_matrix import run
from torch import nn

DYNAMIC = 'torch.export.export(model, (x,), dynamic_shapes=({0: torch.export.Dim("batch")},))'
EXPORT = 'torch.export.save(torch.export.export(model, (example_batch,)), "model.pt2")'
REWRITE_NPY = "write it again with numpy.save (or copy it again: an interrupted copy or a full disk truncates files)"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """What a user's own script writes: a model exported with a dynamic and with a static batch, TorchScript, updates, truths."""
    out = tmp_path_factory.mktemp("captured")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.Sigmoid(), nn.Flatten(), nn.Linear(6 * 8 * 8, 4))
    images, labels = torch.rand(2, 3, 8, 8), torch.tensor([2, 1])
    grads = torch.autograd.grad(nn.functional.cross_entropy(model(images), labels), list(model.parameters()))
    update = {k: g for (k, _), g in zip(model.named_parameters(), grads)}
    torch.save(update, out / "update.pt")
    torch.save({f"module.{k}": g for k, g in update.items()}, out / "update_ddp.pt")
    dynamic = torch.export.export(model, (images,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    torch.export.save(dynamic, out / "model.pt2")
    torch.export.save(torch.export.export(model, (torch.rand(1, 3, 8, 8),)), out / "static.pt2")  # the plain way
    torch.jit.save(torch.jit.script(model), out / "scripted.pt")
    np.save(out / "images.npy", images.numpy())
    np.save(out / "labels.npy", labels.numpy())
    np.save(out / "objects.npy", np.array([{"image": 1}], dtype=object))
    (out / "empty.npy").write_bytes(b"")
    return out


def _config(folder: Path, **dataset) -> dict:
    entry = {"name": "captured-update", "model": str(folder / "model.pt2"), "update": str(folder / "update.pt"),
             "batch_size": 2, **dataset}
    return {"name": "byo", "datasets": [entry], "defenses": ["none"], "attacks": [{"name": "dlg", "steps": 1}]}


def _error_line_before_any_run(folder: Path, config: dict) -> str:
    done = run(folder, config)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "Traceback" not in done.stderr and len(lines) == 1, done.stderr
    assert not (folder / "mlflow.db").exists(), "a store (and a parent run) was created before the check"
    return lines[0]


CASES = {
    "missing": ({"update": "missing.pt"}, "error: update file not found: {run}/missing.pt (relative paths written in a "
                                          "config file are read from its folder, those given with --set from the shell's)"),
    "torchscript": ({"model": "{files}/scripted.pt"},
                    "error: model {files}/scripted.pt is a TorchScript file (torch.jit.save); vispriv needs a torch.export "
                    "program, because it re-runs the model's forward as a function of new inputs and substituted "
                    "parameters (gradient matching, the FedAvg unroll), which a scripted module cannot do: save it with "
                    + EXPORT),
    "static batch": ({"model": "{files}/static.pt2"},
                     "error: model {files}/static.pt2 was exported for batches of exactly 1 image(s) and batch_size is 2 "
                     "(torch: Guard failed: x.size()[0] == 1): export it with a dynamic batch, " + DYNAMIC
                     + ", or capture an update of 1 image(s) and set batch_size: 1"),
    "module. prefix": ({"update": "{files}/update_ddp.pt"},
                       "error: update {files}/update_ddp.pt: its parameter names carry the 'module.' prefix of a "
                       "(Distributed)DataParallel wrapper ('module.0.weight'; the model's is '0.weight'): strip it "
                       "before saving, {k.removeprefix('module.'): v for k, v in update.items()}"),
    "empty npy": ({"images": "{files}/empty.npy"}, "error: images {files}/empty.npy is empty (0 bytes); " + REWRITE_NPY),
    "object npy": ({"images": "{files}/objects.npy"},
                   "error: images {files}/objects.npy holds Python objects (dtype object), not numbers; save a numeric "
                   "array, e.g. numpy.save(path, numpy.asarray(x, dtype=numpy.float32))"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_captured_file_is_one_line_before_any_run(files, tmp_path, case):
    dataset, expected = CASES[case]
    def named(text: str) -> str:
        return text.replace("{files}", str(files)).replace("{run}", str(tmp_path))

    line = _error_line_before_any_run(tmp_path, _config(files, **{k: named(v) for k, v in dataset.items()}))
    # torch names the exported input after the model's first argument (`input` for nn.Sequential)
    assert line.replace("input.size()", "x.size()") == named(expected)


def test_good_files_plan_their_cell(files, tmp_path):
    """The same files, whole: the dry run plans the cell (the checks pass what the attacks accept)."""
    done = run(tmp_path, _config(files, images=str(files / "images.npy"), labels=str(files / "labels.npy")), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "1 cells in experiment 'byo'" in done.stdout
