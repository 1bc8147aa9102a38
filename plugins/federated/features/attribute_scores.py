"""Utility of a one-vs-rest classifier on its test split: the measures of DPHE (ICCV 2017) Tables 3-5.

* mean accuracy over attributes (Table 3: CelebA's 40 face attributes) -- ``linear.accuracy``;
* average precision of each one-vs-rest row (Table 4: sensitive-place detection, one
  attribute), by scikit-learn's ``average_precision_score`` on the row's raw scores;
* mAP over the k most frequent attributes for k = 10, 50, 100 (Table 5, supplement: YouTube-8M),
  frequency counted on the users' training labels.

For single-label data the rows are the classes (class c against the rest).
"""

from __future__ import annotations

import numpy as np

from vispriv.plugins.federated.linear import linear

#: Table 5's cut-offs: mAP over the 10, 50 and 100 most frequently annotated attributes.
TOP_K = (10, 50, 100)


def one_vs_rest_targets(labels: np.ndarray, n_rows: int) -> np.ndarray:
    """(B, C) 0/1 targets: the attributes themselves, or one-hot classes."""
    if labels.ndim == 2:
        return labels
    out = np.zeros((len(labels), n_rows), np.int64)
    out[np.arange(len(labels)), labels] = 1
    return out


def average_precisions(w: np.ndarray, x: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """AP of each one-vs-rest row on (x, labels); NaN for a row with no positive test sample."""
    from sklearn.metrics import average_precision_score  # ~1 s to import: only where a score is computed

    targets = one_vs_rest_targets(labels, w.shape[0])
    s = linear.scores(w, x)
    return np.array(
        [average_precision_score(targets[:, c], s[:, c]) if targets[:, c].any() else np.nan for c in range(w.shape[0])]
    )


def attribute_utility(w: np.ndarray, x: np.ndarray, labels: np.ndarray, train_labels: np.ndarray) -> dict[str, float]:
    """``average_precision`` (mean AP over rows with a positive test sample) and ``map_top{k}`` for k <= L."""
    ap = average_precisions(w, x, labels)
    out = {"average_precision": float(np.nanmean(ap)) if np.isfinite(ap).any() else float("nan")}
    frequency = one_vs_rest_targets(train_labels, w.shape[0]).sum(axis=0)
    order = np.argsort(-frequency, kind="stable")
    for k in TOP_K:
        if k <= w.shape[0]:
            top = ap[order[:k]]
            out[f"map_top{k}"] = float(np.nanmean(top)) if np.isfinite(top).any() else float("nan")
    return out
