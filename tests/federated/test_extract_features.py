"""The feature extractor: a user's torch.export network over an image folder, batched and resumable."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from cli_fork import run_vispriv
from skimage.io import imsave

from vispriv.plugins.federated.features.extract import extract
from vispriv.plugins.federated.features.file import read_features

#: The user's network, exported without vispriv: per-channel means and their doubles (D = 6).
EXPORT = textwrap.dedent('''
    import sys
    import torch
    from torch import nn

    class Net(nn.Module):
        def forward(self, x):
            m = x.mean(dim=(2, 3))
            return torch.cat([m, 2 * m], dim=1)

    program = torch.export.export(Net(), (torch.rand(2, 3, 8, 8),), dynamic_shapes=({0: torch.export.Dim.AUTO},))
    torch.export.save(program, sys.argv[1])
''')


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> tuple[Path, Path, np.ndarray]:
    root = tmp_path_factory.mktemp("extract")
    subprocess.run([sys.executable, "-c", EXPORT, str(root / "net.pt2")], check=True, timeout=120)
    rng = np.random.default_rng(0)
    means = []
    for c in ("cats", "dogs"):
        for i in range(5):
            img = rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
            (root / "images" / c).mkdir(parents=True, exist_ok=True)
            imsave(root / "images" / c / f"{i}.png", img, check_contrast=False)
            means.append(img.reshape(-1, 3).mean(axis=0) / 255.0)
    return root, root / "net.pt2", np.asarray(means)


def test_class_folders_give_features_ids_and_labels(folder, tmp_path):
    root, model, means = folder
    out = tmp_path / "features.npz"
    done = _extract(root, model, out, "--batch-size", "3", "--quiet")
    assert done.returncode == 0, done.stderr
    table = read_features(out)
    assert table.ids == [f"{c}/{i}.png" for c in ("cats", "dogs") for i in range(5)]
    assert np.allclose(table.features, np.hstack([means, 2 * means]), atol=1e-6)
    assert table.labels.tolist() == [0] * 5 + [1] * 5 and table.names == ["cats", "dogs"]
    assert not (tmp_path / "features.npz.partial.npz").exists()


def test_an_interrupted_extraction_resumes_where_it_stopped(folder, tmp_path):
    root, model, means = folder
    out = tmp_path / "features.npz"
    assert extract(root / "images", model, out, batch_size=3, save_every=1, stop_after=2, quiet=True) == 2
    assert not out.exists() and (tmp_path / "features.npz.partial.npz").exists()
    # 10 images in batches of 3: 2 done, the rerun computes the remaining 2 batches only
    assert extract(root / "images", model, out, batch_size=3, save_every=1, quiet=True) == 2
    assert np.allclose(read_features(out).features, np.hstack([means, 2 * means]), atol=1e-6)


def test_a_file_that_is_not_a_program_is_one_error_line(folder, tmp_path):
    root, _, _ = folder
    (tmp_path / "bad.pt2").write_bytes(b"not a program")
    done = _extract(root, tmp_path / "bad.pt2", tmp_path / "f.npz")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "bad.pt2" in lines[0]


#: The same network exported the plain way: the batch of its example (1) is fixed.
STATIC = EXPORT.replace("(torch.rand(2, 3, 8, 8),), dynamic_shapes=({0: torch.export.Dim.AUTO},)",
                        "(torch.rand(1, 3, 8, 8),)")


def _extract(root: Path, model: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    """``vispriv extract-features`` (the command the federated plugins add), as a process of its own."""
    return run_vispriv(["extract-features", str(root / "images"), "--model", str(model), "--out", str(out), *args],
                       cwd=root, timeout=120)


def test_a_static_export_runs_at_its_batch_with_a_note_and_one_line_per_chunk(folder, tmp_path):
    """Was a raw torch traceback (Guard failed: x.size()[0] == 1) at the default batch of 64."""
    root, _, means = folder
    static = tmp_path / "static.pt2"
    subprocess.run([sys.executable, "-c", STATIC, str(static)], check=True, timeout=120)
    done = _extract(root, static, tmp_path / "features.npz", "--save-every", "4")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"note: {static} was exported for batches of exactly 1 image(s): extracting 1 at a time (export it with "
        'torch.export.export(model, (x,), dynamic_shapes=({0: torch.export.Dim("batch")},)) for batches of 64)',
        "extract-features: 4/10 images", "extract-features: 8/10 images", "extract-features: 10/10 images",
    ]
    assert np.allclose(read_features(tmp_path / "features.npz").features, np.hstack([means, 2 * means]), atol=1e-6)


def test_an_output_the_os_refuses_is_one_line(folder, tmp_path):
    root, model, _ = folder
    (tmp_path / "afile").write_text("a file where a folder should be")
    done = _extract(root, model, tmp_path / "afile" / "features.npz", "--quiet")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == f"error: cannot write {tmp_path}/afile/features.npz.partial.npz: Not a directory"
