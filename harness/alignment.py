"""Matching an unordered estimate to the truth before scoring.

An attack that recovers a *set* (the B images behind one batch gradient) cannot know which
reconstruction is which image. It names the set of each estimate (``Images.sets`` /
``Labels.sets``) and labels the set's estimates with the set's truth ids in any order. Before
the metrics run, the core reassigns those ids within each set by the best assignment: for
images, the one that minimises the total mean squared error (the Hungarian algorithm,
``scipy.optimize.linear_sum_assignment``, as "Inverting Gradients", Geiping et al., NeurIPS
2020, and breaching match batch reconstructions); for labels, the one that maximises the
number of agreements, which equals the size of the multiset intersection of the recovered
and the true labels of the set (count-aware label accuracy).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from vispriv.harness.errors import InputError
from vispriv.harness.payloads import Images, Labels, Payload


def _groups(estimate: Images | Labels) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = defaultdict(list)
    for i, name in enumerate(estimate.sets):
        groups[name].append(i)
    return groups


def _truth_rows(truth: Images | Labels, ids: list[str]) -> list[int]:
    index = {id_: i for i, id_ in enumerate(truth.ids)}
    missing = [i for i in ids if i not in index]
    if missing:
        raise InputError(f"estimate ids not in truth: {missing[:3]}")
    return [index[i] for i in ids]


def _assign(cost: np.ndarray) -> np.ndarray:
    """``perm[i]`` = the truth slot of estimate i under the minimum-cost assignment."""
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(cost)
    perm = np.empty(len(rows), dtype=np.int64)
    perm[rows] = cols
    return perm


def align(truth: Payload, estimate: Payload) -> Payload:
    """``estimate`` with its ids reassigned within each set to best match ``truth`` (unchanged when
    it names no sets or is not images or labels)."""
    if not isinstance(estimate, (Images, Labels)) or not estimate.sets or not isinstance(truth, type(estimate)):
        return estimate
    ids = list(estimate.ids)
    for members in _groups(estimate).values():
        set_ids = [estimate.ids[i] for i in members]
        rows = _truth_rows(truth, set_ids)
        if isinstance(estimate, Images):
            assert isinstance(truth, Images)
            e = estimate.images[members].reshape(len(members), -1).astype(np.float64)
            t = truth.images[rows]
            if t.shape[-1] != estimate.images.shape[-1]:
                t = np.repeat(t.mean(axis=-1, keepdims=True), estimate.images.shape[-1], axis=-1)
            t = t.reshape(len(rows), -1).astype(np.float64)
            cost = ((e[:, None, :] - t[None, :, :]) ** 2).mean(axis=-1)
        else:
            assert isinstance(truth, Labels)
            cost = -(estimate.labels[members][:, None] == truth.labels[rows][None, :]).astype(np.float64)
        perm = _assign(cost)
        for i, j in zip(members, perm):
            ids[i] = set_ids[j]
    if isinstance(estimate, Images):
        return Images(estimate.images, ids)
    return Labels(estimate.labels, ids)
