"""Federated mini-batch k-means (DPHE Table 6): DPHE's centroids equal plaintext's, the wiring, the attack."""

from __future__ import annotations

import numpy as np
import pytest

from vispriv.harness.errors import ConfigError
from vispriv.plugins.attacks.centroid_leakage import CentroidLeakage
from vispriv.plugins.defenses.dphe import Dphe
from vispriv.plugins.defenses.fedavg_plain import PlainFedAvg
from vispriv.plugins.federated.clustering.dataset import FederatedClustering
from vispriv.plugins.federated.clustering.payloads import EncryptedCentroidUpdates, PlainCentroidUpdates
from vispriv.plugins.federated.clustering.rounds import KMeansSettings, run_federated_kmeans
from vispriv.plugins.federated.linear.grid_metric import LeakCorrelation
from vispriv.plugins.federated.protocol.paillier import SCALE
from vispriv.plugins.federated.protocol.rounds import DpheSettings

KMEANS = {"rounds": 3, "batch_size": 16, "local_steps": 2, "centroid_l1": 0.3}


def blob_file(path, n=240, dim=6, classes=3):
    """A feature file of three well-separated classes."""
    rng = np.random.default_rng(0)
    labels = np.arange(n) % classes
    features = rng.normal(size=(classes, dim))[labels] * 4 + rng.normal(size=(n, dim))
    np.savez(path, features=features, ids=np.array([f"x{i}" for i in range(n)]), labels=labels)
    return str(path)


@pytest.fixture
def clusters(ctx, tmp_path):
    cfg = FederatedClustering.Config(source="file", features=blob_file(tmp_path / "blobs.npz"), n_users=3)
    return FederatedClustering(cfg).load(ctx)


def test_dphe_centroids_equal_plain_minibatch_kmeans_up_to_the_encoding(clusters, ctx):
    plain = PlainFedAvg(PlainFedAvg.Config(**KMEANS)).protect(clusters.private, clusters.public, ctx)
    secure = Dphe(Dphe.Config(**KMEANS, key_bits=512, workers=1)).protect(clusters.private, clusters.public, ctx)
    assert isinstance(plain.release, PlainCentroidUpdates) and isinstance(secure.release, EncryptedCentroidUpdates)
    a, b = plain.release.centroids, secure.release.centroids
    assert a.shape == (4, 3, 6)
    assert not np.allclose(a[0], a[-1])  # the centroids moved
    np.testing.assert_allclose(b, a, rtol=0, atol=1e-8)  # 2^-32 fixed point per value, a few values summed
    # The secure sum is exactly the sum of the users' 2^-32 fixed-point encodings: recompute it by
    # hand from the same rounds' plaintext updates, and the error the defense logs from it.
    run = run_federated_kmeans(clusters.private.data, clusters.public, KMeansSettings(16, 2, 0.3), 3, ctx,
                               DpheSettings(key_bits=512, workers=1))
    by_hand = np.rint(run.updates * SCALE).sum(axis=1) / SCALE / clusters.private.n_users
    np.testing.assert_allclose(run.averages[1:], by_hand, rtol=1e-15, atol=0)
    np.testing.assert_array_equal(run.averages, b)
    error = float(np.max(np.abs(by_hand - run.updates.mean(axis=1))))
    assert error > 0 and secure.utility["secure_sum_max_abs_error"] == pytest.approx(error, rel=1e-9)
    assert secure.utility["ami"] == plain.utility["ami"] > 0.5
    assert plain.utility["update_sparsity"] > 0.1
    # every user's K x D centroids are one message of M = ceil(0.1 K D) values when sparse enough
    assert secure.release.ciphertexts.shape[1] == secure.release.protocol["capacity"] == 2
    assert secure.utility["slot_origin_candidates"] >= 1


def test_the_attack_reads_each_users_batch_only_from_plaintext_centroids(clusters, ctx):
    plain = PlainFedAvg(PlainFedAvg.Config(**KMEANS)).protect(clusters.private, clusters.public, ctx)
    secure = Dphe(Dphe.Config(**KMEANS, key_bits=512, workers=1)).protect(clusters.private, clusters.public, ctx)
    scores = {}
    for name, protected in (("plain", plain), ("dphe", secure)):
        result = CentroidLeakage(CentroidLeakage.Config()).attack(protected.release, clusters.public, ctx)
        images = result.estimate["images"]
        assert images.ids == [f"r{t}-u{n}" for t in range(3) for n in range(3)]
        scores[name] = LeakCorrelation(LeakCorrelation.Config()).score(protected.truth["images"], images, ctx)
        assert result.metrics["per_user_view"] == (name == "plain")
    dphe_images = CentroidLeakage(CentroidLeakage.Config()).attack(secure.release, clusters.public, ctx)
    per_round = dphe_images.estimate["images"].images.reshape(3, 3, -1)
    assert np.all(per_round == per_round[:, :1])  # one estimate per round, the same for every user
    assert scores["plain"]["pixel_correlation"] > scores["dphe"]["pixel_correlation"]


def test_clustering_needs_one_class_per_sample(tmp_path):
    with pytest.raises(ConfigError, match="bundled_labels: classes"):
        FederatedClustering.Config(source="bundled", bundled_labels="attributes")
    path = tmp_path / "attrs.npz"
    np.savez(path, features=np.random.default_rng(0).normal(size=(20, 4)), ids=np.array([f"x{i}" for i in range(20)]),
             labels=np.eye(2, dtype=np.int64)[np.arange(20) % 2])
    with pytest.raises(ConfigError, match="one class per sample"):
        FederatedClustering.Config(source="file", features=str(path))
