"""Metric ``protected-k`` (album pruning (AAAI 2020), eq. 2 and Table 1).

The protected-k of an album is the number of places ranked above the true one (the rank
of the true place minus one). Ties are resolved in the true place's favour, exactly as
the generic ``topk-accuracy`` metric does, so ``protected_k >= k`` iff not top-k
accurate. Higher means more privacy, so its direction (which, as for every metric an
attack is scored with, says how good the attack is) is "lower is better".

The same per-album ranks give the standard errors of top-1 and top-5 accuracy
(``top{k}_accuracy_se``, the report's ``mean ± se`` beside ``topk-accuracy``'s values) and
``protected_k_per_image.csv`` (one row per album: ``id``, ``protected_k``,
``top1_accuracy``, ``top5_accuracy`` as 0/1), so ``vispriv report --paired
place/top1_accuracy`` compares two attacks album by album on the same release.
"""

from __future__ import annotations

import numpy as np

from vispriv.harness import Anchor, Anchors, CellContext, Labels, Metric, Rankings, mean_se
from vispriv.harness.artifacts import save_csv
from vispriv.harness.errors import InputError


class ProtectedK(Metric):
    """Mean protected-k over albums (the number of places scoring strictly above the truth)."""

    name = "protected-k"
    version = "1.0"
    scenario = "album-sharing"
    consumes = (Rankings,)
    truth_types = (Labels,)
    higher_is_better = {  # the attack's view
        "protected_k": False,
        "protected_k_median": False,
        "protected_k_se": False,
        "top1_accuracy_se": False,
        "top5_accuracy_se": False,
    }
    #: The top-k accuracies whose standard errors (and per-album hits) this metric gives.
    KS = (1, 5)
    headline = ("protected_k",)

    def anchors(self, truth: Labels, estimate: Rankings) -> dict[str, Anchors]:
        """A random ranking of L places puts (L - 1) / 2 of them above the truth on average; 0 is the true place first."""
        n_places = estimate.scores.shape[1]
        return {"protected_k": Anchors(Anchor((n_places - 1) / 2, "chance"),
                                       Anchor(0.0, "true place first"))}

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
        hits = {f"top{k}_accuracy": (above < k).astype(float) for k in self.KS}
        if ctx.artifact_dir is not None:
            rows = [{"id": id_, "protected_k": int(above[i]), **{key: int(h[i]) for key, h in hits.items()}} for i, id_ in enumerate(estimate.ids)]
            save_csv(ctx.artifact("protected_k_per_image.csv"), rows)
        out = {"protected_k": float(above.mean()), "protected_k_median": float(np.median(above))}
        out["protected_k_se"] = mean_se(above.astype(float))[1]
        out.update({f"{key}_se": mean_se(h)[1] for key, h in hits.items()})
        return out
