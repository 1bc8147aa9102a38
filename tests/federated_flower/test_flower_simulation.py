"""A real Flower federation (flwr's simulation engine, 2 clients, 1 round, batch 1), captured.

Pins: the capture holds what the server saw (global arrays, both replies, num-examples, node ids,
run config, protocol ``plaintext``); each captured reply, read by flower-capture, is the FedSGD
gradient vispriv computes for that client's batch at the global weights; the wrapper does not
change training (same final model with and without it). Slow tests pin what Flower's DP wrappers
leave the server: server-side clipping receives the raw replies (the plaintext ones, bit for bit),
client-side clipping receives updates of norm <= the clipping norm, noise or not; local DP
(``LocalDpMod`` on the clients) delivers the clipped update plus Gaussian noise of the std its
formula gives. Skipped without the ``flower`` extra.
"""

from __future__ import annotations

import fcntl
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("flwr", reason="needs the vispriv[flower] extra")

SIMULATE = """
import json, sys
from vispriv.examples.flower.task import AppSettings
from vispriv.plugins.federated.flower.simulate import run_example_app
run_example_app(AppSettings(**json.loads(sys.argv[1])))
"""
MODEL = "vispriv.examples.flower.task:make_net"


def simulate(**settings) -> None:
    done = subprocess.run([sys.executable, "-c", SIMULATE, json.dumps(settings)], capture_output=True, text=True,
                          timeout=600, env={"OMP_NUM_THREADS": "1", **__import__("os").environ})
    assert done.returncode == 0, done.stderr[-3000:]


