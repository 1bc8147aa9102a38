"""The example's ``ClientApp`` (Flower Message API, as in Flower's quickstart-pytorch).

Each round a client trains ``local-epochs`` epochs of SGD on its round batch (batch 1 and one
epoch: FedSGD, one gradient step) and replies with its weights and ``num-examples``. With
``save_truth`` it also keeps its true batch beside the capture
(:func:`vispriv.plugins.federated.flower.format.save_truth`), so that vispriv can score the
reconstructions; a real deployment would not.

Under ``local-dp`` the client runs Flower's ``LocalDpMod`` (flwr 1.42; Flower docs, "Use Differential
Privacy", https://flower.ai/docs/framework/how-to-use-differential-privacy.html, and the API reference
of ``flwr.clientapp.mod.LocalDpMod``): after training it clips the update w_E - w to ``clipping_norm``
and adds Gaussian noise of std sensitivity x sqrt(2 ln(1.25 / delta)) / epsilon to every entry of the
weights it sends (the sensitivity here is ``clipping_norm``). The server receives only the noised
weights and cannot check that the mod ran.
"""

from __future__ import annotations

import numpy as np
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.clientapp.mod import LocalDpMod, fixedclipping_mod

from vispriv.examples.flower.task import AppSettings, load_partition, make_net, round_batch, train
from vispriv.plugins.federated.flower.format import save_truth


def make_client_app(settings: AppSettings) -> ClientApp:
    """The ClientApp for ``settings`` (client-side clipping adds Flower's ``fixedclipping_mod``, local DP
    its ``LocalDpMod``)."""
    mods = []
    if settings.privacy == "client-dp-fixed-clipping":
        mods = [fixedclipping_mod]
    elif settings.privacy == "local-dp":
        dp = settings.local_dp()
        mods = [LocalDpMod(dp["clipping_norm"], dp["sensitivity"], dp["epsilon"], dp["delta"])]
    app = ClientApp(mods=mods)

    @app.train()
    def train_round(msg: Message, context: Context) -> Message:
        net = make_net()
        net.load_state_dict(msg.content["arrays"].to_torch_state_dict())
        partition = int(context.node_config["partition-id"])
        images, labels = load_partition(partition, int(context.node_config["num-partitions"]),
                                        settings.images_per_client)
        server_round = int(msg.content["config"]["server-round"])
        x, y = round_batch(images, labels, server_round, settings.batch_size)
        if settings.capture and settings.save_truth:
            save_truth(settings.capture, server_round, context.node_id, x.numpy(), y.numpy())
        loss = train(net, x, y, settings.local_epochs, float(msg.content["config"]["lr"]), settings.batch_size)
        if settings.privacy == "local-dp" and settings.noise_seed >= 0:
            # LocalDpMod draws its noise from numpy's global generator once this function returns
            np.random.seed([settings.noise_seed, partition, server_round])
        content = RecordDict({
            "arrays": ArrayRecord(net.state_dict()),
            "metrics": MetricRecord({"train_loss": loss, "num-examples": len(y)}),
        })
        return Message(content=content, reply_to=msg)

    return app
