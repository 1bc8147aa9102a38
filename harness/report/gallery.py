"""Side-by-side reconstructions: one figure per scenario, a row of truths and one row per cell.

Cells that reconstruct images log a small sample of (truth, estimate) pairs
(:data:`vispriv.harness.artifacts.RECONSTRUCTION_SAMPLE`, written with
:func:`vispriv.harness.artifacts.save_reconstruction_sample`). The report downloads the
samples of its rows and stacks those that show the same image ids, so a reader compares
attacks and defenses on the same crops at a glance (e.g. Raw, Database and LDP-Feat
ε = 10 / 16 of LDP-Feat (ICCV 2023) Tables 1 and 4). Rows are sorted by the cells' mean SSIM over
the sample, best first; each row title names the cell and that SSIM.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vispriv.harness.artifacts import RECONSTRUCTION_SAMPLE, save_image_grid
from vispriv.harness.report.tables import CellRow, config_labels, file_stem


@dataclass
class Sample:
    """One cell's logged reconstruction sample."""

    label: str
    ids: tuple[str, ...]
    truth: np.ndarray
    estimate: np.ndarray

    def mean_ssim(self) -> float:
        from skimage.metrics import structural_similarity

        def grey(a: np.ndarray) -> np.ndarray:
            return a.astype(np.float64).mean(axis=-1) / 255.0

        return float(np.mean([structural_similarity(grey(t), grey(e), data_range=1.0)
                              for t, e in zip(self.truth, self.estimate)]))


def collect_samples(tracker: Any, rows: list[CellRow]) -> dict[str, list[Sample]]:
    """The reconstruction samples of ``rows`` by scenario (rows without one are skipped); by
    ``scenario: dataset`` where a scenario has several datasets, each sample's label then naming
    its dataset too (a gallery's PNG has no title of its own)."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    attacks, defenses = config_labels(rows, "attack"), config_labels(rows, "defense")
    datasets: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        datasets[row.scenario].add(row.dataset)
    out: dict[str, list[Sample]] = defaultdict(list)
    for row in rows:
        if not any(info.path == RECONSTRUCTION_SAMPLE for info in tracker.client.list_artifacts(row.run_id)):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            local = tracker.client.download_artifacts(row.run_id, RECONSTRUCTION_SAMPLE, tmp)
            with np.load(local) as data:
                ids, truth, estimate = tuple(str(i) for i in data["ids"]), data["truth"], data["estimate"]
        label = f"{attacks[row.attack]} vs {defenses[row.defense]}"
        if len(datasets[row.scenario]) > 1:
            out[f"{row.scenario}: {row.dataset}"].append(Sample(f"{label} on {row.dataset}", ids, truth, estimate))
        else:
            out[row.scenario].append(Sample(label, ids, truth, estimate))
    return out


def gallery_pngs(samples: dict[str, list[Sample]], out_dir: Path, max_rows: int = 12) -> list[tuple[str, Path]]:
    """One PNG per (scenario, set of shown ids): truths, then up to ``max_rows`` cells, best SSIM first."""
    written = []
    for scenario, group in sorted(samples.items()):
        by_ids: dict[tuple[str, ...], list[Sample]] = defaultdict(list)
        for s in group:
            by_ids[s.ids].append(s)
        for n, (ids, same) in enumerate(sorted(by_ids.items(), key=lambda kv: -len(kv[1]))):
            scored = ranked(merge_identical(same))[:max_rows]
            stem = file_stem(scenario) + (f"_{n}" if n else "")
            path = save_image_grid(
                out_dir / f"gallery_{stem}.png",
                [scored[0][1].truth / 255.0] + [s.estimate / 255.0 for _, s in scored],
                ["truth"] + [wrap_title(f"{s.label} (SSIM {v:.2f} on these)") for v, s in scored],
                list(ids),
                max_cols=len(ids),
            )
            written.append((scenario, path))
    return written


def merge_identical(samples: list[Sample]) -> list[Sample]:
    """One row per distinct estimate: cells whose reconstructions are pixel-identical (a baseline
    such as ``flat-grey`` run against every defense) share the first one's row, titled
    ``<its label> (+N identical)``."""
    first: dict[bytes, Sample] = {}
    extra: dict[bytes, int] = {}
    for s in samples:
        key = s.estimate.tobytes()
        if key in first:
            extra[key] += 1
        else:
            first[key], extra[key] = s, 0
    return [
        Sample(f"{s.label} (+{extra[k]} identical)", s.ids, s.truth, s.estimate) if extra[k] else s
        for k, s in first.items()
    ]


def ranked(samples: list[Sample]) -> list[tuple[float, Sample]]:
    """(mean SSIM over the sample, sample), best first; ties keep the given order."""
    return sorted(((s.mean_ssim(), s) for s in samples), key=lambda t: -t[0])


def wrap_title(text: str, width: int = 28) -> str:
    """Break a long row title into lines of at most ``width`` characters at spaces or commas."""
    lines, line = [], ""
    for word in re.split(r"(?<=[ ,])", text):
        if line and len(line) + len(word) > width:
            lines.append(line.rstrip())
            line = ""
        line += word
    return "\n".join([*lines, line.rstrip()])
