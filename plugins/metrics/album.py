"""Metric ``protected-k`` (album pruning (AAAI 2020), eq. 2 and Table 1).

The protected-k of an album is the number of places ranked above the true one (the rank
of the true place minus one). Ties are resolved in the true place's favour, exactly as
the generic ``topk-accuracy`` metric does, so ``protected_k >= k`` iff not top-k
accurate. Higher means more privacy, so its direction (which, as for every metric an
attack is scored with, says how good the attack is) is "lower is better".
"""

from __future__ import annotations

import numpy as np

from vispriv.harness import CellContext, Labels, Metric, Rankings
from vispriv.harness.errors import InputError


class ProtectedK(Metric):
    """Mean protected-k over albums (the number of places scoring strictly above the truth)."""

    name = "protected-k"
    version = "1.0"
    scenario = "album-sharing"
    consumes = (Rankings,)
    truth_types = (Labels,)
    higher_is_better = {"protected_k": False, "protected_k_median": False}  # the attack's view

    def score(self, truth: Labels, estimate: Rankings, ctx: CellContext) -> dict[str, float]:
        index = {id_: i for i, id_ in enumerate(truth.ids)}
        try:
            true = truth.labels[[index[i] for i in estimate.ids]]
        except KeyError as exc:
            raise InputError(f"estimate id {exc.args[0]!r} has no true place") from None
        if len(true) == 0:
            raise InputError("protected-k of an empty estimate is undefined")
        true_scores = estimate.scores[np.arange(len(true)), true]
        above = (estimate.scores > true_scores[:, None]).sum(axis=1)
        return {"protected_k": float(above.mean()), "protected_k_median": float(np.median(above))}
