"""Registers the plugins of this scenario (entry point in pyproject.toml)."""

from harness import hookimpl


@hookimpl
def vispriv_register_datasets(register):
    from plugins.federated.datasets import FederatedImages

    register(FederatedImages)


@hookimpl
def vispriv_register_defenses(register):
    from plugins.defenses.dp_baselines import Prr10, Ra12
    from plugins.defenses.dphe import Dphe
    from plugins.defenses.fedavg_plain import PlainFedAvg

    for cls in (PlainFedAvg, Dphe, Prr10, Ra12):
        register(cls)


@hookimpl
def vispriv_register_attacks(register):
    from plugins.attacks.gradient_leakage import GradientLeakage

    register(GradientLeakage)


@hookimpl
def vispriv_register_metrics(register):
    from plugins.federated.grid_metric import LeakCorrelation

    register(LeakCorrelation)