def final_model(folder: Path) -> dict[str, np.ndarray]:
    with np.load(folder / "final-model.npz", allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


@pytest.fixture(scope="session")
def runs(tmp_path_factory, worker_id) -> Path:
    """One captured simulation (``capture``, final model in ``with``), shared by the module.

    Under pytest-xdist the test workers share it too: the first to need it simulates (~22 s)
    under a file lock in the run's common temporary folder, the others wait for it and read
    the same folder (the xdist way to run a session fixture once), so the simulation starts
    once per test run, not once per worker that draws one of these tests."""
    if worker_id == "master":  # one process: its own folder, the lock below uncontended
        root = tmp_path_factory.mktemp("flower")
    else:
        root = tmp_path_factory.getbasetemp().parent / "flower-simulation"
        root.mkdir(exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "done").exists():
            simulate(capture=str(root / "capture"), out=str(root / "with"))
            (root / "done").touch()
    return root


@pytest.fixture(scope="module")
def run_without_capture(tmp_path_factory) -> Path:
    """The same simulation without the capture wrapper: a second Ray start, slow tier only (its
    own folder: ``runs`` is shared between test workers)."""
    out = tmp_path_factory.mktemp("flower-without")
    simulate(capture="", out=str(out))
    return out


def test_the_capture_holds_what_the_server_saw(runs):
    from vispriv.plugins.federated.flower.format import read_arrays, read_manifest

    manifest = read_manifest(runs / "capture")
    assert manifest.protocol == "plaintext" and list(manifest.rounds) == [1]
    assert manifest.run_config == {"num-server-rounds": 1, "local-epochs": 1, "lr": 0.1, "batch-size": 1}
    entry = manifest.rounds[1]
    assert entry.train_config["server-round"] == 1 and entry.train_config["lr"] == 0.1
    assert len(entry.replies) == 2 and {r.num_examples for r in entry.replies} == {1}
    assert len({r.node_id for r in entry.replies}) == 2
    global_arrays = read_arrays(runs / "capture" / entry.global_file, entry.global_sha256)
    assert list(global_arrays) == manifest.array_names
    aggregate = read_arrays(runs / "capture" / entry.aggregate_file, entry.aggregate_sha256)
    replies = [read_arrays(runs / "capture" / r.file, r.sha256) for r in entry.replies]
    for name in manifest.array_names:  # FedAvg of two clients with one example each
        np.testing.assert_allclose(aggregate[name], (replies[0][name] + replies[1][name]) / 2, atol=1e-7)


def test_each_captured_reply_is_the_gradient_vispriv_computes(runs):
    from vispriv.examples.flower.task import make_net
    from vispriv.plugins.federated.deep.local import LocalWork, client_update
    from vispriv.plugins.federated.deep.payloads import flatten, to_tensor
    from vispriv.plugins.federated.flower.dataset import FlowerCaptureConfig, FlowerCaptureDataset

    scene = FlowerCaptureDataset(FlowerCaptureConfig(capture=str(runs / "capture"), model=MODEL)).load(None)
    private = scene.private
    assert scene.public.work["mode"] == "fedsgd" and private.updates.shape[0] == 2
    for n in range(2):
        x = to_tensor(private.images[n : n + 1])
        y = torch.as_tensor(private.labels[n : n + 1])
        gradient = flatten(client_update(make_net(), x, y, LocalWork("fedsgd")))
        np.testing.assert_allclose(private.updates[n], gradient, atol=2e-5, rtol=1e-4)


def test_an_attack_scores_the_same_on_flowers_capture_and_on_vispriv_simulating_that_round(runs):
    """The cross-check: the same model, batches, seed and round, once as Flower's server received it and
    once as vispriv's own federated-deep rounds (defense ``none``) compute it; DLG with the same seed
    scores each client's digit the same (per image within 0.5 dB, or both beyond 60 dB)."""
    from skimage.metrics import peak_signal_noise_ratio

    from vispriv.harness import CellContext
    from vispriv.plugins.attacks.deep_inversion import Dlg
    from vispriv.plugins.defenses.fedavg_plain import PlainFedAvg
    from vispriv.plugins.federated.deep.payloads import DeepFederatedData
    from vispriv.plugins.federated.flower.dataset import FlowerCaptureConfig, FlowerCaptureDataset

    scene = FlowerCaptureDataset(FlowerCaptureConfig(capture=str(runs / "capture"), model=MODEL)).load(None)
    captured, public = scene.private, scene.public
    simulated = DeepFederatedData(images=captured.images, labels=captured.labels, user_index=np.arange(2),
                                  test_images=captured.images, test_labels=captured.labels, n_users=2,
                                  n_classes=public.n_classes, batch_size=1)
    scores, releases = {}, {}
    for route, private in (("flower", captured), ("vispriv", simulated)):
        ctx = CellContext(seed=7, quiet=True)
        protected = PlainFedAvg(PlainFedAvg.Config(rounds=1)).protect(private, public, ctx)
        releases[route] = protected.release.updates
        estimate = Dlg(Dlg.Config(steps=30)).attack(protected.release, public, ctx).estimate["images"]
        truth = protected.truth["images"]
        want = dict(zip(truth.ids, truth.images))
        scores[route] = [peak_signal_noise_ratio(want[i], got, data_range=1.0) for i, got in zip(estimate.ids, estimate.images)]
    np.testing.assert_allclose(releases["flower"], releases["vispriv"], atol=2e-5, rtol=1e-4)
    for flower, vispriv in zip(scores["flower"], scores["vispriv"]):
        assert abs(flower - vispriv) < 0.5 or min(flower, vispriv) > 60, scores


def test_the_final_model_is_the_captured_aggregate(runs):
    """The server ends the round with exactly the aggregate the capture recorded (FedAvg of the
    captured replies, pinned above), so the capture saw what the training used."""
    from vispriv.plugins.federated.flower.format import read_arrays, read_manifest

    manifest = read_manifest(runs / "capture")
    entry = manifest.rounds[1]
    aggregate = read_arrays(runs / "capture" / entry.aggregate_file, entry.aggregate_sha256)
    final = final_model(runs / "with")
    assert list(final) == manifest.array_names
    for name in manifest.array_names:
        np.testing.assert_array_equal(final[name], aggregate[name])


@pytest.mark.slow
def test_capturing_does_not_change_training(runs, run_without_capture):
    with_capture, without = final_model(runs / "with"), final_model(run_without_capture)
    assert list(with_capture) == list(without)
    for name in without:
        np.testing.assert_allclose(with_capture[name], without[name], rtol=0, atol=1e-7)


@pytest.mark.slow
@pytest.mark.parametrize("privacy", ["server-dp-fixed-clipping", "server-dp-adaptive-clipping"])
def test_server_side_dp_receives_the_raw_replies(runs, tmp_path, privacy):
    from vispriv.plugins.federated.flower.format import read_arrays, read_manifest

    simulate(capture=str(tmp_path / "capture"), out=str(tmp_path / "out"), privacy=privacy,
             noise_multiplier=1.0, clipping_norm=0.1)
    dp, plain = read_manifest(tmp_path / "capture"), read_manifest(runs / "capture")
    # adaptive clipping spends part of the noise on the clipped count (std sigma_b = max(n/20, z) = 1 in the
    # example): the update's noise multiplier becomes (z^-2 - (2 sigma_b)^-2)^(-1/2) (Andrew et al., NeurIPS 2021)
    want = 1.0 if privacy == "server-dp-fixed-clipping" else (1.0 - (2 * 1.0) ** -2) ** -0.5
    assert dp.protocol == privacy and dp.protocol_settings["noise_multiplier"] == pytest.approx(want, rel=1e-12)

    def replies(folder: Path, manifest) -> list[dict[str, np.ndarray]]:
        entry = manifest.rounds[1]
        return sorted((read_arrays(folder / r.file) for r in entry.replies), key=lambda a: float(a["fc.bias"][0]))

    for got, want in zip(replies(tmp_path / "capture", dp), replies(runs / "capture", plain)):
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])
    assert not np.allclose(final_model(tmp_path / "out")["fc.bias"], final_model(runs / "with")["fc.bias"])


