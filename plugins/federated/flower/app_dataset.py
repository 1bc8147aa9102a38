"""Dataset ``flower-app``: the example Flower app (``examples/flower``), for the defense ``flower`` to run.

Where ``flower-capture`` reads a round a Flower server already saw, ``flower-app`` names the
federation and leaves running it to the defense: each ``flower`` defense config (a privacy
setting of Flower's) simulates the app with that setting and hands the attacks what its server
saw. The public side is the same as ``flower-capture``'s: the app's model (``model``:
``package.module:function``) at the attacked round's global arrays, exported with
``torch.export``, and the clients' local work (one local epoch over a batch of ``batch_size``:
FedSGD, the gradient "Deep Leakage from Gradients", Zhu et al., NeurIPS 2019, matches; more
epochs: FedAvg, McMahan et al., AISTATS 2017).

The attacked round is round 1: it is the only round whose global model every privacy setting
shares (the model the app initialises from ``seed``). From round 2 on the global model is the
previous aggregate, which Flower's DP noise changes per setting, while a matrix's public side
belongs to the dataset; ``rounds`` more rounds still run for the utility (Flower's centralized
evaluation after the last one). Loading needs numpy and torch only; running needs the
``flower`` extra.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
from pydantic import Field, model_validator

from vispriv.harness import CellContext, Dataset, PluginConfig, Scene
from vispriv.harness.errors import ConfigError, InputError
from vispriv.plugins.federated.deep.payloads import DeepFederatedPublic
from vispriv.plugins.federated.flower.payloads import FlowerApp

#: the bundled digits the example app deals out (scikit-learn's load_digits)
BUNDLED_DIGITS = 1797
APP_MODEL = "vispriv.examples.flower.task:make_net"


def arrays_sha256(arrays: dict[str, np.ndarray]) -> str:
    """A digest of named arrays (names, dtypes, shapes and bytes, in order): the global model's identity."""
    h = hashlib.sha256()
    for name, raw in arrays.items():
        value = np.ascontiguousarray(raw)
        h.update(f"{name}:{value.dtype.str}:{value.shape};".encode())
        h.update(value.tobytes())
    return h.hexdigest()


class FlowerAppConfig(PluginConfig):
    num_clients: int = Field(2, ge=2, le=16, description="simulated clients (SuperNodes); every one trains each round")
    images_per_client: int = Field(4, ge=1, le=64, description="digits each client holds (client n: every "
                                   "num_clients-th bundled digit from the n-th)")
    batch_size: int = Field(1, ge=1, le=64, description="a client's batch per round (its digits cycled in order)")
    local_epochs: int = Field(1, ge=1, le=100, description="epochs over the round's batch (1: FedSGD, one step)")
    lr: float = Field(0.1, gt=0, description="the clients' SGD learning rate")
    seed: int = Field(0, ge=0, description="the app's initial model (make_net(seed)): the round-1 global model")
    rounds: int = Field(1, ge=1, le=100, description="rounds Flower runs; the utility is Flower's evaluation after the last")
    round: int = Field(1, ge=1, le=1, description="the attacked round: 1, the only one whose global model every "
                       "privacy setting shares (later ones start from an aggregate the setting's noise changed)")
    test_images: int = Field(200, ge=10, le=1000, description="the server's held-out digits for Flower's "
                             "centralized evaluation (the last ones of the bundled set, no client's)")
    model: str = Field(APP_MODEL, description="the app's model as 'package.module:function' (built without "
                       "arguments; its arrays must be the app's)")

    @model_validator(mode="after")
    def _fits(self) -> FlowerAppConfig:
        """Batches that do not fit, clients that would hold the server's test digits, or a model that is
        not the app's are each one config error line, before any simulation."""
        if self.batch_size > self.images_per_client:
            raise ConfigError(f"flower-app: batch_size {self.batch_size} exceeds images_per_client "
                              f"{self.images_per_client}")
        if self.num_clients * self.images_per_client > BUNDLED_DIGITS - self.test_images:
            raise ConfigError(f"flower-app: {self.num_clients} clients x {self.images_per_client} digits overlap "
                              f"the server's {self.test_images} test digits (of {BUNDLED_DIGITS})")
        try:
            _module_at_start(self)
        except InputError as exc:
            raise ConfigError(f"flower-app: {exc}") from None
        return self


def _module_at_start(cfg: FlowerAppConfig) -> tuple[object, dict[str, np.ndarray]]:
    """The user's model at the app's initial global arrays, and those arrays."""
    from vispriv.examples.flower.task import make_net
    from vispriv.plugins.federated.deep.payloads import state_of
    from vispriv.plugins.federated.flower.model_source import build_module, load_arrays

    arrays = state_of(make_net(cfg.seed))
    module = build_module(cfg.model)
    load_arrays(module, arrays, cfg.model)
    return module, arrays


class FlowerAppDataset(Dataset):
    """The example Flower app (2+ clients on the bundled digits, DLG's LeNet), run by the defense ``flower``."""

    name = "flower-app"
    version = "1.0"
    scenario = "federated-learning"
    Config = FlowerAppConfig
    produces = (FlowerApp,)

    def provenance(self) -> str:
        cfg: FlowerAppConfig = self.config
        return (f"the example Flower app (examples/flower): {cfg.num_clients} clients x {cfg.images_per_client} "
                f"bundled digits, {cfg.rounds} round(s), attacked round {cfg.round}")

    def load(self, ctx: CellContext) -> Scene:
        import torch

        from vispriv.examples.flower.task import IMAGE_SIDE
        from vispriv.plugins.federated.flower.model_source import export_bytes

        cfg: FlowerAppConfig = self.config
        module, arrays = _module_at_start(cfg)
        shape = (1, IMAGE_SIDE, IMAGE_SIDE)
        with torch.no_grad():
            n_classes = int(module(torch.zeros(1, *shape)).shape[-1])
        steps = cfg.local_epochs * math.ceil(cfg.batch_size / cfg.batch_size)
        work = {"mode": "fedsgd" if steps == 1 else "fedavg", "steps": steps, "lr": float(cfg.lr), "batchnorm": "eval"}
        public = DeepFederatedPublic(
            arch="exported", width=0, n_classes=n_classes, image_shape=shape, mean=[], std=[], state={},
            work=work, public_images=np.zeros((0, IMAGE_SIDE, IMAGE_SIDE, 1), np.float32),
            public_labels=np.zeros(0, np.int64), exported=export_bytes(module, shape),
        )
        settings = {k: getattr(cfg, k) for k in ("num_clients", "images_per_client", "batch_size", "local_epochs",
                                                 "lr", "seed", "rounds", "test_images")}
        private = FlowerApp(settings=settings, round=cfg.round, model=cfg.model, global_sha256=arrays_sha256(arrays))
        return Scene(private=private, public=public)
