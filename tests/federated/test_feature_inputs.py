"""Deep-feature inputs of the federated scenario: files written without vispriv are read exactly,
CelebA's own annotation files give the attributes and the split, and bad input is one ``error:`` line."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml
from cli_fork import run_vispriv

from vispriv.plugins.federated.data import INIT, TEST, TRAIN, split_users
from vispriv.plugins.federated.features.dataset import FederatedFeaturesConfig, labelled
from vispriv.plugins.federated.features.file import read_features, read_labels

#: A user's own script: no vispriv import. Writes both layouts, labels in shuffled id order.
USER_SCRIPT = textwrap.dedent('''
    import sys
    import numpy as np

    out = sys.argv[1]
    rng = np.random.default_rng(7)
    features = rng.normal(size=(12, 5)).astype(np.float32)
    ids = np.array([f"img_{i:03d}.jpg" for i in range(12)])
    classes = np.arange(12) % 3
    attributes = (rng.random((12, 4)) < 0.5).astype(np.uint8)
    np.savez(f"{out}/single.npz", features=features, ids=ids, labels=classes, names=np.array(["a", "b", "c"]))
    np.save(f"{out}/plain.npy", features)
    with open(f"{out}/plain_ids.txt", "w") as f:
        f.write("\\n".join(ids) + "\\n")
    order = rng.permutation(12)
    np.savez(f"{out}/attributes.npz", ids=ids[order], labels=attributes[order], names=np.array(list("wxyz")))
    np.savez(f"{out}/truth.npz", features=features, classes=classes, attributes=attributes)
''')

ATTR_NAMES = ["Bald", "Smiling", "Young"]
#: CelebA's list_attr_celeba.txt: count, names, then ``<id> v_1 .. v_L`` with v in {-1, 1}.
ATTR_ROWS = [[1, -1, 1], [-1, -1, 1], [1, 1, -1], [-1, 1, -1], [1, 1, 1], [-1, -1, -1], [1, -1, -1], [-1, 1, 1]]
PARTITION = [0, 0, 0, 0, 1, 1, 2, 2]


def write_celeba(folder: Path, rows: list[list[int]] = ATTR_ROWS) -> dict[str, str]:
    """CelebA's two annotation files and a feature file keyed by its image ids (in another order)."""
    folder.mkdir(parents=True, exist_ok=True)
    ids = [f"{i + 1:06d}.jpg" for i in range(len(rows))]
    lines = [str(len(rows)), " ".join(ATTR_NAMES) + " "]
    lines += [f"{i} " + " ".join(f"{v:2d}" for v in row) for i, row in zip(ids, rows)]
    (folder / "list_attr_celeba.txt").write_text("\n".join(lines) + "\n")
    (folder / "list_eval_partition.txt").write_text("".join(f"{i} {p}\n" for i, p in zip(ids, PARTITION)))
    order = np.arange(len(ids))[::-1]
    features = np.arange(len(ids) * 4, dtype=np.float64).reshape(len(ids), 4) ** 1.5
    np.savez(folder / "faces.npz", features=features[order], ids=np.array(ids)[order])
    return {"features": str(folder / "faces.npz"), "attributes": str(folder / "list_attr_celeba.txt"),
            "partition": str(folder / "list_eval_partition.txt")}


