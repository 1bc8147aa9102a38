"""Multi-label attributes: one-vs-rest rows trained under every federated defense, and the
measures of DPHE Tables 3-5 (mean accuracy over attributes, AP, top-k mAP)."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import average_precision_score

from vispriv.harness import CellContext
from vispriv.plugins.defenses.dp_baselines import Prr10, Ra12
from vispriv.plugins.defenses.dphe import Dphe
from vispriv.plugins.defenses.fedavg_plain import PlainFedAvg
from vispriv.plugins.federated.data import LabelledImages, split_users
from vispriv.plugins.federated.features.attribute_scores import attribute_utility
from vispriv.plugins.federated.linear import linear


def separable(n: int = 240, d: int = 6, attrs: int = 3, seed: int = 0) -> LabelledImages:
    """Attribute j is the sign of feature j: linearly separable, with different frequencies."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) + np.array([0.8, 0.0, -0.8, 0, 0, 0])[:d]
    labels = (x[:, :attrs] > 0).astype(np.int64)
    strips = (x - x.min(0)) / (x.max(0) - x.min(0))
    return LabelledImages(strips[:, None, :], labels, [f"a{j}" for j in range(attrs)])


def test_one_vs_rest_rows_learn_each_attribute():
    private, _public = split_users(separable(), 3, np.random.default_rng(0))
    cfg = linear.LocalTraining(reg=0.0, init_epochs=200, init_lr=0.5)
    w = linear.train_full_batch(private.features, private.labels, 3, cfg, 200)
    assert w.shape == (3, 7)
    pred = linear.predict(w, private.test_features, multilabel=True)
    assert pred.shape == private.test_labels.shape
    per_attribute = (pred == private.test_labels).mean(axis=0)
    assert per_attribute.min() > 0.9
    assert linear.accuracy(w, private.test_features, private.test_labels) == per_attribute.mean()


def test_average_precision_and_top_k_map_follow_sklearn_and_attribute_frequency():
    rng = np.random.default_rng(1)
    n, attrs = 50, 12
    x = rng.normal(size=(n, 4))
    w = rng.normal(size=(attrs, 5))
    labels = (rng.random((n, attrs)) < 0.4).astype(np.int64)
    # training frequency: attribute j annotated j + 1 times, so the 10 most frequent are 2..11
    train = np.zeros((20, attrs), np.int64)
    for j in range(attrs):
        train[: j + 1, j] = 1
    out = attribute_utility(w, x, labels, train)
    s = linear.scores(w, x)
    ap = [average_precision_score(labels[:, j], s[:, j]) for j in range(attrs)]
    assert np.isclose(out["average_precision"], np.mean(ap))
    assert np.isclose(out["map_top10"], np.mean(ap[2:]))
    assert "map_top50" not in out  # only 12 attributes


def test_every_federated_defense_trains_attributes_and_dphe_equals_plain_fedavg():
    private, public = split_users(separable(n=120), 3, np.random.default_rng(0), schedule_seed=3)
    ctx = CellContext(seed=0)
    got = {}
    for defense in (PlainFedAvg(PlainFedAvg.Config(rounds=3)), Dphe(Dphe.Config(rounds=3, key_bits=256)),
                    Ra12(Ra12.Config(rounds=3)), Prr10(Prr10.Config(key_bits=256, local_epochs=5))):
        protected = defense.protect(private, public, ctx)
        assert protected.release.averages.shape[1:] == (3, 7)  # one row per attribute
        assert "labels" not in protected.truth  # an update carries no single class to score
        got[defense.name] = protected.utility
    assert got["dphe"]["test_accuracy"] == got["none"]["test_accuracy"]
    assert abs(got["dphe"]["average_precision"] - got["none"]["average_precision"]) < 1e-9
    # DPHE encrypts every attribute's row: values encrypted grow with L (M = ceil(0.1 D L), shards padded to M)
    assert got["dphe"]["values_encrypted_per_user_round"] >= np.ceil(0.1 * 7 * 3)
