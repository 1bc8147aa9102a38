"""Each input of a federated defense takes only the settings it uses (``Defense.configs``).

A classifier cell refuses the clustering's k-means settings and a clustering cell the
classifiers' local training, in one line naming the setting, the dataset, its input and the
settings allowed there; a config listing both kinds of dataset skips only the pairs that do
not fit. Cells carry (log, hash) only their input's settings; the listing names them per input.
Real plugins and real config builds (no plugin runs).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from cli_fork import run_vispriv

from vispriv.harness.config import validate_config
from vispriv.harness.errors import ConfigError, InputError
from vispriv.harness.matrix import build_matrix
from vispriv.harness.registry import load_registry
from vispriv.plugins.defenses.dphe import Dphe, DpheConfig
from vispriv.plugins.federated.clustering.dataset import FederatedClustering

FEATURES = {"name": "federated-features", "source": "bundled"}
CLUSTERING = {"name": "federated-clustering", "source": "bundled"}
DEEP = {"name": "federated-deep", "source": "digits", "arch": "lenet", "n_users": 3}

CLASSIFIER_NONE = "init_epochs, init_lr, l1_ratio, local_steps, loss, lr, mode, reg, rounds"
CLASSIFIER_DPHE = ("capacity_fraction, force, init_epochs, init_lr, key_bits, l1_ratio, local_steps, loss, lr, "
                   "mode, observer, permutations, reg, rounds, workers")
CLUSTERING_NONE = "batch_size, centroid_l1, local_steps, rounds"


@pytest.fixture(scope="module")
def registry():
    return load_registry(strict=True)


def _matrix(registry, datasets, defenses, attacks):
    return build_matrix(validate_config({"name": "t", "datasets": datasets, "defenses": defenses, "attacks": attacks}),
                        registry)


def test_classifier_cell_given_centroid_l1_fails_in_one_line(registry):
    with pytest.raises(ConfigError) as info:
        _matrix(registry, [FEATURES], ["none", {"name": "dphe", "centroid_l1": 1.0}], ["gradient-leakage"])
    assert str(info.value) == (
        "defense 'dphe' on federated-features does not use 'centroid_l1' on FederatedData; "
        f"its settings on FederatedData: {CLASSIFIER_DPHE}"
    )


def test_clustering_cell_given_loss_fails_in_one_line(registry):
    with pytest.raises(ConfigError) as info:
        _matrix(registry, [CLUSTERING], [{"name": "none", "loss": "logistic"}], ["centroid-leakage"])
    assert str(info.value) == (
        "defense 'none' on federated-clustering does not use 'loss' on ClusteringData; "
        f"its settings on ClusteringData: {CLUSTERING_NONE}"
    )


def test_deep_cell_refuses_linear_training_and_dphe_permutations(registry):
    with pytest.raises(ConfigError, match=r"^defense 'none' on federated-deep does not use 'lr' on DeepFederatedData; "
                                          r"its settings on DeepFederatedData: rounds$"):
        _matrix(registry, [DEEP], [{"name": "none", "lr": 0.1}], ["dlg"])
    with pytest.raises(ConfigError, match=r"does not use 'permutations' on DeepFederatedData; its settings on "
                                          r"DeepFederatedData: capacity_fraction, force, key_bits, observer, rounds, workers$"):
        _matrix(registry, [DEEP], [{"name": "dphe", "permutations": "fixed"}], ["dlg"])


def test_clustering_dphe_has_no_insider(registry):
    with pytest.raises(ConfigError, match=r"^defense 'dphe' on federated-clustering does not use 'observer' on ClusteringData"):
        _matrix(registry, [CLUSTERING], [{"name": "dphe", "observer": 0}], ["centroid-leakage"])


def test_a_sweep_of_another_inputs_setting_is_refused_too(registry):
    with pytest.raises(ConfigError, match=r"^defense 'none' on federated-features does not use 'batch_size' on FederatedData"):
        _matrix(registry, [FEATURES], [{"name": "none", "batch_size": [16, 64]}], ["gradient-leakage"])


def test_a_config_with_both_inputs_skips_only_the_pairs_that_do_not_fit(registry):
    matrix = _matrix(
        registry, [FEATURES, CLUSTERING],
        [{"name": "dphe", "centroid_l1": 1.0, "key_bits": 512}, {"name": "none", "loss": "logistic"}],
        ["gradient-leakage", "centroid-leakage"],
    )
    assert [c.label for c in matrix.cells] == [
        "federated-features | none(loss=logistic) | gradient-leakage",
        "federated-clustering | dphe(centroid_l1=1,key_bits=512) | centroid-leakage",
    ]
    refused = [s.line() for s in matrix.skipped if "does not use" in s.reason]
    assert refused == [
        "federated-features x defense dphe: does not use 'centroid_l1' on FederatedData; "
        f"its settings on FederatedData: {CLASSIFIER_DPHE}",
        f"federated-clustering x defense none: does not use 'loss' on ClusteringData; "
        f"its settings on ClusteringData: {CLUSTERING_NONE}",
    ]


def test_each_cell_carries_only_its_inputs_settings(registry):
    matrix = _matrix(registry, [FEATURES, CLUSTERING, DEEP], ["none"], ["gradient-leakage", "centroid-leakage", "dlg"])
    by_dataset = {c.dataset.name: c for c in matrix.cells}
    assert sorted(by_dataset) == ["federated-clustering", "federated-deep", "federated-features"]

    def defense_params(name: str) -> str:
        return ", ".join(sorted(k.removeprefix("defense.") for k in by_dataset[name].params() if k.startswith("defense.")))

    assert defense_params("federated-features") == CLASSIFIER_NONE
    assert defense_params("federated-clustering") == CLUSTERING_NONE
    assert defense_params("federated-deep") == "rounds"
    # the defaults stay out of the label, as before
    assert {c.defense_label for c in matrix.cells} == {"none"}


def test_prr10_takes_only_the_settings_it_uses(registry):
    """PRR10 trains each user's model to convergence in one round: the local-SGD settings (``mode``, ``lr``,
    ``local_steps``) are not its, and a config naming one is refused; w̄_0's elastic net is."""
    prr10 = registry.get("defense", "prr10", "federated-learning")
    assert sorted(prr10.Config.model_fields) == ["eps", "init_epochs", "init_lr", "key_bits", "l1_ratio", "lam",
                                                 "local_epochs", "loss", "reg", "rounds", "workers"]
    with pytest.raises(ConfigError, match="'lr'"):
        _matrix(registry, [FEATURES], [{"name": "prr10", "lr": 0.1}], ["gradient-leakage"])


