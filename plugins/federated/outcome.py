"""Truth, target ids and utility of a federated run (what a defense returns besides its release)."""

from __future__ import annotations

import numpy as np

from vispriv.harness import CellContext, Images, Labels
from vispriv.harness.artifacts import save_csv
from vispriv.plugins.federated.features.attribute_scores import attribute_utility
from vispriv.plugins.federated.payloads import FederatedData
from vispriv.plugins.federated.protocol.rounds import FederatedRun


def target_ids(rounds: int, n_users: int) -> list[list[str]]:
    """``r{t}-u{n}``: the target of user n's update in round t."""
    return [[f"r{t}-u{n}" for n in range(n_users)] for t in range(rounds)]


def target_truth(private: FederatedData, run: FederatedRun) -> dict[str, Images | Labels]:
    """Per update: the mean image of the samples it was computed on (the sample itself for
    one SGD step, appendix A.2.1) and their majority label (no label truth for attributes:
    an update does not carry one class to score)."""
    images, labels, ids = [], [], []
    for t, per_user in enumerate(run.targets):
        for n, rows in enumerate(per_user):
            images.append(private.pixels[rows].mean(axis=0))
            if not private.multilabel:
                labels.append(int(np.bincount(private.labels[rows]).argmax()))
            ids.append(f"r{t}-u{n}")
    truth: dict[str, Images | Labels] = {"images": Images(np.stack(images), ids)}
    if not private.multilabel:
        truth["labels"] = Labels(np.asarray(labels), ids)
    return truth


def accuracy_curve(run: FederatedRun, ctx: CellContext, score: str = "accuracy") -> None:
    """CSV and PNG of the test score per round (round 0 is the start) in the artifact folder:
    accuracy for classifiers, ``score="ami"`` for clustering."""
    if ctx.artifact_dir is None:
        return
    save_csv(ctx.artifact(f"{score}_per_round.csv"), [{"round": t, score: a} for t, a in enumerate(run.accuracy)])
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot(range(len(run.accuracy)), run.accuracy, marker=".")
    ax.set_xlabel("round")
    ax.set_ylabel(f"test {score}")
    fig.tight_layout()
    fig.savefig(ctx.artifact(f"{score}_per_round.png"), dpi=100)
    plt.close(fig)


def clustering_utility(run: FederatedRun) -> tuple[dict[str, float], dict[str, bool]]:
    """Adjusted mutual information of the test split's nearest-centroid clustering under the final
    centroids (DPHE Table 6) and under the k-means++ start, centroid sparsity and bytes sent."""
    utility = {
        "ami": float(run.accuracy[-1]),
        "ami_init": float(run.accuracy[0]),
        "update_sparsity": float(np.mean(run.sparsity)) if run.sparsity else 0.0,
        "bytes_per_user_round": float(run.bytes_per_user_round),
    }
    return utility, {"ami": True, "ami_init": True, "update_sparsity": True, "bytes_per_user_round": False}


def base_utility(run: FederatedRun, private: FederatedData) -> tuple[dict[str, float], dict[str, bool]]:
    """Test accuracy (mean over attributes for multi-label data), AP and top-k mAP of the final
    classifier w̄_T (DPHE Tables 1, 3-5), sparsity and bytes sent."""
    utility = {
        "test_accuracy": float(run.accuracy[-1]),
        "test_accuracy_init": float(run.accuracy[0]),
        "update_sparsity": float(np.mean(run.sparsity)) if run.sparsity else 0.0,
        "bytes_per_user_round": float(run.bytes_per_user_round),
    }
    directions = {
        "test_accuracy": True,
        "test_accuracy_init": True,
        "update_sparsity": True,
        "bytes_per_user_round": False,
    }
    scores = attribute_utility(run.averages[-1], private.test_features, private.test_labels, private.labels)
    utility.update(scores)
    directions.update(dict.fromkeys(scores, True))
    return utility, directions
