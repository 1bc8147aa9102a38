"""Gradient inversion of deep-model updates: ``dlg``, ``idlg`` and ``inverting-gradients``.

The adversary is the aggregator (or an insider user). It knows the global model at the
attacked round and the public protocol (FedSGD or FedAvg, E, lr, batch size B), and inverts
what the release lets it see (:mod:`vispriv.plugins.federated.deep.inversion` holds the
three methods and cites their equations; :mod:`vispriv.plugins.federated.deep.views` the views):

* every user's update in plaintext (plain FedAvg, gradient pruning, DP-SGD): one inversion
  per user, B images each;
* DPHE: only the published average of the N users, inverted as one batch of N x B images
  (the average of N users' mean gradients over B images each is the mean gradient over all
  N x B images); an insider (``observer``) first subtracts its own update,
  (N w̄ - w_own) / (N - 1), the mean over the other users' (N - 1) x B images, exactly the
  other user's update when N = 2.

``adapt`` (default ``auto``) makes each attack adaptive where the release's protocol names a
defense the attacker can know (:mod:`vispriv.plugins.federated.deep.adaptive`): against
``gradient-pruning`` the distance and the label recovery use only the entries each user sent
(the nonzeros of its update); against ``dp-sgd`` the simulated update is clipped per example to
the public C in every local step; against a Flower client-side clipping capture the simulated
update is clipped as a whole to the public norm. ``adapt: none`` is the papers' attack, matching the whole
update as received; its label reads ``dlg(adapt=none)`` so a matrix shows both. The attack's
``adaptive`` metric (1 or 0) says which knowledge it used, ``matched_share`` over what share of
the update's entries it matched, ``clip_norm`` the C it simulated (per example, else per update; 0: none); bookkeeping, not
privacy scores.

Estimates carry the public slot ids of the images they stand for and the set they belong to
(a user's batch, or everything behind an average): the core matches reconstructions to images
within a set by the best assignment before scoring (vispriv.harness.alignment).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

import numpy as np
from pydantic import Field, field_validator

from vispriv.harness import Attack, AttackResult, CellContext, Images, Labels, PluginConfig
from vispriv.harness.errors import InputError
from vispriv.plugins.federated.deep.payloads import DeepRelease, require_deep_public, to_numpy, unflatten
from vispriv.plugins.federated.deep.views import adversary_views

if TYPE_CHECKING:  # torch is imported where it is used, so listing plugins stays light
    from vispriv.plugins.federated.deep.adaptive import DefenseKnowledge
    from vispriv.plugins.federated.deep.inversion import InversionSettings, Method, Reconstruction


class DeepInversionConfig(PluginConfig):
    steps: int = Field(300, ge=1, le=1_000_000, description="optimiser steps per inversion, all restarts together")
    restarts: int = Field(1, ge=1, le=1024, description="random starts sharing the step budget; the lowest loss wins "
                          "(batched, many restarts are what fills a GPU)")
    lr: float | None = Field(None, gt=0, description="step size (default: 1 for L-BFGS, 0.1 for signed Adam)")
    tv: float = Field(0.0, ge=0, description="total-variation weight (on the normalised image)")
    init: Literal["uniform", "randn"] = "uniform"
    max_seconds: float | None = Field(None, gt=0, description="wall-clock cap per inversion (one user's batch)")
    threads: int = Field(1, ge=1, le=256, description="torch threads per inversion (cells run in parallel)")
    batched: Literal["auto", "on", "off"] = Field(
        "auto",
        description="on: evaluate the restarts together in one batched torch.func call, each keeping its own "
        "optimiser (each evaluation the same up to float rounding); off: one restart after the other; "
        "auto: on for inverting-gradients, off for dlg and idlg (L-BFGS amplifies the rounding)",
    )
    lbfgs: Literal["torch", "compact"] = Field(
        "torch",
        description="dlg and idlg: torch's L-BFGS (its step compiled where numba is installed, the "
        "same iterates bit for bit), or compact: the same L-BFGS with its direction from the compact "
        "representation (Byrd, Nocedal & Schnabel 1994) without numba; its iterates agree with torch's to "
        "rounding, which a long line search grows",
    )
    adapt: Literal["auto", "none"] = Field(
        "auto",
        description="auto: know the defense the release's protocol names (match only a pruned update's sent "
        "entries; clip the simulated gradients to DP-SGD's public C); none: match the whole update as received",
    )


class InvertingGradientsConfig(DeepInversionConfig):
    steps: int = Field(2000, ge=1, le=1_000_000, description="signed-Adam steps, all restarts together (the paper: 4,800 on CIFAR)")
    tv: float = Field(0.1, ge=0, description="total-variation weight alpha (eq. 4) on the normalised image")
    init: Literal["uniform", "randn"] = "randn"

    @field_validator("lbfgs")
    @classmethod
    def _adam_only(cls, value: str) -> str:
        if value != "torch":
            raise ValueError(f"lbfgs applies to dlg and idlg (L-BFGS); inverting-gradients runs signed Adam, got lbfgs={value!r}")
        return value


class _DeepInversion(Attack):
    """Shared driver: turn the release into (update, images to find, ids, set) jobs and invert each."""

    version = "1.1"  # 1.1: adaptive by default (``adapt``)
    scenario = "federated-learning"
    consumes = (DeepRelease,)
    produces = (Images, Labels)
    method: ClassVar[Method] = "dlg"

    def settings(self) -> InversionSettings:
        from vispriv.plugins.federated.deep.inversion import InversionSettings

        cfg: DeepInversionConfig = self.config
        return InversionSettings(self.method, cfg.steps, cfg.restarts, cfg.lr, cfg.tv, cfg.init, cfg.max_seconds, cfg.threads,
                                 batched=cfg.batched, lbfgs=cfg.lbfgs)

    def attack(self, release: DeepRelease, public: object, ctx: CellContext) -> AttackResult:
        if not isinstance(release, DeepRelease):
            raise InputError(f"{self.name} needs a deep-model release (DeepRelease); got {type(release).__name__}")
        deep_public = require_deep_public(public)
        model = deep_public.model()
        work = deep_public.local_work()
        b = release.batch_size
        views, insider = adversary_views(release, self.name)
        jobs = [(v.vector, v.ids, v.set_name) for v in views]

        from vispriv.plugins.federated.deep.adaptive import defense_knowledge
        from vispriv.plugins.federated.deep.inversion import invert

        settings = self.settings()
        knowledge: list[DefenseKnowledge] = []
        public_x = deep_public.public_tensor()
        images, labels, ids, sets = [], [], [], []
        recs: list[Reconstruction] = []
        for j, (vector, job_ids, set_name) in enumerate(ctx.progress(jobs, desc=self.name, total=len(jobs), unit="inversion")):
            update = unflatten(vector, model)
            knowledge.append(defense_knowledge(release.protocol, update, self.config.adapt))
            rec = invert(
                model, update, len(job_ids), deep_public.image_shape, deep_public.n_classes,
                settings, seed=ctx.child_seed(self.name, j), work=work, public_images=public_x, device=ctx.device,
                knowledge=knowledge[-1],
            )
            recs.append(rec)
            images.append(to_numpy(rec.images))
            labels.append(rec.labels)
            ids += job_ids
            sets += [set_name] * len(job_ids)
        stacked = np.concatenate(images)
        metrics = {
            "inversions": float(len(jobs)),
            "images_per_inversion": float(np.mean([len(j[1]) for j in jobs])),
            "gradient_loss": float(np.median([r.loss for r in recs])),
            "seconds_per_inversion": float(np.mean([r.seconds for r in recs])),
            "steps_per_inversion": float(np.mean([r.steps for r in recs])),
            "evaluations_per_inversion": float(np.mean([r.evaluations for r in recs])),
            "stopped_by_time": float(np.mean([r.stopped == "time" for r in recs])),
            "insider_view": float(insider),
            "batch_size": float(b),
            "adaptive": float(np.mean([k.adaptive for k in knowledge])),
            "matched_share": float(np.mean([k.matched_share() for k in knowledge])),
            "clip_norm": float(np.mean([k.clip or k.update_clip or 0.0 for k in knowledge])),
        }
        directions = dict.fromkeys(metrics, True)
        directions.update({"gradient_loss": False, "seconds_per_inversion": False,
                           "steps_per_inversion": False, "evaluations_per_inversion": False,
                           "stopped_by_time": False})
        return AttackResult(
            estimate={
                "images": Images(stacked, ids, sets=sets),
                "labels": Labels(np.concatenate(labels), ids, sets=sets),
            },
            metrics=metrics,
            metric_directions=directions,
        )


class Dlg(_DeepInversion):
    """DLG (Zhu et al., NeurIPS 2019): images and soft labels by L-BFGS on the L2 gradient distance."""

    name = "dlg"
    Config = DeepInversionConfig
    method = "dlg"


class Idlg(_DeepInversion):
    """iDLG (Zhao et al., 2020): labels read from the last layer's gradient, then DLG on the images."""

    name = "idlg"
    Config = DeepInversionConfig
    method = "idlg"


