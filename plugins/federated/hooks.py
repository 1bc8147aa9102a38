"""Registers the plugins of this scenario (entry point in pyproject.toml)."""

from vispriv.harness import hookimpl


@hookimpl
def vispriv_register_datasets(register):
    from vispriv.plugins.federated.datasets import FederatedImages

    register(FederatedImages)
    from vispriv.plugins.federated.features.dataset import FederatedFeatures

    register(FederatedFeatures)
    from vispriv.plugins.federated.clustering.dataset import FederatedClustering

    register(FederatedClustering)
    from vispriv.plugins.federated.features.face_folders import FaceFolders

    register(FaceFolders)
    from vispriv.plugins.federated.deep.dataset import DeepFederatedImages
    from vispriv.plugins.federated.deep.imprint_dataset import ImprintedDeepFederatedImages

    register(DeepFederatedImages)
    register(ImprintedDeepFederatedImages)
    from vispriv.plugins.federated.deep.captured import CapturedUpdateDataset

    register(CapturedUpdateDataset)
    from vispriv.plugins.federated.flower.dataset import FlowerCaptureDataset

    register(FlowerCaptureDataset)
    from vispriv.plugins.federated.flower.app_dataset import FlowerAppDataset

    register(FlowerAppDataset)


@hookimpl
def vispriv_register_defenses(register):
    from vispriv.plugins.defenses.dp_baselines import Prr10, Ra12
    from vispriv.plugins.defenses.dp_sgd import DpSgd
    from vispriv.plugins.defenses.dphe import Dphe
    from vispriv.plugins.defenses.fedavg_plain import PlainFedAvg
    from vispriv.plugins.defenses.flower_settings import FlowerPrivacy
    from vispriv.plugins.defenses.gradient_pruning import GradientPruning

    for cls in (PlainFedAvg, Dphe, Prr10, Ra12, GradientPruning, DpSgd, FlowerPrivacy):
        register(cls)


@hookimpl
def vispriv_register_attacks(register):
    from vispriv.plugins.attacks.average_isolation import AverageIsolation
    from vispriv.plugins.attacks.gradient_leakage import GradientLeakage

    register(GradientLeakage)
    register(AverageIsolation)
    from vispriv.plugins.attacks.centroid_leakage import CentroidLeakage

    register(CentroidLeakage)
    from vispriv.plugins.attacks.deep_inversion import Dlg, Idlg, InvertingGradients, PublicMeanImage

    for cls in (Dlg, Idlg, InvertingGradients, PublicMeanImage):
        register(cls)
    from vispriv.plugins.attacks.imprint import Imprint

    register(Imprint)


@hookimpl
def vispriv_register_metrics(register):
    from vispriv.plugins.federated.linear.grid_metric import LeakCorrelation

    register(LeakCorrelation)


@hookimpl
def vispriv_register_commands(cli):
    from vispriv.plugins.federated.features.extract import main as extract_features

    cli.add_command(extract_features)
