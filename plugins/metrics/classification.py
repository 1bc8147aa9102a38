"""Classification metrics: accuracy of labels, top-k accuracy of rankings."""

from __future__ import annotations

import numpy as np

from vispriv.harness import Anchor, Anchors, CellContext, Labels, Metric, PluginConfig, Rankings
from vispriv.harness.errors import InputError


def _aligned_labels(truth: Labels, ids: list[str]) -> np.ndarray:
    index = {id_: i for i, id_ in enumerate(truth.ids)}
    try:
        return truth.labels[[index[i] for i in ids]]
    except KeyError as exc:
        raise InputError(f"estimate id {exc.args[0]!r} has no true label") from None


class Accuracy(Metric):
    """Fraction of estimated labels equal to the true ones (higher is better)."""

    name = "accuracy"
    version = "1.0"
    scenario = "any"
    consumes = (Labels,)
    higher_is_better = {"accuracy": True}
    headline = ("accuracy",)

    def anchors(self, truth: Labels, estimate: Labels) -> dict[str, Anchors]:
        """Every label right is the attack's success; chance is unknown from the labels alone
        (a batch need not hold every class): a no-leak baseline in the table sets that end."""
        return {"accuracy": Anchors(success=Anchor(1.0, "every label right"))}

    def score(self, truth: Labels, estimate: Labels, ctx: CellContext) -> dict[str, float]:
        true = _aligned_labels(truth, estimate.ids)
        if len(true) == 0:
            raise InputError("accuracy of an empty estimate is undefined")
        return {"accuracy": float(np.mean(true == estimate.labels))}


class TopKAccuracy(Metric):
    """Fraction of items whose true class is among the k highest scores, for each k."""

    class Config(PluginConfig):
        ks: tuple[int, ...] = (1, 5)

    name = "topk-accuracy"
    version = "1.0"
    scenario = "any"
    consumes = (Rankings,)
    truth_types = (Labels,)
    higher_is_better = {"top1_accuracy": True, "top5_accuracy": True}
    headline = ("top1_accuracy",)

    def anchors(self, truth: Labels, estimate: Rankings) -> dict[str, Anchors]:
        """Chance is k of the L classes ranked; success is the true class always among the top k."""
        n_classes = estimate.scores.shape[1]
        return {f"top{k}_accuracy": Anchors(Anchor(k / n_classes, "chance"), Anchor(1.0, "always right"))
                for k in self.config.ks if 1 <= k <= n_classes}

    def score(self, truth: Labels, estimate: Rankings, ctx: CellContext) -> dict[str, float]:
        true = _aligned_labels(truth, estimate.ids)
        n_classes = estimate.scores.shape[1]
        # rank of the true class = number of classes scoring strictly higher (ties favour it).
        true_scores = estimate.scores[np.arange(len(true)), true]
        rank = (estimate.scores > true_scores[:, None]).sum(axis=1)
        out = {}
        for k in self.config.ks:
            if not 1 <= k <= n_classes:
                raise InputError(f"top-k with k={k} needs 1 <= k <= {n_classes} classes")
            out[f"top{k}_accuracy"] = float(np.mean(rank < k))
        return out