def test_an_input_without_its_own_config_keeps_every_setting(registry):
    none = registry.get("defense", "none", "federated-learning")

    class Elsewhere:  # a payload type the defense declares no config for
        pass

    assert none.config_for((Elsewhere,)) is none.Config
    assert none.config_for((FederatedClustering.produces[0],)).__name__ == "ClusteringConfig"


def test_direct_use_with_every_setting_still_refuses_an_insider_on_clustering(tmp_path):
    from vispriv.harness import Cache, CellContext

    ctx = CellContext(seed=0, cache=Cache(tmp_path / "cache"), artifact_dir=tmp_path / "art", quiet=True)
    scene = FederatedClustering(FederatedClustering.Config(source="bundled", n_users=3)).load(ctx)
    with pytest.raises(InputError, match=r"observer \(an insider user.s view\) applies to classifier releases, not to clustering"):
        Dphe(DpheConfig(key_bits=512, workers=1, rounds=1, observer=0)).protect(scene.private, scene.public, ctx)


def _vispriv(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "VISPRIV_PLUGINS"}  # every built-in plugin
    return run_vispriv(args, cwd=cwd or Path.cwd(), env=env, timeout=300)


def test_plugins_listing_names_each_inputs_settings():
    out = _vispriv("plugins", "none", "--kind", "defense")
    assert out.returncode == 0, out.stderr
    page = out.stdout.split("defense none 1.0 (scenario federated-learning")[1]
    assert (
        "settings by input (a matrix cell refuses the others):\n"
        "  FederatedData: rounds, loss, reg, l1_ratio, init_epochs, init_lr, mode, lr, local_steps\n"
        "  ClusteringData: rounds, local_steps, batch_size, centroid_l1\n"
        "  DeepFederatedData: rounds\n"
        "  CapturedUpdate: rounds\n"
        "  CapturedRound: rounds"
    ) in page
    data = json.loads(_vispriv("plugins", "dphe", "--json").stdout)["plugins"][0]["settings_by_input"]
    assert data == {
        "FederatedData": ["rounds", "loss", "reg", "l1_ratio", "init_epochs", "init_lr", "mode", "lr", "local_steps",
                          "observer", "key_bits", "capacity_fraction", "workers", "force", "permutations"],
        "DeepFederatedData": ["rounds", "observer", "key_bits", "capacity_fraction", "workers", "force"],
        "ClusteringData": ["rounds", "local_steps", "batch_size", "centroid_l1", "key_bits", "capacity_fraction",
                           "workers", "force", "permutations"],
    }


def test_the_cli_refuses_before_any_run_is_logged(tmp_path):
    config = tmp_path / "lin.yaml"
    config.write_text("name: t\ndatasets: [{name: federated-features, source: bundled}]\n"
                      "defenses: [{name: none, centroid_l1: 1.0}]\nattacks: [gradient-leakage]\n")
    store = tmp_path / "mlflow.db"
    out = _vispriv("matrix", str(config), "--tracking-uri", f"sqlite:///{store}", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "error: defense 'none' on federated-features does not use 'centroid_l1' on FederatedData; "
        f"its settings on FederatedData: {CLASSIFIER_NONE}"
    )
    assert not Path(store).exists()
