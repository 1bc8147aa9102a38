"""Flower's privacy settings as the defenses of one matrix (dataset ``flower-app``, defense ``flower``).

Pins: a bad setting is one ``error:`` line and exit status 2 before any simulation; the dataset's
public model is the app's initial model (the round-1 global arrays every setting shares); through
the CLI, a 2-client 1-round matrix releases every reply (``DeepPlaintextUpdates``) under plaintext,
server-side and client-side DP and only the unmasked mean (``DeepPublishedAverage``) under SecAgg+
with client-side DP; server-side DP's release equals plaintext's bit for bit (the server receives
the raw replies); client-side DP's replies reach the server clipped to the clipping norm; the
utility is Flower's centralized evaluation of the app's model. Skipped without the ``flower`` extra.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("flwr", reason="needs the vispriv[flower] extra")

from cli_fork import run_vispriv
from mlflow.tracking import MlflowClient

CLIP = 0.05
LR = 0.1


def run(folder: Path, config: dict, *args: str) -> subprocess.CompletedProcess:
    path = folder / "matrix.yaml"
    path.write_text(yaml.safe_dump(config))
    return run_vispriv(["matrix", str(path), "--quiet", "--tracking-uri", f"sqlite:///{folder / 'mlflow.db'}",
                        "--cache-dir", str(folder / "cache"), *args], cwd=folder, timeout=1200)


def matrix(*defenses: dict) -> dict:
    return {"name": "flower-matrix-test", "seed": 0,
            "datasets": [{"name": "flower-app", "num_clients": 2, "rounds": 1}],
            "defenses": list(defenses), "attacks": ["public-mean-image"], "metrics": ["psnr", "accuracy"]}


@pytest.mark.parametrize(("defense", "dataset", "message"), [
    ({"name": "flower", "privacy": "client-dp-adaptive-clipping"}, {},
     "defense 'flower': privacy: Input should be 'plaintext'"),
    ({"name": "flower", "privacy": "local-dp", "epsilon": 0}, {}, "defense 'flower': epsilon: Input should be greater than 0"),
    ({"name": "flower", "privacy": "local-dp", "epsilon": [1, -1]}, {},
     "defense 'flower': epsilon: Input should be greater than 0"),
    ({"name": "flower", "privacy": "local-dp", "delta": 0}, {}, "defense 'flower': delta: Input should be greater than 0"),
    ({"name": "flower", "privacy": "local-dp", "delta": 1}, {}, "defense 'flower': delta: Input should be less than 1"),
    ({"name": "flower", "privacy": "client-dp-fixed-clipping", "clipping_norm": 0}, {},
     "defense 'flower': clipping_norm: Input should be greater than 0"),
    ({"name": "flower"}, {"round": 2}, "round: Input should be less than or equal to 1"),
    ({"name": "flower"}, {"batch_size": 8}, "flower-app: batch_size 8 exceeds images_per_client 4"),
    ({"name": "flower"}, {"model": "vispriv.plugins.federated.deep.models:nothing"}, "flower-app: model "),
])
def test_a_bad_setting_is_one_error_line(tmp_path, defense, dataset, message):
    config = matrix(defense)
    config["datasets"][0].update(dataset)
    done = run(tmp_path, config)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], done.stderr


def test_the_public_model_is_the_apps_initial_model():
    import torch

    from vispriv.examples.flower.task import make_net
    from vispriv.plugins.federated.deep.payloads import state_of
    from vispriv.plugins.federated.flower.app_dataset import FlowerAppConfig, FlowerAppDataset, arrays_sha256

    scene = FlowerAppDataset(FlowerAppConfig(seed=3, rounds=2)).load(None)
    want = make_net(3)
    assert scene.private.global_sha256 == arrays_sha256(state_of(want))
    assert scene.private.global_sha256 != arrays_sha256(state_of(make_net(0)))
    assert scene.private.settings["rounds"] == 2 and scene.private.round == 1
    assert scene.public.work == {"mode": "fedsgd", "steps": 1, "lr": 0.1, "batchnorm": "eval"}
    x = torch.rand(2, 1, 32, 32)
    with torch.no_grad():
        np.testing.assert_array_equal(scene.public.model()(x).numpy(), want.eval()(x).numpy())


def release_of(client: MlflowClient, run_id: str, folder: Path) -> dict:
    return json.loads(Path(client.download_artifacts(run_id, "flower_release.json", str(folder))).read_text())


@pytest.mark.slow
def test_flowers_settings_release_what_their_server_saw(tmp_path):
    """Four simulations (about 2 minutes on 2 shared cores)."""
    from vispriv.examples.flower.task import evaluate, load_test, make_net

    config = matrix(
        {"name": "flower", "privacy": "plaintext"},
        {"name": "flower", "privacy": "server-dp-fixed-clipping", "clipping_norm": CLIP, "noise_multiplier": 1},
        {"name": "flower", "privacy": "client-dp-fixed-clipping", "clipping_norm": CLIP, "noise_multiplier": 4},
        {"name": "flower", "privacy": "secaggplus-client-dp-fixed-clipping", "clipping_norm": CLIP},
    )
    done = run(tmp_path, config)
    assert done.returncode == 0, done.stderr[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("flower-matrix-test")
    runs = [r for r in client.search_runs([exp.experiment_id]) if "mlflow.parentRunId" in r.data.tags]
    by_privacy = {r.data.params["defense.privacy"]: r for r in runs}
    assert sorted(by_privacy) == ["client-dp-fixed-clipping", "plaintext", "secaggplus-client-dp-fixed-clipping",
                                  "server-dp-fixed-clipping"]
    seen = {p: release_of(client, r.info.run_id, tmp_path / p) for p, r in by_privacy.items()}
    kinds = {p: (s["release"], s["rows"], s["flower_protocol"]) for p, s in seen.items()}
    assert kinds == {
        "plaintext": ("DeepPlaintextUpdates", 2, "plaintext"),
        "server-dp-fixed-clipping": ("DeepPlaintextUpdates", 2, "server-dp-fixed-clipping"),
        "client-dp-fixed-clipping": ("DeepPlaintextUpdates", 2, "client-dp-fixed-clipping"),
        "secaggplus-client-dp-fixed-clipping": ("DeepPublishedAverage", 1, "secaggplus-client-dp-fixed-clipping"),
    }
    # the server receives the raw replies before it clips and noises them: plaintext's, bit for bit
    assert seen["server-dp-fixed-clipping"]["rows_sha256"] == seen["plaintext"]["rows_sha256"]
    # FedSGD: the release holds gradients (w - w_E) / lr; the clients clipped w_E - w to CLIP, no noise
    assert seen["client-dp-fixed-clipping"]["mode"] == "fedsgd"
    for norm in seen["client-dp-fixed-clipping"]["row_norms"]:
        assert norm * LR <= CLIP * (1 + 1e-5) and norm * LR == pytest.approx(CLIP, rel=1e-3)
    assert min(seen["plaintext"]["row_norms"]) * LR > 10 * CLIP  # so the clipping did clip
    # the utility is Flower's centralized evaluation: before round 1, the app's initial model on the test digits
    _, accuracy = evaluate(make_net(0), *load_test(200))
    for r in runs:
        assert r.data.metrics["utility/test_accuracy_init"] == pytest.approx(accuracy, abs=1e-7)
        assert 0.0 <= r.data.metrics["utility/test_accuracy"] <= 1.0
        assert r.data.metrics["labels/accuracy"] == 0.5  # the baseline guesses label 0; the two kept digits are a 0 and a 1
