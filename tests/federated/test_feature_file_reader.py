"""The feature-file reader called directly: repeated ids, counts, labels matched by id, each refusal's exact line."""

from __future__ import annotations

import numpy as np
import pytest

from vispriv.harness.errors import InputError
from vispriv.plugins.federated.features.file import check_labels, read_features, read_labels

FEATURES = np.arange(12, dtype=np.float32).reshape(4, 3)


def _refusal(call, *args) -> str:
    with pytest.raises(InputError) as err:
        call(*args)
    return str(err.value)


def test_a_repeated_id_names_its_row_and_the_row_it_repeats(tmp_path):
    path = tmp_path / "f.npz"
    np.savez(path, features=FEATURES, ids=np.array(["a", "b", "c", "b"]))
    assert _refusal(read_features, path) == f"{path}: id 'b' at row 3 repeats row 1; ids must be unique"
    ids = tmp_path / "ids.txt"
    ids.write_text("x\ny\n\nx\nz\n")  # blank lines are skipped: the repeat is the third id
    np.save(tmp_path / "f.npy", FEATURES)
    assert _refusal(read_features, tmp_path / "f.npy", ids) == f"{ids}: id 'x' at row 2 repeats row 0; ids must be unique"


def test_one_id_per_row_exactly(tmp_path):
    path = tmp_path / "f.npz"
    np.savez(path, features=FEATURES, ids=np.array(["a", "b", "c"]))
    assert _refusal(read_features, path) == f"{path}: 3 ids for 4 feature rows; expected one id per row"
    np.savez(path, features=FEATURES, ids=np.array(["a", "b", "c", "d", "e"]))
    assert _refusal(read_features, path) == f"{path}: 5 ids for 4 feature rows; expected one id per row"
    np.savez(path, features=FEATURES, ids=np.array(["a", "b", "c", "d"]))
    table = read_features(path)
    assert table.ids == ["a", "b", "c", "d"] and table.features.dtype == np.float64
    assert table.features.tolist() == FEATURES.tolist() and table.labels is None


def test_the_first_non_finite_row_and_their_count(tmp_path):
    bad = FEATURES.copy()
    bad[2, 0], bad[3, 2] = np.inf, np.nan
    path = tmp_path / "f.npz"
    np.savez(path, features=bad, ids=np.array(list("abcd")))
    assert _refusal(read_features, path) == (f"{path}: feature row 2 contains NaN or infinite values (2 such row(s)); "
                                             "expected finite numbers")


def test_labels_of_another_file_are_matched_by_id_and_extra_ids_are_ignored(tmp_path):
    np.savez(tmp_path / "f.npz", features=FEATURES, ids=np.array(["a", "b", "c", "d"]))
    np.savez(tmp_path / "l.npz", ids=np.array(["d", "extra", "b", "a", "c"]), labels=np.array([3, 9, 1, 0, 2]),
             names=np.array(list("pqrs")))
    table = read_labels(tmp_path / "l.npz", read_features(tmp_path / "f.npz"))
    assert table.labels.tolist() == [0, 1, 2, 3] and table.names == list("pqrs")


def test_labels_missing_an_id_or_repeating_one_are_refused(tmp_path):
    np.savez(tmp_path / "f.npz", features=FEATURES, ids=np.array(["a", "b", "c", "d"]))
    table = read_features(tmp_path / "f.npz")
    missing = tmp_path / "missing.npz"
    np.savez(missing, ids=np.array(["a", "b"]), labels=np.array([0, 1]))
    assert _refusal(read_labels, missing, table) == (f"{missing}: no row for image id 'c' (feature row 2; 2 feature id(s) "
                                                     "missing); the labels must cover every feature id")
    repeated = tmp_path / "repeated.npz"
    np.savez(repeated, ids=np.array(["a", "b", "c", "d", "a"]), labels=np.array([0, 1, 2, 3, 4]))
    assert _refusal(read_labels, repeated, table) == f"{repeated}: id 'a' at row 4 repeats row 0; ids must be unique"


def test_label_values_by_kind(tmp_path):
    path = tmp_path / "l.npz"
    assert check_labels(path, np.array([2.0, 0.0, 1.0]), 3).tolist() == [2, 0, 1]
    assert check_labels(path, np.array([True, False]), 2).tolist() == [1, 0]
    assert check_labels(path, np.array([0, 0]), 2).tolist() == [0, 0]  # 0 is a class
    assert _refusal(check_labels, path, np.array([1.0, 2.5, 0.5]), 3) == f"{path}: label row 1 is not a whole number"
    assert _refusal(check_labels, path, np.array([1.0, np.nan]), 2) == f"{path}: label row 1 is not a whole number"
    assert _refusal(check_labels, path, np.array([3, 0, -1, -2]), 4) == f"{path}: label row 2 is negative; classes are 0, 1, ..."
    assert _refusal(check_labels, path, np.array([[0, 1], [1, 2], [3, 0]]), 3) == (
        f"{path}: attribute row 1 holds [1, 2]; an (N, L) label matrix must be 0/1")
    assert _refusal(check_labels, path, np.array([0, 1]), 3) == (
        f"{path}: labels have shape (2,); expected (3,) classes or (3, L) 0/1 attributes")
    assert _refusal(check_labels, path, np.array(["a", "b"]), 2) == f"{path}: labels must be integers; got <U1"
