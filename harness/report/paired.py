"""Paired differences between cells scored on the same images: the ladder of a results table.

Two attacks scored on the same private images differ by less noise than their separate
standard errors suggest: image difficulty is shared. Cells that log a per-image CSV
(an artifact named ``*_per_image.csv`` with an ``id`` column and one column per metric,
e.g. ``reconstruction_per_image.csv``) can be compared image by image. For one metric the
report ranks the cells of a (scenario, dataset) best first and gives, for each adjacent
pair, the mean per-image difference, its standard error ``sd / sqrt(n)`` over the n images
both scored, and their ratio -- the "each adjacent gap >= 2 standard errors" check of a
table such as Table 1 of LDP-Feat (ICCV 2023). When the images overlap (half-overlapping crops) they
are not independent and the effective n is smaller than n. For grid crops (ids
``photo@r,c``, :func:`vispriv.harness.data.bundled.grid_crops`) the report therefore also
gives an overlap-robust standard error (:func:`overlap_robust_se`) and the effective n it
implies; ``ids`` (a regular expression) restricts the comparison to a subset of images, e.g.
the mutually disjoint crops of a half-overlapping grid (``@[02],[02]$`` for ``test_grid: 4``),
and ``cells`` to the cells whose label matches (two rows compared directly).
"""

from __future__ import annotations

import csv
import math
import os
import re
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from vispriv.harness.errors import VisprivError
from vispriv.harness.report.tables import CellRow, config_labels, is_utility, sense_text

#: Artifact names that carry per-image scores end with this.
PER_IMAGE_SUFFIX = "_per_image.csv"
#: Id of crop (r, c) of a photo's grid (:func:`vispriv.harness.data.bundled.grid_crops`).
CROP_ID = re.compile(r"^(?P<photo>.+)@(?P<r>\d+),(?P<c>\d+)$")
#: Kernel bandwidth of :func:`overlap_robust_se`, in grid steps (half-overlapping crops share pixels up to 1 step apart).
OVERLAP_BANDWIDTH = 2.0


def overlap_robust_se(ids: list[str], values: np.ndarray, bandwidth: float = OVERLAP_BANDWIDTH) -> float | None:
    """Standard error of the mean of ``values`` over grid crops that overlap, or None when an id is no grid crop.

    The spatial HAC estimator of Conley (J. Econometrics 1999) with a Bartlett product kernel:
    ``V = sum_ij w_ij e_i e_j / (n (n - 1))``, ``e = values - mean``, ``w_ij = (1 - |dr| / b)+
    (1 - |dc| / b)+`` for crops of the same photo ``dr`` rows and ``dc`` columns apart, 0
    across photos. With b = 2 the weight of two half-overlapping crops is the share of
    pixels they have in common, and crops that share none get weight 0 (for a grid of
    disjoint crops the estimate is then conservative: neighbours get weight 1/2). With
    ``w = I`` it is the usual ``sd / sqrt(n)``; the product kernel keeps ``V >= 0``.
    """
    n = len(ids)
    parsed = [CROP_ID.match(i) for i in ids]
    if n < 2 or not all(parsed):
        return None
    photo = np.array([m["photo"] for m in parsed])
    rc = np.array([(int(m["r"]), int(m["c"])) for m in parsed], float)
    e = np.asarray(values, float) - float(np.mean(values))
    dist = np.abs(rc[:, None, :] - rc[None, :, :])
    w = np.prod(np.clip(1.0 - dist / bandwidth, 0.0, None), axis=-1) * (photo[:, None] == photo[None, :])
    return float(math.sqrt(max(float(e @ w @ e), 0.0) / (n * (n - 1))))


@dataclass
class Step:
    """One rung: ``label`` and its mean, and the paired difference to the next rung (None for the last)."""

    label: str
    mean: float
    n: int
    diff: float | None = None
    diff_se: float | None = None
    n_pairs: int = 0
    #: :func:`overlap_robust_se` of the difference (None when the images are no grid crops).
    diff_se_overlap: float | None = None

    @property
    def ratio(self) -> float | None:
        """diff / its standard error (inf for a constant non-zero difference, None when undefined)."""
        if self.diff is None or self.diff_se is None:
            return None
        if self.diff_se == 0:
            return math.copysign(math.inf, self.diff) if self.diff else None
        return self.diff / self.diff_se

    @property
    def ratio_overlap(self) -> float | None:
        """diff / its overlap-robust standard error (None when undefined)."""
        if self.diff is None or not self.diff_se_overlap:
            return None
        return self.diff / self.diff_se_overlap

    @property
    def n_effective(self) -> float | None:
        """The n for which ``sd / sqrt(n)`` equals the overlap-robust standard error."""
        if self.diff_se is None or not self.diff_se_overlap:
            return None
        return self.n_pairs * (self.diff_se / self.diff_se_overlap) ** 2


@dataclass
class Ladder:
    """Cells of one (scenario, dataset) ranked by one metric, best first."""

    metric: str
    scenario: str
    dataset: str
    higher_is_better: bool
    steps: list[Step]
    #: The image-id filter the scores were read with (None: all images).
    ids: str | None = None


def metric_column(metric: str) -> str:
    """The per-image CSV column of a logged metric: its name after the last ``/`` (images/ssim -> ssim)."""
    return metric.rsplit("/", 1)[-1]


