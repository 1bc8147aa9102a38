"""The differential-privacy baselines of DPHE (ICCV 2017) section 3.1: PRR10 [49] and RA12 [52].

Both follow the paper's description; the noise calibrations are those of the cited
papers as summarised here (simplified, and labelled so in docs/federated.md):

* PRR10 (Pathak, Rane, Raj 2010) -- each user trains an L2-regularised logistic
  regression on its own data plus the initialisation set, once, to (near) convergence;
  the aggregator publishes the average plus Laplace noise eta of scale
  2 / (n_min * eps * lam) per entry, n_min the smallest user set. The noise depends on
  private set sizes, so it is Paillier-encrypted (D encryptions) and added
  homomorphically to the encrypted classifiers (real phe keys, same fast path as DPHE);
  only the noisy average is published.
* RA12 (Rajkumar, Agarwal 2012) -- iterative averaging of L2-regularised linear-SVM
  updates made by gradient descent on a perturbed objective: a linear term b_n . w / K_n
  with b_n Laplace(2 L / eps) drawn once per user (objective perturbation) plus Gaussian
  noise of the Gaussian mechanism, sigma = (2 L / K_n) sqrt(2 ln(1.25 / delta)) / eps, on
  every gradient (L bounds a feature vector's norm). Updates travel in plaintext.

eps = 0.2 and delta = 0.05 by default, as in section 3.1.
"""

from __future__ import annotations

import time

import numpy as np
from pydantic import Field

from vispriv.harness import CellContext, Defense, Protected
from vispriv.plugins.federated.config import ClassifierInitConfig, LinearTrainingConfig
from vispriv.plugins.federated.linear import linear
from vispriv.plugins.federated.outcome import accuracy_curve, base_utility, target_ids, target_truth
from vispriv.plugins.federated.payloads import (
    FederatedData,
    FederatedPublic,
    PlaintextUpdates,
    PublishedAverage,
    require_public,
)
from vispriv.plugins.federated.protocol import paillier as pl
from vispriv.plugins.federated.protocol.rounds import FederatedRun, initial_classifier, run_federated


class Prr10Config(ClassifierInitConfig):
    """PRR10: one round; ``lam`` is the L2 strength of the local logistic regressions (``local_epochs`` of full-batch
    gradient descent each); the elastic-net settings are w̄_0's, the public initialisation's (no local SGD settings:
    PRR10 trains each user's model to convergence, it does not run rounds)."""

    rounds: int = Field(1, ge=1, le=1)
    loss: str = Field("logistic", pattern="^logistic$")
    eps: float = Field(0.2, gt=0)
    lam: float = Field(0.1, gt=0)
    local_epochs: int = Field(200, ge=1)
    key_bits: int = Field(1024, ge=pl.MIN_KEY_BITS, le=8192)
    workers: int | None = Field(None, ge=1)


