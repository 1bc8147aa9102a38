"""The protocol settings every federated defense shares (flat, so the matrix can sweep them)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from vispriv.harness import PluginConfig
from vispriv.plugins.federated.clustering.rounds import KMeansSettings
from vispriv.plugins.federated.linear.linear import LocalTraining


class FederatedConfig(PluginConfig):
    """Rounds and the users' local training (section 3.1; hinge SVM via SGD, elastic net)."""

    rounds: int = Field(10, ge=1, le=10_000)
    loss: Literal["hinge", "logistic"] = "hinge"
    mode: Literal["sgd", "gd"] = "sgd"
    lr: float = Field(0.05, gt=0)
    reg: float = Field(0.01, ge=0, description="elastic-net strength lam; larger -> sparser updates")
    l1_ratio: float = Field(0.5, ge=0, le=1)
    local_steps: int = Field(1, ge=1)
    init_epochs: int = Field(100, ge=0)
    init_lr: float = Field(0.1, gt=0)
    batch_size: int = Field(32, ge=1, description="clustering: samples per mini-batch k-means step (local_steps per round)")
    centroid_l1: float = Field(
        0.0, ge=0, description="clustering: L1 strength lam on the centroids; larger -> sparser (0: plain mini-batch k-means)"
    )

    def training(self) -> LocalTraining:
        return LocalTraining(
            loss=self.loss,
            mode=self.mode,
            lr=self.lr,
            reg=self.reg,
            l1_ratio=self.l1_ratio,
            local_steps=self.local_steps,
            init_epochs=self.init_epochs,
            init_lr=self.init_lr,
        )

    def kmeans(self) -> KMeansSettings:
        """The users' local mini-batch k-means (DPHE supplement A.3)."""
        return KMeansSettings(self.batch_size, self.local_steps, self.centroid_l1)

    def clustering_protocol(self, n_users: int) -> dict:
        """The public hyper-parameters of a clustering release."""
        return {"batch_size": self.batch_size, "local_steps": self.local_steps, "centroid_l1": self.centroid_l1,
                "rounds": self.rounds, "n_users": n_users}

    def protocol(self, n_users: int) -> dict:
        """The public hyper-parameters that go into every release (the attacker's guesses, A.2.1)."""
        return {**self.training().model_dump(), "rounds": self.rounds, "n_users": n_users}
