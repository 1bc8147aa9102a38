"""Reading a feature file: N x D deep features keyed by image id, with labels beside them.

The layout (written by any script; ``vispriv extract-features`` writes it too):

* features: an ``.npz`` holding ``features`` (N x D, float) and ``ids`` (N strings), or an
  ``.npy`` (N x D) with a text file of N ids, one per line, given as ``ids``;
* labels: ``labels`` ((N,) integer classes, or (N, L) 0/1 attributes) and optional ``names``
  (C class or L attribute names), in the features ``.npz`` or in a separate ``.npz`` that has
  its own ``ids`` (rows are matched by id, in any order).

Section 3.2 of DPHE (ICCV 2017) learns its linear classifiers on such features (2048-d
ResNet-152 outputs for Caltech, 512-d face-network outputs for CelebA in section 3.3).
Every check fails with one line naming the file and the first bad row.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vispriv.harness.errors import InputError
from vispriv.plugins.federated.npy_files import read_npy, read_npz


@dataclass
class FeatureTable:
    """Features (N, D) float64 with their ids; labels (N,) or (N, L) and their names when read."""

    ids: list[str]
    features: np.ndarray
    labels: np.ndarray | None = None
    names: list[str] | None = None


def _ids_of(path: Path, raw: np.ndarray, n: int) -> list[str]:
    ids = [str(i) for i in np.asarray(raw).reshape(-1)]
    if len(ids) != n:
        raise InputError(f"{path}: {len(ids)} ids for {n} feature rows; expected one id per row")
    seen: dict[str, int] = {}
    for row, id_ in enumerate(ids):
        if id_ in seen:
            raise InputError(f"{path}: id {id_!r} at row {row} repeats row {seen[id_]}; ids must be unique")
        seen[id_] = row
    return ids


def _check_features(path: Path, features: np.ndarray) -> np.ndarray:
    if features.ndim != 2 or features.dtype.kind not in "fiu":
        raise InputError(f"{path}: features must be an N x D numeric array; got {features.dtype} {features.shape}")
    bad = np.flatnonzero(~np.isfinite(features).all(axis=1)) if features.dtype.kind == "f" else []
    if len(bad):
        raise InputError(f"{path}: feature row {int(bad[0])} contains NaN or infinite values "
                         f"({len(bad)} such row(s)); expected finite numbers")
    return np.asarray(features, dtype=np.float64)


def check_labels(path: Path, labels: np.ndarray, n: int) -> np.ndarray:
    """(N,) integer classes or (N, L) 0/1 attributes, else one line naming the file and first bad row."""
    arr = np.asarray(labels)
    if arr.ndim not in (1, 2) or len(arr) != n:
        raise InputError(f"{path}: labels have shape {arr.shape}; expected ({n},) classes or ({n}, L) 0/1 attributes")
    if arr.dtype.kind == "f":
        bad = np.flatnonzero(~np.all(np.isfinite(arr) & (arr == np.round(arr)), axis=tuple(range(1, arr.ndim))))
        if len(bad):
            raise InputError(f"{path}: label row {int(bad[0])} is not a whole number")
    elif arr.dtype.kind not in "iub":
        raise InputError(f"{path}: labels must be integers; got {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.ndim == 2:
        bad = np.flatnonzero(~np.isin(arr, (0, 1)).all(axis=1))
        if len(bad):
            raise InputError(f"{path}: attribute row {int(bad[0])} holds {arr[bad[0]].tolist()[:8]}; "
                             "an (N, L) label matrix must be 0/1")
    elif len(arr) and arr.min() < 0:
        raise InputError(f"{path}: label row {int(np.flatnonzero(arr < 0)[0])} is negative; classes are 0, 1, ...")
    return arr


def read_features(features: str | Path, ids: str | Path | None = None) -> FeatureTable:
    """The features file (``.npz`` with ``ids``, or ``.npy`` plus an ids text file), checked."""
    path = Path(os.path.abspath(Path(features).expanduser()))
    if not path.is_file():
        raise InputError(f"feature file {str(path)!r} does not exist")
    if path.suffix == ".npz":
        data = read_npz(path)
        if "features" not in data:
            raise InputError(f"{path}: no 'features' array (found {sorted(data)}); expected features and ids")
        table = _check_features(path, data["features"])
        if "ids" not in data and ids is None:
            raise InputError(f"{path}: no 'ids' array; store the image ids beside the features")
        id_list = _ids_of(path, data["ids"], len(table)) if ids is None else _read_id_lines(Path(ids), len(table))
        labels = check_labels(path, data["labels"], len(table)) if "labels" in data else None
        names = [str(n) for n in data["names"]] if "names" in data else None
        return FeatureTable(id_list, table, labels, names)
    if path.suffix == ".npy":
        if ids is None:
            raise InputError(f"{path}: an .npy holds no ids; give ids: a text file with one image id per line")
        table = _check_features(path, read_npy(path, "feature file"))
        return FeatureTable(_read_id_lines(Path(ids), len(table)), table)
    raise InputError(f"{path}: feature files are .npz or .npy; got {path.suffix or 'no suffix'!r}")


def _read_id_lines(path: Path, n: int) -> list[str]:
    path = Path(os.path.abspath(path.expanduser()))
    if not path.is_file():
        raise InputError(f"ids file {str(path)!r} does not exist")
    return _ids_of(path, np.asarray([line.strip() for line in path.read_text().splitlines() if line.strip()]), n)


def align_to(table_ids: list[str], path: Path, other_ids: list[str]) -> np.ndarray:
    """Row of ``other_ids`` (read from ``path``) for each of ``table_ids``; one line on the first mismatch."""
    where = {id_: row for row, id_ in enumerate(other_ids)}
    missing = [(row, id_) for row, id_ in enumerate(table_ids) if id_ not in where]
    if missing:
        row, id_ = missing[0]
        raise InputError(f"{path}: no row for image id {id_!r} (feature row {row}; {len(missing)} feature id(s) "
                         "missing); the labels must cover every feature id")
    return np.asarray([where[i] for i in table_ids], np.int64)


def read_labels(path: str | Path, table: FeatureTable) -> FeatureTable:
    """Labels from a separate ``.npz`` (``ids``, ``labels``, optional ``names``), matched to the features by id."""
    path = Path(os.path.abspath(Path(path).expanduser()))
    if not path.is_file():
        raise InputError(f"labels file {str(path)!r} does not exist")
    if path.suffix != ".npz":
        raise InputError(f"{path}: a labels file is an .npz with ids and labels; got {path.suffix or 'no suffix'!r}")
    data = read_npz(path)
    for key in ("ids", "labels"):
        if key not in data:
            raise InputError(f"{path}: no {key!r} array (found {sorted(data)}); expected ids and labels")
    labels = check_labels(path, data["labels"], len(np.asarray(data["labels"])))
    rows = align_to(table.ids, path, _ids_of(path, data["ids"], len(labels)))
    names = [str(n) for n in data["names"]] if "names" in data else None
    return FeatureTable(table.ids, table.features, labels[rows], names)