@pytest.mark.slow
def test_client_side_clipping_reaches_the_server_clipped_but_noiseless(tmp_path):
    from vispriv.plugins.federated.flower.format import read_arrays, read_manifest

    clip = 0.05
    simulate(capture=str(tmp_path / "capture"), privacy="client-dp-fixed-clipping", noise_multiplier=4.0,
             clipping_norm=clip)
    manifest = read_manifest(tmp_path / "capture")
    assert manifest.protocol == "client-dp-fixed-clipping"
    entry = manifest.rounds[1]
    start = read_arrays(tmp_path / "capture" / entry.global_file)
    for reply in entry.replies:
        sent = read_arrays(tmp_path / "capture" / reply.file)
        norm = np.sqrt(sum(float(np.sum((sent[k] - start[k]) ** 2)) for k in start))
        assert norm == pytest.approx(clip, rel=1e-3)  # clipped to the norm, no noise added on the client


def test_a_client_mod_is_recorded_as_the_app_declares_it(tmp_path):
    """LocalDpMod leaves no trace in the strategy chain: the capture records it as the app's word."""
    from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping, FedAvg

    from vispriv.plugins.federated.flower.capture import CaptureStrategy
    from vispriv.plugins.federated.flower.format import read_manifest

    declared = ("local-dp", {"clipping_norm": 0.05, "sensitivity": 0.05, "epsilon": 1.0, "delta": 1e-5})
    capture = CaptureStrategy(FedAvg(), tmp_path, client_protocol=declared)
    capture.manifest.write(tmp_path)
    manifest = read_manifest(tmp_path)
    assert manifest.protocol == "local-dp" and manifest.protocol_source == "app"
    assert manifest.protocol_settings == declared[1]
    assert CaptureStrategy(FedAvg(), tmp_path / "plain").manifest.protocol_source == "server"
    with pytest.raises(ValueError, match="client_protocol 'local-dp' over a 'server-dp-fixed-clipping' strategy"):
        CaptureStrategy(DifferentialPrivacyServerSideFixedClipping(FedAvg(), 1.0, 0.05, 2), tmp_path / "dp",
                        client_protocol=declared)


