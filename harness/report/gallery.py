"""Side-by-side reconstructions: one figure per scenario, a row of truths and one row per cell.

Cells that reconstruct images log a small sample of (truth, estimate) pairs
(:data:`vispriv.harness.artifacts.RECONSTRUCTION_SAMPLE`, written with
:func:`vispriv.harness.artifacts.save_reconstruction_sample`). The report downloads the
samples of its rows and stacks those that show the same image ids, so a reader compares
attacks and defenses on the same crops at a glance (e.g. Raw, Database and LDP-Feat
ε = 10 / 16 of LDP-Feat (ICCV 2023) Tables 1 and 4). Rows are sorted by the cells' mean SSIM over
the sample, best first; each row title names the cell and that SSIM, the ``ssim`` metric's
own (:func:`vispriv.harness.similarity.ssim`: colour, on the float images), which the sample
records per image when it is written. A sample written before it did has only its 8-bit
copies: its SSIM is computed on them and the title says ``8-bit``.
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
from vispriv.harness.similarity import ssim


@dataclass
class Sample:
    """One cell's logged reconstruction sample: 8-bit pictures and, when recorded, each pair's SSIM."""

    label: str
    ids: tuple[str, ...]
    truth: np.ndarray
    estimate: np.ndarray
    #: Each pair's SSIM on the float images the metrics scored; ``None`` for a sample written without it.
    ssim: np.ndarray | None = None

    def mean_ssim(self) -> float:
        """The mean SSIM over the sample: the recorded values, else :func:`~vispriv.harness.similarity.ssim`
        of the 8-bit copies (NaN where images are under 3 x 3 pixels)."""
        if self.ssim is not None:
            return float(np.mean(self.ssim))
        if min(self.truth.shape[1:3]) < 3:
            return float("nan")
        return float(np.mean([ssim(t / 255.0, e / 255.0) for t, e in zip(self.truth, self.estimate)]))

    def ssim_text(self) -> str:
        """The row title's SSIM, e.g. ``SSIM 0.606 on these`` (``8-bit`` where it was computed on the copies)."""
        value = self.mean_ssim()
        if np.isnan(value):
            return "no SSIM: images under 3 x 3 pixels"
        return f"SSIM {value:.3f} on these" + ("" if self.ssim is not None else ", 8-bit")


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
                scores = data["ssim"] if "ssim" in data.files else None
        label = f"{attacks[row.attack]} vs {defenses[row.defense]}"
        if len(datasets[row.scenario]) > 1:
            out[f"{row.scenario}: {row.dataset}"].append(Sample(f"{label} on {row.dataset}", ids, truth, estimate, scores))
        else:
            out[row.scenario].append(Sample(label, ids, truth, estimate, scores))
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
                ["truth"] + [wrap_title(f"{s.label} ({s.ssim_text()})") for _, s in scored],
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
        Sample(f"{s.label} (+{extra[k]} identical)", s.ids, s.truth, s.estimate, s.ssim) if extra[k] else s
        for k, s in first.items()
    ]


def ranked(samples: list[Sample]) -> list[tuple[float, Sample]]:
    """(mean SSIM over the sample, sample), best first; ties keep the given order, NaN last."""
    scored = [(s.mean_ssim(), s) for s in samples]
    return sorted(scored, key=lambda t: -t[0] if not np.isnan(t[0]) else np.inf)


def wrap_title(text: str, width: int = 28) -> str:
    """Break a long row title into lines of at most ``width`` characters at spaces or commas."""
    lines, line = [], ""
    for word in re.split(r"(?<=[ ,])", text):
        if line and len(line) + len(word) > width:
            lines.append(line.rstrip())
            line = ""
        line += word
    return "\n".join([*lines, line.rstrip()])
