"""The release and truth of a captured Flower round (what the ``none`` defense hands the attacks)."""

from __future__ import annotations

from vispriv.harness import Images, Labels, Protected
from vispriv.plugins.federated.deep.payloads import DeepFederatedPublic, DeepPlaintextUpdates, DeepPublishedAverage
from vispriv.plugins.federated.flower.payloads import CapturedRound


def captured_round_protected(private: CapturedRound, public: DeepFederatedPublic) -> Protected:
    """Every reply as ``DeepPlaintextUpdates``, or SecAgg+'s unmasked mean as ``DeepPublishedAverage``;
    the kept batches (ids ``u{n}-i{k}``, client n in the capture's reply order) as truth."""
    b = private.batch_size
    ids = [[f"u{n}-i{k}" for k in range(b)] for n in range(len(private.node_ids))]
    protocol = {**public.work, **private.protocol, "n_users": len(ids), "batch_size": b}
    flower_protocol = str(protocol.get("flower_protocol", ""))
    if not private.averaged and (flower_protocol.startswith("client-dp-fixed-clipping") or flower_protocol == "local-dp"):
        # each reply was clipped as a whole to the public norm on the client (Flower's fixedclipping_mod, or
        # LocalDpMod, which then adds its noise: the attacker knows the norm, not the noise draw)
        protocol["update_clip_norm"] = float(protocol["clipping_norm"])
    if private.averaged:
        release: DeepPlaintextUpdates | DeepPublishedAverage = DeepPublishedAverage(
            protocol=protocol, target_ids=ids, average=private.updates[0])
    else:
        release = DeepPlaintextUpdates(protocol=protocol, target_ids=ids, updates=private.updates)
    truth: dict[str, Images | Labels] = {}
    if len(private.images):
        flat = [i for user in ids for i in user]
        sets = [f"u{n}" for n, user in enumerate(ids) for _ in user]
        truth = {"images": Images(private.images, flat, sets=sets), "labels": Labels(private.labels, flat, sets=sets)}
    return Protected(release, truth, {}, {})
