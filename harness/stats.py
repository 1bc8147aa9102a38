"""The one mean ± standard error of the project: image metrics over images, a report cell over
its runs, a deletion share over albums."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def mean_se(values: Iterable[float]) -> tuple[float, float]:
    """Mean and standard error of the mean (sample std / sqrt(n)); the standard error of fewer
    than two values is undefined (NaN; the report then shows ``n = 1``), not zero."""
    arr = np.asarray(list(values), dtype=np.float64)
    se = float(arr.std(ddof=1) / np.sqrt(len(arr))) if len(arr) > 1 else float("nan")
    return float(arr.mean()), se
