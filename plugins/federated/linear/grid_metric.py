"""Leak correlation, and the true-vs-recovered grid PNG of the federated scenario.

Only a metric sees both the truth and the attack's estimate, so the grid of true versus
recovered training samples (appendix A.2's "what leaks") is written here.
"""

from __future__ import annotations

import numpy as np

from vispriv.harness import CellContext, Images, Metric
from vispriv.harness.artifacts import save_image_grid
from vispriv.harness.errors import InputError


class LeakCorrelation(Metric):
    """Mean Pearson correlation of recovered and true pixels (1: exact up to contrast); writes the grid."""

    name = "leak-correlation"
    version = "1.0"
    scenario = "federated-learning"
    consumes = (Images,)
    higher_is_better = {"pixel_correlation": True}
    headline = ("pixel_correlation",)

    def score(self, truth: Images, estimate: Images, ctx: CellContext) -> dict[str, float]:
        index = {id_: i for i, id_ in enumerate(truth.ids)}
        try:
            t = truth.images[[index[i] for i in estimate.ids]]
        except KeyError as exc:
            raise InputError(f"estimate id {exc.args[0]!r} is not a training target") from None
        e = estimate.images
        if t.shape != e.shape:
            raise InputError(f"estimate images {e.shape} do not match truth {t.shape}")
        a = t.reshape(len(t), -1) - t.reshape(len(t), -1).mean(axis=1, keepdims=True)
        b = e.reshape(len(e), -1) - e.reshape(len(e), -1).mean(axis=1, keepdims=True)
        denom = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
        corr = np.where(denom > 0, (a * b).sum(axis=1) / np.where(denom > 0, denom, 1), 0.0)
        if ctx.artifact_dir is not None and len(t):
            save_image_grid(
                ctx.artifact("leak_true_vs_recovered.png"), [t, e], ["true", "recovered"], estimate.ids, max_cols=10
            )
        return {"pixel_correlation": float(corr.mean())}
