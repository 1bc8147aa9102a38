"""Dataset flower-capture on a capture written without Flower (tests/datasets' fixture writer, format version 1).

Pins: a truncated file, a missing round and a wrong model are each one ``error:`` line before any
run; the update handed to the attacks is the FedSGD gradient vispriv computes for the client's
batch at the global weights; DLG on a captured batch-1 reply recovers the digit (PSNR far above
the no-leak baseline).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "datasets"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "federated_deep"))
from dataset_layouts import write_flower_capture
from test_deep_matrix import cell_metrics, run

from vispriv.harness.errors import ConfigError
from vispriv.plugins.federated.flower.dataset import FlowerCaptureConfig, FlowerCaptureDataset

MODEL = "vispriv.examples.flower.task:make_net"


def dataset(capture: Path, **extra) -> dict:
    return {"name": "flower-capture", "capture": str(capture), "model": MODEL, **extra}


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> Path:
    return write_flower_capture(tmp_path_factory.mktemp("capture") / "flower-capture")


def test_the_update_is_the_clients_fedsgd_gradient(capture):
    from vispriv.examples.flower.task import make_net
    from vispriv.plugins.federated.deep.local import LocalWork, client_update
    from vispriv.plugins.federated.deep.payloads import flatten, to_tensor

    scene = FlowerCaptureDataset(FlowerCaptureConfig(capture=str(capture), model=MODEL)).load(None)
    private, public = scene.private, scene.public
    assert public.work == {"mode": "fedsgd", "steps": 1, "lr": 0.1, "batchnorm": "eval"}
    assert private.updates.shape[0] == 2 and private.batch_size == 1
    for n in range(2):
        x = to_tensor(private.images[n : n + 1])
        y = torch.as_tensor(private.labels[n : n + 1])
        gradient = flatten(client_update(make_net(), x, y, LocalWork("fedsgd")))
        np.testing.assert_allclose(private.updates[n], gradient, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("case", ["truncated", "missing round", "wrong model"])
def test_bad_captures_are_one_error_line(capture, tmp_path, case):
    import shutil

    folder = tmp_path / "capture"
    shutil.copytree(capture, folder)
    extra: dict = {}
    if case == "truncated":
        reply = next((folder / "round-1").glob("reply-*.npz"))
        reply.write_bytes(reply.read_bytes()[:100])
        message = "is damaged or truncated"
    elif case == "missing round":
        extra = {"round": 3}
        message = "round 3 was not captured"
    else:
        extra = {"model": "vispriv.plugins.federated.deep.models:ResNet18"}
        message = "does not match the capture's arrays"
    with pytest.raises(ConfigError, match=message):
        FlowerCaptureConfig(**{k: v for k, v in dataset(folder, **extra).items() if k != "name"})
    done = run(tmp_path, {"name": "bad", "datasets": [dataset(folder, **extra)], "defenses": ["none"],
                          "attacks": [{"name": "dlg", "steps": 1}]})
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2 and len(errors) == 1 and message in errors[0], done.stderr
    assert "Traceback" not in done.stderr


def test_dlg_recovers_a_captured_digit(tmp_path):
    capture = write_flower_capture(tmp_path / "one-client", clients=1)
    config = {
        "name": "flower-dlg",
        "seed": 0,
        "datasets": [dataset(capture)],
        "defenses": [{"name": "none", "rounds": 1}],
        "attacks": [{"name": "dlg", "steps": 30}, {"name": "public-mean-image"}],
        "metrics": ["psnr", "accuracy"],
    }
    done = run(tmp_path, config)
    assert done.returncode == 0, done.stderr
    metrics = {label.split(" | ")[-1]: m for label, m in cell_metrics(tmp_path, "flower-dlg").items()}
    dlg = next(m for k, m in metrics.items() if k.startswith("dlg"))
    baseline = metrics["public-mean-image"]
    assert dlg["images/psnr"] > baseline["images/psnr"] + 20, (dlg, baseline)


def test_without_flower_the_example_stops_with_one_line_naming_the_extra(monkeypatch, capsys, tmp_path):
    import importlib.util

    from vispriv.plugins.federated.flower import run_example

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "flwr" else real(name, *a))
    assert run_example.main(["--capture", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "pip install 'vispriv[flower]'" in err[0]


@pytest.mark.parametrize(("flower_protocol", "averaged", "clip"), [
    ("client-dp-fixed-clipping", False, 0.05),
    ("local-dp", False, 0.05),  # LocalDpMod clips on the client before it noises: the norm is public, the noise not
    ("plaintext", False, None),
    ("server-dp-fixed-clipping", False, None),  # the server clips after receiving: the replies are raw
    ("secaggplus-client-dp-fixed-clipping", True, None),  # clipped per client, but only the mean is seen
])
def test_only_client_side_clipping_tells_the_attacks_its_update_norm(capture, flower_protocol, averaged, clip):
    from vispriv.plugins.federated.flower.outcome import captured_round_protected
    from vispriv.plugins.federated.flower.payloads import CapturedRound

    public = FlowerCaptureDataset(FlowerCaptureConfig(capture=str(capture), model=MODEL)).load(None).public
    updates = np.ones((1 if averaged else 2, 3), np.float32)
    private = CapturedRound(updates=updates, averaged=averaged, batch_size=1, node_ids=[1, 2],
                            protocol={"flower_protocol": flower_protocol, "clipping_norm": 0.05, "noise_multiplier": 1.0})
    protocol = captured_round_protected(private, public).release.protocol
    assert protocol.get("update_clip_norm") == clip
