"""The protocol settings of the federated defenses, one config per kind of input (flat, so the matrix can sweep them).

``none`` and ``dphe`` serve linear classifiers (``FederatedData``), clustering
(``ClusteringData``) and deep models (``DeepFederatedData``); each input's users train
differently, so each gets its own config, built from the mixins below and declared in the
defense's ``configs`` (input type -> config). The matrix builds a cell with the config of its
dataset's input: the cell logs and hashes only the settings that input uses, and a setting of
another input (``centroid_l1`` on a classifier task) is refused there in one line.

The k-means settings stay on the defense rather than moving to the clustering dataset: like
the classifiers' ``lr`` they are the protocol's public hyper-parameters, which the release
carries and the attacker knows (DPHE supplement A.2.1), and on the dataset every clustering
cell would change its label and its seeds (``dphe(centroid_l1=1.0)`` would become the
dataset's setting).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from vispriv.harness import PluginConfig
from vispriv.plugins.federated.clustering.rounds import KMeansSettings
from vispriv.plugins.federated.linear.linear import LocalTraining


class RoundsConfig(PluginConfig):
    """The number of federated rounds: the one setting every input of these defenses uses.

    On a deep task the rounds after the attacked one measure the test accuracy. A captured
    update or Flower round is one round an app already ran, so ``rounds`` changes nothing
    there; it is accepted on captures so that the shipped capture example's cells keep their
    labels and seeds.
    """

    rounds: int = Field(10, ge=1, le=10_000)


class ClassifierInitConfig(RoundsConfig):
    """Rounds and the classifiers' public initialisation w̄_0 (DPHE section 3.2): its loss, elastic net and
    full-batch epochs, what every linear defense uses (PRR10's one noisy average uses no more)."""

    loss: Literal["hinge", "logistic"] = "hinge"
    reg: float = Field(0.01, ge=0, description="elastic-net strength lam; larger -> sparser updates")
    l1_ratio: float = Field(0.5, ge=0, le=1)
    init_epochs: int = Field(100, ge=0)
    init_lr: float = Field(0.1, gt=0)

    def training(self) -> LocalTraining:
        """The training these settings describe (the local rounds' own settings at their defaults)."""
        return LocalTraining(**self._training_fields())

    def _training_fields(self) -> dict:
        return {"loss": self.loss, "reg": self.reg, "l1_ratio": self.l1_ratio, "init_epochs": self.init_epochs,
                "init_lr": self.init_lr}


class LinearTrainingConfig(ClassifierInitConfig):
    """Rounds and the users' local training of linear classifiers (DPHE section 3.1; hinge SVM via SGD, elastic net)."""

    mode: Literal["sgd", "gd"] = "sgd"
    lr: float = Field(0.05, gt=0)
    local_steps: int = Field(1, ge=1)

    def training(self) -> LocalTraining:
        """The users' local training of the classifiers."""
        return LocalTraining(**self._training_fields(), mode=self.mode, lr=self.lr, local_steps=self.local_steps)

    def protocol(self, n_users: int) -> dict:
        """The public hyper-parameters that go into every release (the attacker's guesses, A.2.1)."""
        return {**self.training().model_dump(), "rounds": self.rounds, "n_users": n_users}


class ClusteringConfig(RoundsConfig):
    """Rounds and the users' local mini-batch k-means with L1-sparse centroids (DPHE supplement A.3)."""

    batch_size: int = Field(32, ge=1, description="samples per mini-batch k-means step (local_steps per round)")
    local_steps: int = Field(1, ge=1)
    centroid_l1: float = Field(
        0.0, ge=0, description="L1 strength lam on the centroids; larger -> sparser (0: plain mini-batch k-means)"
    )

    def kmeans(self) -> KMeansSettings:
        """The users' local mini-batch k-means (DPHE supplement A.3)."""
        return KMeansSettings(self.batch_size, self.local_steps, self.centroid_l1)

    def clustering_protocol(self, n_users: int) -> dict:
        """The public hyper-parameters of a clustering release."""
        return {"batch_size": self.batch_size, "local_steps": self.local_steps, "centroid_l1": self.centroid_l1,
                "rounds": self.rounds, "n_users": n_users}


class FederatedConfig(ClusteringConfig, LinearTrainingConfig):
    """Every setting of every input: the defenses' ``Config``, for a script that calls ``protect`` itself.

    The matrix never builds it for an input the defense declares in ``configs``.
    """
