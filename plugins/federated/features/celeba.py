"""CelebA's own annotation files: the 40 face attributes and the train / validation / test partition.

``list_attr_celeba.txt``: line 1 the image count, line 2 the attribute names, then one line
per image, ``<image id> v_1 ... v_L`` with v in {-1, 1}. ``list_eval_partition.txt``: one
line per image, ``<image id> p`` with p = 0 (train), 1 (validation), 2 (test).

DPHE (ICCV 2017) section 3.3 uses the validation images (19,868) as the aggregator's
initialisation data and splits the training images (162,770) among five users; here the
partition's 1 is the initialisation set, 0 the users' data and 2 the test split. Every
check fails with one line naming the file and the line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vispriv.harness.errors import InputError


@dataclass
class Attributes:
    """Image ids, their (N, L) 0/1 attributes and the L attribute names."""

    ids: list[str]
    values: np.ndarray
    names: list[str]


def _lines(path: Path) -> list[str]:
    path = path.expanduser()
    if not path.is_file():
        raise InputError(f"{str(path)!r} does not exist")
    return path.read_text().splitlines()


def read_attributes(path: str | Path) -> Attributes:
    """``list_attr_celeba.txt``: -1 / 1 become 0 / 1."""
    path = Path(path)
    lines = _lines(path)
    if len(lines) < 2:
        raise InputError(f"{path}: expected an image count on line 1 and attribute names on line 2")
    try:
        count = int(lines[0].strip())
    except ValueError:
        raise InputError(f"{path} line 1: {lines[0].strip()[:40]!r} is not the image count") from None
    names = lines[1].split()
    ids, rows = [], []
    for number, line in enumerate(lines[2:], start=3):
        parts = line.split()
        if not parts:
            continue
        values = parts[1:]
        if len(values) != len(names):
            raise InputError(f"{path} line {number} ({parts[0]}): {len(values)} values for {len(names)} attributes")
        if any(v not in ("-1", "1") for v in values):
            bad = next(v for v in values if v not in ("-1", "1"))
            raise InputError(f"{path} line {number} ({parts[0]}): value {bad!r}; attributes are -1 or 1")
        ids.append(parts[0])
        rows.append([v == "1" for v in values])
    if len(ids) != count:
        raise InputError(f"{path}: line 1 announces {count} images, the file lists {len(ids)}")
    return Attributes(ids, np.asarray(rows, np.int64).reshape(len(ids), len(names)), names)


def read_partition(path: str | Path) -> dict[str, int]:
    """``list_eval_partition.txt``: image id -> 0 (train), 1 (validation), 2 (test)."""
    path = Path(path)
    out: dict[str, int] = {}
    for number, line in enumerate(_lines(path), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or parts[1] not in ("0", "1", "2"):
            raise InputError(f"{path} line {number}: {line.strip()[:60]!r}; expected '<image id> 0|1|2'")
        out[parts[0]] = int(parts[1])
    return out
