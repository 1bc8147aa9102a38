"""Registers the plugins of this scenario (entry point in pyproject.toml)."""

from vispriv.harness import hookimpl


@hookimpl
def vispriv_register_datasets(register):
    from vispriv.plugins.descriptor_release.datasets import BundledImages, ImageFolder

    register(BundledImages)
    register(ImageFolder)
    from vispriv.plugins.descriptor_release.hpatches import HPatches

    register(HPatches)
    from vispriv.plugins.descriptor_release.scene_trees import SceneTrees

    register(SceneTrees)
    from vispriv.plugins.descriptor_release.localisation.dataset import Localisation

    register(Localisation)


@hookimpl
def vispriv_register_attacks(register):
    from vispriv.plugins.attacks.clustering import ClusteringAttack
    from vispriv.plugins.attacks.database import DatabaseAttack
    from vispriv.plugins.attacks.inversion import ATTACKS as INVERSION_ATTACKS
    from vispriv.plugins.attacks.nearest import NearestAttack

    for cls in (NearestAttack, DatabaseAttack, ClusteringAttack, *INVERSION_ATTACKS):
        register(cls)
    from vispriv.plugins.attacks.baselines import FlatGrey
    from vispriv.plugins.attacks.patch_inversion import InvertPatches

    for cls in (FlatGrey, InvertPatches):
        register(cls)


@hookimpl
def vispriv_register_metrics(register):
    from vispriv.plugins.metrics.descriptor_recovery import DescriptorRecovery, LiftingAssumptions
    from vispriv.plugins.metrics.inversion_report import ReconstructionReport

    for cls in (DescriptorRecovery, LiftingAssumptions, ReconstructionReport):
        register(cls)
    from vispriv.plugins.metrics.blur_equivalent import BlurEquivalent, OracleFlat

    for cls in (BlurEquivalent, OracleFlat):
        register(cls)


@hookimpl
def vispriv_register_defenses(register):
    from vispriv.plugins.defenses.affine_lifting import AffineLifting
    from vispriv.plugins.defenses.identity_features import RawFeaturesRelease
    from vispriv.plugins.defenses.ldp_feat import LdpFeat

    for cls in (RawFeaturesRelease, AffineLifting, LdpFeat):
        register(cls)
