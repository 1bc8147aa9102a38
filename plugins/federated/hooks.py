"""Registers the plugins of this scenario (entry point in pyproject.toml)."""

from vispriv.harness import hookimpl


@hookimpl
def vispriv_register_datasets(register):
    from vispriv.plugins.federated.datasets import FederatedImages

    register(FederatedImages)
    from vispriv.plugins.federated.face_folders import FaceFolders

    register(FaceFolders)


@hookimpl
def vispriv_register_defenses(register):
    from vispriv.plugins.defenses.dp_baselines import Prr10, Ra12
    from vispriv.plugins.defenses.dphe import Dphe
    from vispriv.plugins.defenses.fedavg_plain import PlainFedAvg

    for cls in (PlainFedAvg, Dphe, Prr10, Ra12):
        register(cls)


@hookimpl
def vispriv_register_attacks(register):
    from vispriv.plugins.attacks.average_isolation import AverageIsolation
    from vispriv.plugins.attacks.gradient_leakage import GradientLeakage

    register(GradientLeakage)
    register(AverageIsolation)


@hookimpl
def vispriv_register_metrics(register):
    from vispriv.plugins.federated.grid_metric import LeakCorrelation

    register(LeakCorrelation)
