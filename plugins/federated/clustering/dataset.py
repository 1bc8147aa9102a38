"""Dataset ``federated-clustering``: the deep-feature inputs of ``federated-features`` for clustering.

DPHE's Table 6 (supplement A.3) clusters Caltech101/256 features by federated mini-batch
k-means and scores the clustering by adjusted mutual information against the classes, with K
set to the number of classes. The sources, files, checks and split are those of
:mod:`vispriv.plugins.federated.features.dataset`; the labels must be one class per sample
(``bundled_labels: classes`` for the bundled features). The payload is
:class:`~vispriv.plugins.federated.clustering.payloads.ClusteringData`, which the ``none`` and
``dphe`` defenses cluster instead of training classifiers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from vispriv.harness import CellContext, Scene
from vispriv.harness.errors import ConfigError
from vispriv.plugins.federated.clustering.payloads import ClusteringData
from vispriv.plugins.federated.features.dataset import FederatedFeatures, FederatedFeaturesConfig, labelled


class FederatedClusteringConfig(FederatedFeaturesConfig):
    bundled_labels: Literal["classes", "attributes"] = Field(
        "classes", description="bundled: the 10 digit classes (clustering scores against one class per sample)"
    )

    @model_validator(mode="after")
    def _one_class_per_sample(self) -> FederatedClusteringConfig:
        if self.source == "bundled" and self.bundled_labels != "classes":
            raise ConfigError("federated-clustering scores against one class per sample: use bundled_labels: classes")
        if self.source != "bundled" and labelled(self).labels.ndim != 1:
            raise ConfigError(
                f"{self.features or self.labels}: federated-clustering scores against one class per sample; "
                "the labels are (N, L) attributes"
            )
        return self


class FederatedClustering(FederatedFeatures):
    """N users' deep features to cluster (K = number of classes; AMI against the classes)."""

    name = "federated-clustering"
    version = "1.0"
    Config = FederatedClusteringConfig
    produces = (ClusteringData,)

    def load(self, ctx: CellContext) -> Scene:
        scene = super().load(ctx)
        return Scene(private=ClusteringData(scene.private), public=scene.public)