@pytest.fixture(scope="module")
def user_files(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("user")
    script = out / "write.py"
    script.write_text(USER_SCRIPT)
    subprocess.run([sys.executable, str(script), str(out)], check=True, timeout=60)
    return out


def test_a_feature_file_written_by_plain_numpy_is_read_exactly(user_files):
    truth = np.load(user_files / "truth.npz")
    table = read_features(user_files / "single.npz")
    assert table.ids == [f"img_{i:03d}.jpg" for i in range(12)]
    assert np.array_equal(table.features, truth["features"].astype(np.float64))
    assert np.array_equal(table.labels, truth["classes"]) and table.names == ["a", "b", "c"]
    plain = read_labels(user_files / "attributes.npz", read_features(user_files / "plain.npy", user_files / "plain_ids.txt"))
    assert np.array_equal(plain.features, truth["features"].astype(np.float64))
    # the labels file lists the ids in another order: rows are matched by id
    assert np.array_equal(plain.labels, truth["attributes"]) and plain.names == list("wxyz")


def test_the_dataset_turns_a_feature_file_into_multi_label_users(user_files):
    cfg = FederatedFeaturesConfig(source="file", features=str(user_files / "plain.npy"),
                                  ids=str(user_files / "plain_ids.txt"), labels=str(user_files / "attributes.npz"),
                                  n_users=2, test_fraction=0.25, init_fraction=0.2)
    source = labelled(cfg)
    assert source.images.shape == (12, 1, 5) and source.images.min() == 0.0 and source.images.max() == 1.0
    private, public = split_users(source, 2, np.random.default_rng(0), test_fraction=0.25, init_fraction=0.2)
    assert private.multilabel and private.n_classes == 4
    assert len(private.labels) + len(private.test_labels) + len(public.init_labels) == 12
    assert private.labels.shape[1] == public.init_labels.shape[1] == 4


def test_celeba_attributes_and_partition_come_from_its_own_files(tmp_path):
    files = write_celeba(tmp_path / "celeba")
    source = labelled(FederatedFeaturesConfig(source="celeba", **files))
    # the feature file lists the images in reverse order; attributes follow the feature rows
    expected = (np.asarray(ATTR_ROWS)[::-1] + 1) // 2
    assert np.array_equal(source.labels, expected)
    assert source.class_names == ATTR_NAMES
    assert source.roles.tolist() == [(TRAIN, INIT, TEST)[p] for p in PARTITION[::-1]]
    private, public = split_users(source, 2, np.random.default_rng(0))
    # validation images initialise w0, test images are the test split, training images go to the users
    assert np.array_equal(public.init_labels, expected[source.roles == INIT])
    assert np.array_equal(private.test_labels, expected[source.roles == TEST])
    assert sorted(map(tuple, private.labels)) == sorted(map(tuple, expected[source.roles == TRAIN]))


def _vispriv_dry_run(folder: Path, dataset: dict) -> subprocess.CompletedProcess:
    config = {"name": "bad", "datasets": [dataset], "defenses": ["none"], "attacks": ["gradient-leakage"]}
    path = folder / "matrix.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return run_vispriv(["matrix", str(path), "--dry-run"], cwd=folder, env=env, timeout=120)


def _error_line(done: subprocess.CompletedProcess) -> str:
    lines = [line for line in done.stderr.strip().splitlines() if not line.startswith("warning: plugin")]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def test_bad_feature_inputs_are_one_error_line_naming_file_and_row(user_files, tmp_path):
    rng = np.random.default_rng(0)
    ids = np.array([f"im{i}" for i in range(6)])
    nan = rng.normal(size=(6, 3))
    nan[3, 1] = np.nan
    np.savez(tmp_path / "nan.npz", features=nan, ids=ids, labels=np.arange(6) % 2)
    np.savez(tmp_path / "shape.npz", features=rng.normal(size=(6, 3)), ids=ids, labels=np.zeros((5,), np.int64))
    bad_attr = np.zeros((6, 2), np.int64)
    bad_attr[4, 1] = 2
    np.savez(tmp_path / "not01.npz", features=rng.normal(size=(6, 3)), ids=ids, labels=bad_attr)
    np.savez(tmp_path / "labels_other_ids.npz", ids=np.array([f"im{i}" for i in range(1, 7)]), labels=np.arange(6) % 2)
    np.savez(tmp_path / "feats.npz", features=rng.normal(size=(6, 3)), ids=ids)
    rows = [list(r) for r in ATTR_ROWS]
    rows[2] = rows[2][:2]  # a missing column on the file's line 5
    celeba = write_celeba(tmp_path / "celeba", rows)
    cases = [
        ({"source": "file", "features": str(tmp_path / "nan.npz")}, ["nan.npz", "feature row 3", "NaN"]),
        ({"source": "file", "features": str(tmp_path / "shape.npz")}, ["shape.npz", "(5,)", "expected (6,)"]),
        ({"source": "file", "features": str(tmp_path / "not01.npz")}, ["not01.npz", "attribute row 4", "0/1"]),
        ({"source": "file", "features": str(tmp_path / "feats.npz"), "labels": str(tmp_path / "labels_other_ids.npz")},
         ["labels_other_ids.npz", "'im0'", "feature row 0"]),
        ({"source": "file", "features": str(user_files / "plain.npy"), "ids": str(tmp_path / "celeba" / "list_eval_partition.txt")},
         ["list_eval_partition.txt", "8 ids for 12 feature rows"]),
        ({"source": "celeba", **celeba}, ["list_attr_celeba.txt line 5", "000003.jpg", "2 values for 3 attributes"]),
    ]
    for i, (dataset, expected) in enumerate(cases):
        folder = tmp_path / f"case{i}"
        folder.mkdir()
        line = _error_line(_vispriv_dry_run(folder, {"name": "federated-features", **dataset}))
        for part in expected:
            assert part in line, line
