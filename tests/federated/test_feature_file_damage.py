"""A damaged feature file is one ``error:`` line naming it, what is wrong and what to do, before any run exists.

Was ``BadZipFile`` with a traceback and exit status 3 for a truncated ``.npz`` (every other bad
feature file was one line), and numpy's "pickled (object) data" for an empty or object ``.npy``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import yaml
from cli_fork import run_vispriv

REWRITE = "(or copy it again: an interrupted copy or a full disk truncates files)"


def _matrix(folder: Path, dataset: dict) -> subprocess.CompletedProcess:
    config = {"name": "bad", "datasets": [{"name": "federated-features", "source": "file", **dataset}],
              "defenses": ["none"], "attacks": ["gradient-leakage"]}
    path = folder / "matrix.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "VISPRIV_PLUGINS": "federated-learning,metrics"}
    return run_vispriv(["matrix", str(path), "--quiet"], cwd=folder, env=env, timeout=300)


def _one_line_before_any_run(done: subprocess.CompletedProcess, folder: Path) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "Traceback" not in done.stderr and len(lines) == 1, done.stderr
    assert not (folder / "mlflow.db").exists(), "a store (and a parent run) was created before the check"
    return lines[0]


def test_damaged_feature_files_are_one_line_before_any_run(tmp_path):
    ids = np.array([f"im{i}" for i in range(6)])
    np.savez(tmp_path / "whole.npz", features=np.ones((6, 3)), ids=ids, labels=np.arange(6) % 2)
    whole = (tmp_path / "whole.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "empty.npy").write_bytes(b"")
    np.save(tmp_path / "objects.npy", np.array([[{"a": 1}]], dtype=object))
    (tmp_path / "ids.txt").write_text("\n".join(ids) + "\n")
    cases = [
        ({"features": "cut.npz"},
         f"error: {tmp_path}/cut.npz: not a complete .npz archive (BadZipFile: File is not a zip file); "
         f"write it again with numpy.savez {REWRITE}"),
        ({"features": "empty.npy", "ids": "ids.txt"},
         f"error: feature file {tmp_path}/empty.npy is empty (0 bytes); write it again with numpy.save {REWRITE}"),
        ({"features": "objects.npy", "ids": "ids.txt"},
         f"error: feature file {tmp_path}/objects.npy holds Python objects (dtype object), not numbers; "
         "save a numeric array, e.g. numpy.save(path, numpy.asarray(x, dtype=numpy.float32))"),
        ({"features": "nope.npz"}, f"error: feature file '{tmp_path}/nope.npz' does not exist"),
    ]
    for i, (dataset, expected) in enumerate(cases):
        folder = tmp_path / f"run{i}"
        folder.mkdir()
        config_dir = {k: f"../{v}" for k, v in dataset.items()}  # relative to the config file, written in run{i}/
        assert _one_line_before_any_run(_matrix(folder, config_dir), folder) == expected
