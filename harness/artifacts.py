"""Helpers plugins use to write artifacts people would rather look at than read.

Each file is written whole or not at all (:mod:`vispriv.harness.writes`); an OS refusal is one
``cannot write PATH: reason`` line.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vispriv.harness.data.bundled import to_uint8
from vispriv.harness.similarity import ssim
from vispriv.harness.writes import write_file


def save_image_grid(
    path: Path,
    rows: Sequence[np.ndarray],
    row_titles: Sequence[str],
    col_titles: Sequence[str] | None = None,
    max_cols: int = 8,
) -> Path:
    """Save a PNG grid: one row per image stack (e.g. original | reconstruction).

    Each entry of ``rows`` is an array (N, H, W, C) or (N, H, W) in [0, 1]; the first
    ``max_cols`` images of every row are shown. Layout: :func:`image_grid_figure`.
    """
    import matplotlib.pyplot as plt

    fig = image_grid_figure(rows, row_titles, col_titles, max_cols)
    try:
        return write_file(path, lambda tmp: fig.savefig(tmp, dpi=110))
    finally:
        plt.close(fig)


def image_grid_figure(
    rows: Sequence[np.ndarray],
    row_titles: Sequence[str],
    col_titles: Sequence[str] | None = None,
    max_cols: int = 8,
) -> Any:
    """The matplotlib figure :func:`save_image_grid` writes.

    Row titles are written horizontally to the left of their row (multi-line titles as given)
    in a margin as wide as the longest line, and a row is tall enough for its title's lines,
    so long titles (a cell's label and its settings) never run into the next row's.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_cols = min(max_cols, *(len(r) for r in rows))
    lines = [str(t).splitlines() or [""] for t in row_titles]
    margin_in = 0.3 + 0.065 * max(len(line) for title in lines for line in title)
    row_in = max(1.7, 0.4 + 0.13 * max(len(title) for title in lines))
    width_in = 1.6 * n_cols + margin_in
    fig, axes = plt.subplots(len(rows), n_cols, figsize=(width_in, row_in * len(rows)), squeeze=False)
    for r, (stack, title) in enumerate(zip(rows, row_titles)):
        for c in range(n_cols):
            ax = axes[r][c]
            img = np.clip(np.asarray(stack[c], dtype=np.float32), 0, 1)
            if img.ndim == 3 and img.shape[-1] == 1:
                img = img[..., 0]
            ax.imshow(img, cmap="gray" if img.ndim == 2 else None, vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(title, fontsize=8, rotation=0, ha="right", va="center", labelpad=6)
            if r == 0 and col_titles is not None and c < len(col_titles):
                ax.set_title(col_titles[c], fontsize=7)
    fig.tight_layout()
    # tight_layout shrinks the images of a one- or two-column grid less than the titles need:
    # the margin is kept for them whatever it did.
    fig.subplots_adjust(left=max(fig.subplotpars.left, margin_in / width_in))
    return fig


def save_csv(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    """Write a list of dicts as CSV (columns are the union of keys, in first-seen order)."""
    columns: list[str] = []
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(rows)
    return write_file(path, lambda tmp: tmp.write_bytes(buf.getvalue().encode()))


#: File name of a reconstruction sample (see :func:`save_reconstruction_sample`).
RECONSTRUCTION_SAMPLE = "reconstruction_sample.npz"


def spread_indices(n: int, k: int) -> np.ndarray:
    """``min(n, k)`` indices spread evenly over ``range(n)`` (first and last included)."""
    if n <= 0 or k <= 0:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.round(np.linspace(0, n - 1, min(n, k))).astype(np.int64))


def save_reconstruction_sample(path: Path, ids: Sequence[str], truth: np.ndarray, estimate: np.ndarray) -> Path:
    """Save a few (truth, estimate) image pairs as 8-bit arrays for the report's side-by-side gallery.

    ``truth`` and ``estimate`` are (N, H, W, C) in [0, 1] with the same shape, as the metrics
    compare them. Beside the 8-bit pictures the file keeps each pair's SSIM
    (:func:`vispriv.harness.similarity.ssim`, the ``ssim`` metric's) computed on these float
    images (the estimate clipped to [0, 1], as the metrics clip it), so the gallery's row titles
    quote the number the table shows, not one of the rounded copies. The report
    (:func:`vispriv.harness.report.gallery.gallery_pngs`) stacks the samples of every cell
    that shows the same ids, one row per cell, under one row of truths.
    """
    truth, estimate = np.asarray(truth), np.asarray(estimate)
    if truth.shape != estimate.shape or truth.ndim != 4 or len(ids) != len(truth):
        raise ValueError(f"truth {truth.shape} and estimate {estimate.shape} must both be (N, H, W, C) with N = {len(ids)} ids")
    clipped = np.clip(estimate, 0.0, 1.0)
    small = min(truth.shape[1:3]) < 3  # no SSIM below 3 x 3 pixels: the gallery says so
    scores = np.array([np.nan if small else ssim(t, e) for t, e in zip(truth, clipped)], dtype=np.float64)
    arrays = {"ids": np.asarray(list(ids), dtype=str), "truth": to_uint8(truth), "estimate": to_uint8(estimate),
              "ssim": scores}
    return write_file(path, lambda tmp: np.savez_compressed(tmp, **arrays))


#: File name of a defense's kept masks (see :func:`kept_masks_csv`).
KEPT_MASKS = "kept_masks.csv"


def kept_masks_csv(album_ids: Sequence[str], keeps: Sequence[np.ndarray]) -> str:
    """The kept mask of every album as CSV text: columns ``album``, ``photo``, ``kept``.

    One row per photo: ``photo`` is the photo's position in its album (0, 1, ...), in the
    order the dataset gives them, and ``kept`` is 1 when the release shows the photo, 0
    when the defense deleted it. The kept photos are the release itself, so the file tells
    no more than the release does beside which of the album's photos they are.
    ``vispriv report --budget-deletions`` compares two cells' masks album by album.
    """
    if len(album_ids) != len(keeps):
        raise ValueError(f"{len(album_ids)} album ids but {len(keeps)} masks")
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["album", "photo", "kept"])
    for album, keep in zip(album_ids, keeps):
        writer.writerows((album, i, int(k)) for i, k in enumerate(np.asarray(keep, dtype=bool)))
    return buf.getvalue()


def read_kept_masks(path: Path) -> dict[str, np.ndarray]:
    """Album id -> boolean kept mask (photo order) from a :func:`kept_masks_csv` file.

    Raises :class:`~vispriv.harness.errors.InputError` (one line) when the file has other
    columns, a ``kept`` other than 0/1, or an album whose photos are not 0, 1, ... in order.
    """
    from vispriv.harness.errors import InputError

    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header != ["album", "photo", "kept"]:
            raise InputError(f"{Path(path).name}: expected the columns album,photo,kept; got {header}")
        photos: dict[str, list[bool]] = {}
        for line, row in enumerate(reader, start=2):
            if len(row) != 3 or row[2] not in ("0", "1") or not row[1].isdigit():
                raise InputError(f"{Path(path).name} line {line}: expected album,<photo index>,<0 or 1>; got {row}")
            album, photo = row[0], int(row[1])
            kept = photos.setdefault(album, [])
            if photo != len(kept):
                raise InputError(f"{Path(path).name} line {line}: photo {photo} of album {album!r} out of order "
                                 f"(expected {len(kept)})")
            kept.append(row[2] == "1")
    return {album: np.array(kept, dtype=bool) for album, kept in photos.items()}