class InvertingGradients(_DeepInversion):
    """Inverting Gradients (Geiping et al., NeurIPS 2020): cosine distance + TV, signed Adam, box, restarts."""

    name = "inverting-gradients"
    Config = InvertingGradientsConfig
    method = "inverting-gradients"


class PublicMeanImage(Attack):
    """The no-leak baseline: every image guessed as the public mean image, every label as the most
    common public label. A defense stops an inversion when the inversion scores near this."""

    name = "public-mean-image"
    no_leak = True
    version = "1.0"
    scenario = "federated-learning"
    Config = PluginConfig
    consumes = (DeepRelease,)
    produces = (Images, Labels)

    def attack(self, release: DeepRelease, public: object, ctx: CellContext) -> AttackResult:
        if not isinstance(release, DeepRelease):
            raise InputError(f"{self.name} needs a deep-model release (DeepRelease); got {type(release).__name__}")
        deep_public = require_deep_public(public)
        ids = [i for user in release.target_ids for i in user]
        if len(deep_public.public_images):
            mean = deep_public.mean_image()
            label = int(np.bincount(deep_public.public_labels).argmax())
        else:
            c, h, w = deep_public.image_shape
            mean, label = np.full((h, w, c), 0.5, np.float32), 0
        images = np.repeat(mean[None], len(ids), axis=0)
        return AttackResult(estimate={"images": Images(images, ids), "labels": Labels(np.full(len(ids), label), ids)})
