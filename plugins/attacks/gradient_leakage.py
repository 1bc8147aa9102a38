"""Gradient-leakage attack on federated classifier updates (DPHE (ICCV 2017) appendix A.2).

The adversary is the aggregator (or a user intercepting traffic) and holds whatever the
release gives it, plus the public initialisation set and standardisation:

* plaintext updates: for every (round, user) it inverts eq. (12) on (w̄_t, w_t^(n)) and
  solves for the sample (hinge: exact; logistic: exact via the bias entry; GD: the mean
  of the samples not classified confidently) -- :mod:`vispriv.plugins.federated.linear.leak`;
* DPHE ciphertexts with doubly permuted indices: it cannot decrypt and cannot place the
  indices (it lacks the private key and phi), so the only per-round signal it has is the
  published average w̄_{t+1}, which it inverts as if it were one update -- for every user
  the same mixture of N samples. An insider user (``observer``) first subtracts its own
  update: N w̄_{t+1} - w^(own) is the sum of the others' updates, exactly the other user's
  update when N = 2 (why section 2.5 demands N >= 3);
* a published average only (PRR10): as the DPHE case.

``view="per-user"`` restricts the attacker to what each user sent: on ciphertexts that
gives nothing to invert, so every estimate is the public mean image and the most common
public label (the no-leak baseline).

Recovered feature vectors map back to pixels by inverting the public standardisation
(x * std + mean, clipped to [0, 1]); an update with no gradient left yields the public
mean image. The hyper-parameters (lr, lam, alpha) are taken from the release's public
protocol unless the config overrides them (the paper's "guessed" parameters).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from vispriv.harness import Attack, AttackResult, CellContext, Images, Labels, PluginConfig
from vispriv.harness.errors import InputError
from vispriv.plugins.federated.linear.leak import loss_gradient_estimate, recover_sample
from vispriv.plugins.federated.payloads import (
    EncryptedUpdates,
    FederatedPublic,
    FederatedRelease,
    PlaintextUpdates,
    require_public,
)


class GradientLeakageConfig(PluginConfig):
    view: Literal["auto", "per-user", "published-average"] = Field(
        "auto",
        description="auto: the most the release allows; per-user: only what each user sent "
        "(nothing usable for ciphertexts); published-average: only the averages w̄_t",
    )
    lr: float | None = Field(None, gt=0, description="override the learning rate the attacker assumes")
    reg: float | None = Field(None, ge=0)
    l1_ratio: float | None = Field(None, ge=0, le=1)


class GradientLeakage(Attack):
    """Recovers training samples (as images) and labels from classifier updates (A.2)."""

    name = "gradient-leakage"
    version = "1.0"
    scenario = "federated-learning"
    Config = GradientLeakageConfig
    consumes = (FederatedRelease,)
    produces = (Images, Labels)

    def attack(self, release: FederatedRelease, public: FederatedPublic | None, ctx: CellContext) -> AttackResult:
        if not isinstance(release, FederatedRelease):
            raise InputError(f"gradient-leakage needs a FederatedRelease; got {type(release).__name__}")
        public = require_public(public)
        cfg: GradientLeakageConfig = self.config
        proto = release.protocol
        lr = cfg.lr if cfg.lr is not None else float(proto["lr"])
        reg = cfg.reg if cfg.reg is not None else float(proto["reg"])
        alpha = cfg.l1_ratio if cfg.l1_ratio is not None else float(proto["l1_ratio"])
        l1, l2 = reg * alpha, reg * (1 - alpha)
        n_users = release.n_users
        prior_label = public.prior_label()

        per_user = isinstance(release, PlaintextUpdates) and cfg.view in ("auto", "per-user")
        blind = cfg.view == "per-user" and not per_user
        insider = (
            isinstance(release, EncryptedUpdates)
            and release.observer is not None
            and release.own_updates.size > 0
            and cfg.view == "auto"
        )
        feats, labels, ids = [], [], []
        inverted = 0
        for t in range(release.n_rounds):
            w_bar = release.averages[t]
            if per_user:
                for n in range(n_users):
                    x, y = recover_sample(loss_gradient_estimate(w_bar, release.updates[t, n], lr, l1, l2), w_bar)
                    inverted += x is not None
                    feats.append(x)
                    labels.append(y)
                    ids.append(release.target_ids[t][n])
                continue
            if blind:
                # Ciphertexts without the key and indices without phi: nothing to invert.
                for n in range(n_users):
                    feats.append(None)
                    labels.append(prior_label)
                    ids.append(release.target_ids[t][n])
                continue
            published = release.averages[t + 1]
            if insider:
                others = (n_users * published - release.own_updates[t]) / (n_users - 1)
                targets = [n for n in range(n_users) if n != release.observer]
            else:
                others = published
                targets = list(range(n_users))
            x, y = recover_sample(loss_gradient_estimate(w_bar, others, lr, l1, l2), w_bar)
            inverted += x is not None
            for n in targets:
                feats.append(x)
                labels.append(y)
                ids.append(release.target_ids[t][n])

        mean_feature = public.init_features.mean(axis=0)
        stacked = np.stack([mean_feature if x is None else x for x in feats])
        labels = [prior_label if x is None else y for x, y in zip(feats, labels)]
        images = public.to_pixels(stacked)
        metrics = {
            "estimates": float(len(ids)),
            "inverted_fraction": inverted / max(1, len(feats) if per_user else release.n_rounds),
            "per_user_view": float(per_user),
            "insider_view": float(insider),
        }
        if isinstance(release, EncryptedUpdates):
            metrics["ciphertexts_seen"] = float(release.ciphertexts.shape[0] * release.ciphertexts.shape[1])
        return AttackResult(
            estimate={"images": Images(images, ids), "labels": Labels(np.asarray(labels), ids)},
            metrics=metrics,
            metric_directions=dict.fromkeys(metrics, True),
        )
