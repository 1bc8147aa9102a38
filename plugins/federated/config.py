"""The protocol settings every federated defense shares (flat, so the matrix can sweep them)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from vispriv.harness import PluginConfig
from vispriv.plugins.federated.linear import LocalTraining


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

    def protocol(self, n_users: int) -> dict:
        """The public hyper-parameters that go into every release (the attacker's guesses, A.2.1)."""
        return {**self.training().model_dump(), "rounds": self.rounds, "n_users": n_users}