@pytest.mark.slow
def test_local_dp_replies_are_the_clipped_update_plus_the_mods_noise(runs, tmp_path):
    from vispriv.plugins.federated.flower.format import read_arrays, read_manifest, truth_path

    clip, epsilon, delta = 0.05, 10.0, 1e-5
    simulate(capture=str(tmp_path / "capture"), privacy="local-dp", clipping_norm=clip, epsilon=epsilon, delta=delta,
             noise_seed=3)
    dp, plain = read_manifest(tmp_path / "capture"), read_manifest(runs / "capture")
    # LocalDpMod (flwr 1.42) adds N(0, s^2) to every entry, s = sensitivity sqrt(2 ln(1.25 / delta)) / epsilon;
    # the example's sensitivity is the clipping norm: s = 0.05 * sqrt(2 ln 125000) / 10 = 0.02422
    std = clip * math.sqrt(2 * math.log(1.25 / delta)) / epsilon
    assert dp.protocol == "local-dp" and dp.protocol_source == "app" and plain.protocol_source == "server"
    assert dp.protocol_settings == pytest.approx({"clipping_norm": clip, "sensitivity": clip, "epsilon": epsilon,
                                                  "delta": delta, "local_noise_std": std}, rel=1e-12)

    def replies_by_label(folder: Path, manifest) -> dict[int, dict[str, np.ndarray]]:
        """Each client's reply, keyed by the label of its round-1 digit (Ray names the nodes at random)."""
        entry = manifest.rounds[1]
        out = {}
        for r in entry.replies:
            with np.load(truth_path(folder, 1, r.node_id), allow_pickle=False) as truth:
                out[int(truth["labels"][0])] = read_arrays(folder / r.file)
        return out

    start = read_arrays(runs / "capture" / plain.rounds[1].global_file)
    got, want = replies_by_label(tmp_path / "capture", dp), replies_by_label(runs / "capture", plain)
    assert sorted(got) == sorted(want) == [0, 1]
    residuals = []
    for label, reply in want.items():
        update = {k: reply[k].astype(np.float64) - start[k] for k in start}
        norm = math.sqrt(sum(float(np.sum(u ** 2)) for u in update.values()))
        assert norm > 10 * clip  # the clipping clips
        for k in start:  # what the server received: the clipped update, noised
            clipped = start[k] + update[k] * (clip / norm)
            assert not np.allclose(got[label][k], reply[k])
            residuals.append((got[label][k].astype(np.float64) - clipped).reshape(-1))
    noise = np.concatenate(residuals)
    # 2 x 15,226 entries: the sample std's relative s.e. is 1 / sqrt(2 n) = 0.4 %, so 5 % is over 10 s.e.
    # (a sensitivity of 2 C, or a missing sqrt 2, would be 100 % or 29 % off)
    assert len(noise) == 2 * 15226
    assert np.std(noise) == pytest.approx(std, rel=0.05)
    assert abs(np.mean(noise)) < 5 * std / math.sqrt(len(noise))


@pytest.mark.slow
def test_secaggplus_capture_holds_only_the_aggregate(runs, tmp_path):
    from vispriv.plugins.federated.flower.dataset import FlowerCaptureConfig, FlowerCaptureDataset
    from vispriv.plugins.federated.flower.format import read_arrays, read_manifest

    simulate(capture=str(tmp_path / "capture"), privacy="secaggplus")
    manifest = read_manifest(tmp_path / "capture")
    entry = manifest.rounds[1]
    assert manifest.protocol == "secaggplus" and len(entry.replies) == 2
    assert all(r.file == "" for r in entry.replies)  # no client's arrays: only the unmasked aggregate
    assert sorted(p.name for p in (tmp_path / "capture" / "round-1").iterdir()) == ["aggregate.npz", "global.npz"]
    plain = read_manifest(runs / "capture").rounds[1]
    want = read_arrays(runs / "capture" / plain.aggregate_file)
    got = read_arrays(tmp_path / "capture" / entry.aggregate_file)
    for name in want:  # the plaintext FedAvg mean, up to SecAgg+'s quantisation
        np.testing.assert_allclose(got[name], want[name], atol=1e-2)
    scene = FlowerCaptureDataset(FlowerCaptureConfig(capture=str(tmp_path / "capture"), model=MODEL)).load(None)
    assert scene.private.averaged and scene.private.updates.shape[0] == 1