class Prr10(Defense):
    """Locally trained classifiers averaged under Paillier, plus encrypted Laplace noise (PRR10 [49])."""

    name = "prr10"
    version = "1.0"
    scenario = "federated-learning"
    headline = ("test_accuracy", "ami")
    Config = Prr10Config
    consumes = (FederatedData,)
    produces = (PublishedAverage,)

    def protect(self, private: FederatedData, public: FederatedPublic | None, ctx: CellContext) -> Protected:
        cfg: Prr10Config = self.config
        public = require_public(public)
        n_users, n_classes = private.n_users, private.n_classes
        training = linear.LocalTraining(loss="logistic", reg=cfg.lam, l1_ratio=0.0, init_lr=cfg.init_lr)
        w0 = initial_classifier(public, cfg.training())
        local, used, sizes = [], [], []
        for n in range(n_users):
            rows = private.rows_of(n)
            x = np.vstack([private.features[rows], public.init_features])
            y = np.concatenate([private.labels[rows], public.init_labels])
            local.append(linear.train_full_batch(x, y, n_classes, training, cfg.local_epochs))
            used.append(rows)
            sizes.append(len(x))
        scale = 2.0 / (min(sizes) * cfg.eps * cfg.lam)
        noise = ctx.rng("prr10-noise").laplace(0.0, scale, size=local[0].shape)

        public_key, private_key = pl.generate_keypair(cfg.key_bits)
        summands = n_users + 1
        with pl.ObfuscatorPool(public_key, cfg.workers) as pool:
            pool.fill(summands * noise.size)
            start = time.perf_counter()
            encrypted = [
                pl.encrypt_encoded(pl.encode(v.reshape(-1), public_key, summands), public_key, pool.take(v.size))
                for v in [*local, n_users * noise]
            ]
            enc_seconds = time.perf_counter() - start
            offline = pool.offline_seconds
        n2 = public_key.nsquare
        total = encrypted[0]
        for cts in encrypted[1:]:
            total = [(a * b) % n2 for a, b in zip(total, cts)]
        noisy_avg = pl.decrypt_decode(total, private_key).reshape(local[0].shape) / n_users
        del private_key

        run = FederatedRun(
            averages=np.stack([w0, noisy_avg]),
            updates=np.stack([local]),
            targets=[used],
            accuracy=[
                linear.accuracy(w, private.test_features, private.test_labels) for w in (w0, noisy_avg)
            ],
            sparsity=[float(np.mean(np.stack(local) == 0.0))],
            bytes_per_user_round=float(noise.size * (pl.ciphertext_bytes(public_key))),
        )
        release = PublishedAverage(
            averages=run.averages,
            protocol={**training.model_dump(), "rounds": 1, "n_users": n_users, "lr": cfg.init_lr},
            target_ids=target_ids(1, n_users),
        )
        accuracy_curve(run, ctx)
        utility, directions = base_utility(run, private)
        utility["test_accuracy_noise_free"] = linear.accuracy(
            np.mean(local, axis=0), private.test_features, private.test_labels
        )
        utility["laplace_scale"] = scale
        utility["encryption_seconds_per_user"] = enc_seconds / summands
        utility["offline_seconds_per_user"] = offline / summands
        directions.update(
            {
                "test_accuracy_noise_free": True,
                "laplace_scale": False,
                "encryption_seconds_per_user": False,
                "offline_seconds_per_user": False,
            }
        )
        return Protected(release, target_truth(private, run), utility, directions)


class Ra12Config(LinearTrainingConfig):
    """RA12: L2-regularised linear SVM (hinge), gradient descent, noisy objective."""

    loss: str = Field("hinge", pattern="^hinge$")
    mode: str = Field("gd", pattern="^(gd|sgd)$")
    l1_ratio: float = Field(0.0, ge=0, le=0)
    eps: float = Field(0.2, gt=0)
    delta: float = Field(0.05, gt=0, lt=1)


class Ra12(Defense):
    """Iterative averaging of updates computed on a noise-perturbed objective (RA12 [52])."""

    name = "ra12"
    version = "1.0"
    scenario = "federated-learning"
    headline = ("test_accuracy", "ami")
    Config = Ra12Config
    consumes = (FederatedData,)
    produces = (PlaintextUpdates,)

    def protect(self, private: FederatedData, public: FederatedPublic | None, ctx: CellContext) -> Protected:
        cfg: Ra12Config = self.config
        public = require_public(public)
        norm_bound = float(np.sqrt(np.max(np.sum(private.features**2, axis=1)) + 1.0))
        sizes = np.bincount(private.user_index, minlength=private.n_users)
        shape = (private.n_classes, private.dim + 1)
        rng = ctx.rng("ra12-objective")
        linear_terms = [rng.laplace(0.0, 2.0 * norm_bound / cfg.eps, size=shape) / sizes[n] for n in range(private.n_users)]
        sigmas = [
            (2.0 * norm_bound / sizes[n]) * np.sqrt(2.0 * np.log(1.25 / cfg.delta)) / cfg.eps
            for n in range(private.n_users)
        ]

        def perturb(n: int, w_bar: np.ndarray, w_new: np.ndarray, step_rng: np.random.Generator) -> np.ndarray:
            noise = linear_terms[n] + step_rng.normal(0.0, sigmas[n], size=shape)
            return w_new - cfg.lr * cfg.local_steps * noise

        run = run_federated(private, public, cfg.training(), cfg.rounds, ctx, perturb=perturb)
        release = PlaintextUpdates(
            averages=run.averages,
            protocol=cfg.protocol(private.n_users),
            target_ids=target_ids(cfg.rounds, private.n_users),
            updates=run.updates,
        )
        accuracy_curve(run, ctx)
        utility, directions = base_utility(run, private)
        utility["gaussian_sigma_mean"] = float(np.mean(sigmas))
        directions["gaussian_sigma_mean"] = False
        return Protected(release, target_truth(private, run), utility, directions)
