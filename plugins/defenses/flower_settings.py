"""Flower's own privacy settings as defenses: the defense ``flower`` runs the example Flower app
(dataset ``flower-app``) in Flower's simulation engine with one setting and releases what its
server saw.

``privacy`` is one of

* ``plaintext`` -- FedAvg: the server receives every client's weights;
* ``client-dp-fixed-clipping`` -- Flower's central DP with client-side fixed clipping
  (``DifferentialPrivacyClientSideFixedClipping`` + ``fixedclipping_mod``): each client clips its
  update to ``clipping_norm`` and the *server* adds Gaussian noise (std ``noise_multiplier`` x
  ``clipping_norm`` / clients) to the aggregate, after it received every clipped update;
* ``server-dp-fixed-clipping`` -- central DP with server-side fixed clipping
  (``DifferentialPrivacyServerSideFixedClipping``): the server receives the raw weights, then
  clips and noises them;
* ``server-dp-adaptive-clipping`` -- the same with the clipping norm adapted each round to a
  quantile of the updates' norms (``DifferentialPrivacyServerSideAdaptiveClipping``; Andrew et
  al., "Differentially Private Learning with Adaptive Clipping", NeurIPS 2021), starting at
  ``clipping_norm``: the server still receives the raw weights;
* ``local-dp`` -- Flower's local DP (``LocalDpMod`` on every client, flwr 1.42): each client clips
  its update to ``clipping_norm`` and adds Gaussian noise of std sensitivity x sqrt(2 ln(1.25 /
  ``delta``)) / ``epsilon`` to every weight *before* sending, the sensitivity being ``clipping_norm``;
  the server (plain FedAvg) receives the noised weights, and cannot verify that the clients noised
  them (the capture records the protocol as the app declares it);
* ``secaggplus`` -- SecAgg+ (Bell et al., "Secure Single-Server Aggregation with (Poly)Logarithmic
  Overhead", CCS 2020; Flower's ``SecAggPlusWorkflow`` + ``secaggplus_mod``): the server unmasks
  only the (quantised) mean of the clients' weights;
* ``secaggplus-client-dp-fixed-clipping`` -- both: the clients clip before SecAgg+ masks, the
  server noises the unmasked mean.

(Flower docs, "Differential Privacy": https://flower.ai/docs/framework/explanation-differential-privacy.html;
"Secure Aggregation Protocols": https://flower.ai/docs/framework/contributor-ref-secure-aggregation-protocols.html.)
In every central-DP setting Flower's noise is added on the server, after the server holds what the
release carries, so ``noise_multiplier`` changes only the published model (the utility), never
the release: central DP protects the clients against the model's later users, not against the
server that runs it. Only ``local-dp`` noises what the server receives (``epsilon`` and ``delta``
change the release).

``protect`` simulates the app in a subprocess (``python -m vispriv.plugins.federated.flower.simulate``:
Ray and Flower keep process-wide state), captures the attacked round into a temporary folder with
:class:`~vispriv.plugins.federated.flower.capture.CaptureStrategy` (or the legacy one under SecAgg+),
reads it back with ``flower-capture``'s reader and releases it as the ``none`` defense releases a
capture: every reply as ``DeepPlaintextUpdates``, or under SecAgg+ the unmasked mean as
``DeepPublishedAverage``; the clients' kept batches are the truth. The utility is the accuracy
Flower's centralized evaluation reports on the server's held-out digits after the last round
(``test_accuracy``; ``test_accuracy_init`` before the first). No epsilon is reported for central DP:
Flower 1.42's privacy accountant needs the ``flwr[dp]`` extra (Google's dp-accounting), which
``vispriv[flower]`` does not install, and the example does not wire it in. Under ``local-dp`` the
mod's own per-round parameters are reported as ``epsilon_local`` and ``delta_local`` (lower is more
private): each client spends them every round it trains, and vispriv does not compose them over
rounds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from vispriv.harness import CellContext, Defense, PluginConfig, Protected, UtilityOnly
from vispriv.harness.errors import InputError, PluginError
from vispriv.plugins.federated.deep.payloads import DeepPlaintextUpdates, DeepPublishedAverage, require_deep_public
from vispriv.plugins.federated.flower.payloads import FlowerApp

Privacy = Literal["plaintext", "client-dp-fixed-clipping", "server-dp-fixed-clipping", "server-dp-adaptive-clipping", "local-dp",
                  "secaggplus", "secaggplus-client-dp-fixed-clipping"]
#: the settings that clip (and noise) and so read clipping_norm and noise_multiplier
DP_SETTINGS = ("client-dp-fixed-clipping", "server-dp-fixed-clipping", "server-dp-adaptive-clipping",
               "secaggplus-client-dp-fixed-clipping")
#: a simulation's wall-clock limit (Ray's start and the client actors take 20-60 s on 2 cores)
TIMEOUT_S = 1800


class FlowerPrivacyConfig(PluginConfig):
    privacy: Privacy = Field("plaintext", description="Flower's privacy setting the app runs under")
    noise_multiplier: Annotated[float, UtilityOnly] = Field(
        1.0, ge=0, description="Gaussian noise std in units of clipping_norm / clients, added by the server to "
        "the aggregate (DP settings only; it never reaches what the server receives)")
    clipping_norm: float = Field(1.0, gt=0, allow_inf_nan=False,
                                 description="L2 norm each client's update is clipped to (DP settings and local-dp; "
                                 "local-dp's sensitivity)")
    epsilon: float = Field(1.0, gt=0, allow_inf_nan=False,
                           description="local-dp: LocalDpMod's epsilon, per client and round (not composed)")
    delta: float = Field(1e-5, gt=0, lt=1, description="local-dp: LocalDpMod's delta, per client and round")

    @model_validator(mode="after")
    def _needs_flower(self) -> FlowerPrivacyConfig:
        """Without Flower installed the defense is one config error line naming the extra, before any run."""
        from vispriv.plugins.federated.flower.extra import require_flwr

        require_flwr()
        return self

    def ignored_fields(self) -> frozenset[str]:
        if self.privacy == "local-dp":
            return frozenset({"noise_multiplier"})
        local = frozenset({"epsilon", "delta"})
        return local if self.privacy in DP_SETTINGS else local | {"noise_multiplier", "clipping_norm"}


def _last_line(text: str) -> str:
    """The last line of a failed simulation's output that says something (its exception, mostly)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:400] if lines else "no output"