def _compile(pattern: str | None, option: str, example: str) -> re.Pattern[str] | None:
    """``pattern`` compiled, None for none, or one clear error naming the option."""
    try:
        return re.compile(pattern) if pattern else None
    except re.error as exc:
        raise VisprivError(f"{option} {pattern!r} is not a regular expression ({exc}); e.g. {example}") from exc


def per_image_scores(tracker: Any, rows: list[CellRow], column: str, ids: str | None = None) -> dict[str, dict[str, float]]:
    """run id -> {image id -> value of ``column``} from each row's first per-image CSV that has it.

    ``ids``: only image ids that match this regular expression (``re.search``).
    """
    keep = _compile(ids, "--paired-ids", "'@[02],[02]$'")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    out: dict[str, dict[str, float]] = {}
    for row in rows:
        names = sorted(i.path for i in tracker.client.list_artifacts(row.run_id) if i.path.endswith(PER_IMAGE_SUFFIX))
        for name in names:
            with tempfile.TemporaryDirectory() as tmp:
                local = tracker.client.download_artifacts(row.run_id, name, tmp)
                with open(local, newline="") as fh:
                    table = list(csv.DictReader(fh))
            if table and column in table[0] and "id" in table[0]:
                out[row.run_id] = {r["id"]: float(r[column]) for r in table if keep is None or keep.search(r["id"])}
                break
    return out


def ladders(
    rows: list[CellRow], metric: str, scores: dict[str, dict[str, float]], ids: str | None = None, cells: str | None = None
) -> list[Ladder]:
    """One ladder per (scenario, dataset) over the rows that have per-image ``scores`` (read with filter ``ids``).

    ``cells``: only cells whose label (``attack vs defense``, as shown) matches this regular
    expression, e.g. two rows to compare directly.
    """
    attacks, defenses = config_labels(rows, "attack"), config_labels(rows, "defense")
    keep = _compile(cells, "--paired-cells", "'epsilon=(10|16)'")
    groups: dict[tuple[str, str], list[CellRow]] = defaultdict(list)
    for row in rows:
        if scores.get(row.run_id) and (keep is None or keep.search(f"{attacks[row.attack]} vs {defenses[row.defense]}")):
            groups[(row.scenario, row.dataset)].append(row)
    out = []
    for (scenario, dataset), group in sorted(groups.items()):
        higher = next((r.higher_is_better[metric] for r in group if metric in r.higher_is_better), True)
        means = {r.run_id: float(np.mean(list(scores[r.run_id].values()))) for r in group}
        ranked = sorted(group, key=lambda r: -means[r.run_id] if higher else means[r.run_id])
        steps = []
        for i, row in enumerate(ranked):
            mine = scores[row.run_id]
            step = Step(f"{attacks[row.attack]} vs {defenses[row.defense]}", means[row.run_id], len(mine))
            if i + 1 < len(ranked):
                theirs = scores[ranked[i + 1].run_id]
                shared = sorted(set(mine) & set(theirs))
                d = np.array([mine[k] - theirs[k] for k in shared]) * (1.0 if higher else -1.0)
                step.n_pairs = len(shared)
                if len(shared):
                    step.diff = float(d.mean())
                if len(shared) > 1:
                    step.diff_se = float(d.std(ddof=1) / math.sqrt(len(shared)))
                    step.diff_se_overlap = overlap_robust_se(shared, d)
            steps.append(step)
        out.append(Ladder(metric, scenario, dataset, higher, steps, ids))
    return out


def sense(ladder: Ladder) -> str:
    """What the ladder's values mean, in the tables' words (``privacy: higher = attack succeeds``)."""
    return sense_text(ladder.metric, ladder.higher_is_better, colour=False)


def order_text(ladder: Ladder) -> str:
    """How the rows are ranked: by the attack's success (privacy metrics) or by utility."""
    return "cells best first" if is_utility(ladder.metric) else "cells ranked from the most successful attack down"


def to_markdown(ladder: Ladder, digits: int = 3) -> str:
    """The ladder as a markdown table with a one-paragraph legend."""
    subset = f"; images matching `{ladder.ids}` only" if ladder.ids else ""
    lines = [
        f"**Paired differences, {ladder.metric}** ({ladder.scenario}: {ladder.dataset}; {sense(ladder)}{subset}) "
        f"-- {order_text(ladder)}; each gap is to the next row, averaged over the images both scored, "
        "± its standard error; gap / s.e. ≥ 2 separates the rows. Overlapping images are not "
        "independent: for grid crops (`photo@r,c`) the last two columns give the gap over its "
        "overlap-robust standard error (Conley's spatial HAC, Bartlett kernel over the crops' shared "
        "pixels) and the effective n it implies.\n",
        "| rank | cell | mean | n | gap to next | gap / s.e. | n paired | gap / s.e. (overlap-robust) | effective n |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, s in enumerate(ladder.steps, 1):
        gap = "–" if s.diff is None else f"{s.diff:+.{digits}f}" + ("" if s.diff_se is None else f" ± {s.diff_se:.{digits}f}")
        ratio = "–" if s.ratio is None else f"{s.ratio:.1f}"
        pairs = str(s.n_pairs) if s.diff is not None else "–"
        robust = "–" if s.ratio_overlap is None else f"{s.ratio_overlap:.1f}"
        n_eff = "–" if s.n_effective is None else f"{s.n_effective:.0f}"
        lines.append(f"| {i} | {s.label} | {s.mean:.{digits}f} | {s.n} | {gap} | {ratio} | {pairs} | {robust} | {n_eff} |")
    return "\n".join(lines) + "\n"
