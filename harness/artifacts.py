"""Helpers plugins use to write artifacts people would rather look at than read."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vispriv.harness.data.bundled import to_uint8


def save_image_grid(
    path: Path,
    rows: Sequence[np.ndarray],
    row_titles: Sequence[str],
    col_titles: Sequence[str] | None = None,
    max_cols: int = 8,
) -> Path:
    """Save a PNG grid: one row per image stack (e.g. original | reconstruction).

    Each entry of ``rows`` is an array (N, H, W, C) or (N, H, W) in [0, 1]; the first
    ``max_cols`` images of every row are shown.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_cols = min(max_cols, *(len(r) for r in rows))
    fig, axes = plt.subplots(
        len(rows), n_cols, figsize=(1.6 * n_cols + 1.2, 1.7 * len(rows)), squeeze=False
    )
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
                ax.set_ylabel(title, fontsize=8)
            if r == 0 and col_titles is not None and c < len(col_titles):
                ax.set_title(col_titles[c], fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def save_csv(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    """Write a list of dicts as CSV (columns are the union of keys, in first-seen order)."""
    columns: list[str] = []
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


#: File name of a reconstruction sample (see :func:`save_reconstruction_sample`).
RECONSTRUCTION_SAMPLE = "reconstruction_sample.npz"


def spread_indices(n: int, k: int) -> np.ndarray:
    """``min(n, k)`` indices spread evenly over ``range(n)`` (first and last included)."""
    if n <= 0 or k <= 0:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.round(np.linspace(0, n - 1, min(n, k))).astype(np.int64))


def save_reconstruction_sample(path: Path, ids: Sequence[str], truth: np.ndarray, estimate: np.ndarray) -> Path:
    """Save a few (truth, estimate) image pairs as 8-bit arrays for the report's side-by-side gallery.

    ``truth`` and ``estimate`` are (N, H, W, C) in [0, 1] with the same shape. The report
    (:func:`vispriv.harness.report_gallery.gallery_png`) stacks the samples of every cell
    that shows the same ids, one row per cell, under one row of truths.
    """
    truth, estimate = np.asarray(truth), np.asarray(estimate)
    if truth.shape != estimate.shape or truth.ndim != 4 or len(ids) != len(truth):
        raise ValueError(f"truth {truth.shape} and estimate {estimate.shape} must both be (N, H, W, C) with N = {len(ids)} ids")
    np.savez_compressed(path, ids=np.asarray(list(ids), dtype=str), truth=to_uint8(truth), estimate=to_uint8(estimate))
    return path