def release_summary(release: DeepPlaintextUpdates | DeepPublishedAverage, privacy: str, protocol: str) -> dict:
    """What the server saw, without the images: the release kind, each row's L2 norm in the units the
    attacks get (FedSGD: the gradient (w - w_E) / lr; FedAvg: w_E - w), sorted, and the SHA-256 of
    its rows in sorted order (two settings whose servers received the same arrays share it)."""
    import hashlib

    import numpy as np

    rows = release.updates if isinstance(release, DeepPlaintextUpdates) else release.average[None, :]
    rows = np.ascontiguousarray(rows, np.float32)
    ordered = sorted(r.tobytes() for r in rows)
    return {
        "privacy": privacy,
        "flower_protocol": protocol,
        "release": type(release).__name__,
        "rows": len(rows),
        "mode": release.protocol.get("mode"),
        "lr": release.protocol.get("lr"),
        "row_norms": sorted(float(np.linalg.norm(r.astype(np.float64))) for r in rows),
        "rows_sha256": hashlib.sha256(b"".join(ordered)).hexdigest(),
    }


class FlowerPrivacy(Defense):
    """Flower's privacy setting (plain FedAvg, central DP with client- or server-side clipping, local DP, SecAgg+)
    run on the example Flower app; the release is what its server saw."""

    name = "flower"
    version = "1.0"
    scenario = "federated-learning"
    Config = FlowerPrivacyConfig
    consumes = (FlowerApp,)
    produces = (DeepPlaintextUpdates, DeepPublishedAverage)
    releases = {FlowerApp: (DeepPlaintextUpdates, DeepPublishedAverage)}

    def protect(self, private: FlowerApp, public: object, ctx: CellContext) -> Protected:
        from vispriv.plugins.federated.flower.app_dataset import arrays_sha256
        from vispriv.plugins.federated.flower.dataset import FlowerCaptureConfig, FlowerCaptureDataset
        from vispriv.plugins.federated.flower.format import read_arrays, read_manifest
        from vispriv.plugins.federated.flower.outcome import captured_round_protected

        if not isinstance(private, FlowerApp):
            raise InputError(f"flower needs the dataset flower-app (FlowerApp); got {type(private).__name__}")
        deep_public = require_deep_public(public)
        cfg: FlowerPrivacyConfig = self.config
        with tempfile.TemporaryDirectory(prefix="vispriv-flower-") as tmp:
            root = Path(tmp)
            settings = {**private.settings, "capture": str(root / "capture"), "capture_rounds": [private.round],
                        "out": str(root / "out"), "privacy": cfg.privacy, "noise_multiplier": cfg.noise_multiplier,
                        "clipping_norm": cfg.clipping_norm, "epsilon": cfg.epsilon, "delta": cfg.delta,
                        "noise_seed": ctx.child_seed("flower-noise") % 2**32}
            self._simulate(settings, root)
            capture = str(root / "capture")
            manifest = read_manifest(capture)
            entry = manifest.rounds.get(private.round)
            if entry is None:
                raise PluginError(f"flower: the simulation captured no round {private.round}")
            sent = read_arrays(root / "capture" / entry.global_file, entry.global_sha256)
            if arrays_sha256({k: sent[k] for k in manifest.array_names}) != private.global_sha256:
                raise PluginError(f"flower: the global model of round {private.round} is not the dataset's public one")
            scene = FlowerCaptureDataset(FlowerCaptureConfig(capture=capture, round=private.round,
                                                             model=private.model)).load(ctx)
            if scene.public.work != deep_public.work:
                raise PluginError(f"flower: the clients' local work {scene.public.work} is not the dataset's "
                                  f"{deep_public.work}")
            evaluation = json.loads((root / "out" / "evaluation.json").read_text())
        captured = captured_round_protected(scene.private, deep_public)
        rounds = sorted(int(r) for r in evaluation)
        if not rounds or "accuracy" not in evaluation[str(rounds[-1])]:
            raise PluginError("flower: Flower's centralized evaluation reported no accuracy")
        utility = {"test_accuracy": float(evaluation[str(rounds[-1])]["accuracy"]),
                   "test_accuracy_init": float(evaluation[str(rounds[0])]["accuracy"])}
        directions = dict.fromkeys(utility, True)
        if cfg.privacy == "local-dp":
            # the mod's own per-round parameters, not an accounted epsilon over the rounds
            utility.update(epsilon_local=cfg.epsilon, delta_local=cfg.delta)
            directions.update(epsilon_local=False, delta_local=False)
        summary = release_summary(captured.release, cfg.privacy, manifest.protocol)
        return Protected(captured.release, captured.truth, utility, directions,
                         {"flower_release.json": json.dumps(summary, indent=1)})

    def _simulate(self, settings: dict[str, object], root: Path) -> None:
        """One simulation of the app in its own process; a failure is one line naming its cause."""
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        cmd = [sys.executable, "-m", "vispriv.plugins.federated.flower.simulate", json.dumps(settings)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env, cwd=root, check=False)
        except subprocess.TimeoutExpired:
            raise PluginError(f"flower: the Flower simulation ({settings['privacy']}) ran past {TIMEOUT_S} s") from None
        if done.returncode != 0:
            raise PluginError(f"flower: the Flower simulation ({settings['privacy']}) failed with exit status "
                              f"{done.returncode}: {_last_line(done.stderr or done.stdout)}")
