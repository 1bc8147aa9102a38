"""Isolating one user's update from the published average alone (beyond DPHE (ICCV 2017) section 2.5).

Threat model: any party -- the aggregator, the key generator, a user, an outsider -- that
sees the published averages w̄_0..w̄_T and the public protocol (loss, lr, lam, alpha). It
reads nothing else of the release: no update, ciphertext or index, so it applies to
plaintext FedAvg, DPHE and PRR10 alike.

With hinge loss and one SGD sample per round (A.2.1), a user whose sample sits beyond
the margin on every one-vs-rest row has a zero loss gradient and sends exactly
g = prox(w̄_t, 0), the same for every such user. If all users but one did, then

    N w̄_{t+1} - (N - 1) g = w_t^(k)

is the remaining user's update, which eq. (12) inverts exactly (leak.py). Section 2.5
argues that for N >= 3 the average "remains ambiguous"; that holds for the *sum*, not
for sums whose other terms are known. The attacker does not know which rounds are
isolated: it tests the hypothesis with :func:`~vispriv.plugins.federated.linear.leak.single_sample_gradient`
(the Theta of one sample has a fixed shape) and claims a sample only where it holds. It
does not learn *which* user sent it, so the recovered sample is the estimate for every
user of that round; rounds that fail the test get the public mean image and the most
common public label (the no-leak baseline).
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from vispriv.harness import Attack, AttackResult, CellContext, Images, Labels, PluginConfig
from vispriv.harness.errors import InputError
from vispriv.plugins.federated.linear.leak import (
    isolated_update,
    loss_gradient_estimate,
    recover_sample,
    single_sample_gradient,
)
from vispriv.plugins.federated.payloads import FederatedPublic, FederatedRelease, require_public


class AverageIsolationConfig(PluginConfig):
    tol: float = Field(1e-6, gt=0, description="relative tolerance of the one-sample test (single_sample_gradient)")


class AverageIsolation(Attack):
    """Recovers a user's training sample from the published averages when the other users' steps were gradient-free."""

    name = "average-isolation"
    version = "1.0"
    scenario = "federated-learning"
    Config = AverageIsolationConfig
    consumes = (FederatedRelease,)
    produces = (Images, Labels)

    def attack(self, release: FederatedRelease, public: FederatedPublic | None, ctx: CellContext) -> AttackResult:
        if not isinstance(release, FederatedRelease):
            raise InputError(f"average-isolation needs a FederatedRelease; got {type(release).__name__}")
        public = require_public(public)
        proto = release.protocol
        lr, reg, alpha = float(proto["lr"]), float(proto["reg"]), float(proto["l1_ratio"])
        l1, l2 = reg * alpha, reg * (1 - alpha)
        n_users = release.n_users
        prior_label = public.prior_label()
        mean_feature = public.init_features.mean(axis=0)

        feats, labels, ids = [], [], []
        isolated = 0
        for t in range(release.n_rounds):
            w_bar = release.averages[t]
            update = isolated_update(w_bar, release.averages[t + 1], n_users, lr, l1, l2)
            theta = loss_gradient_estimate(w_bar, update, lr, l1, l2)
            x, y = mean_feature, prior_label
            if single_sample_gradient(theta, str(proto["loss"]), self.config.tol):
                x, y = recover_sample(theta, w_bar)
                isolated += 1
            for n in range(n_users):
                feats.append(x)
                labels.append(y)
                ids.append(release.target_ids[t][n])

        metrics = {"isolated_rounds": isolated / max(1, release.n_rounds), "estimates": float(len(ids))}
        return AttackResult(
            estimate={"images": Images(public.to_pixels(np.stack(feats)), ids), "labels": Labels(np.asarray(labels), ids)},
            metrics=metrics,
            metric_directions={"isolated_rounds": True, "estimates": True},
        )
