"""Registers the plugins of this scenario (entry point in pyproject.toml)."""

from harness import hookimpl


@hookimpl
def vispriv_register_attacks(register):
    from plugins.attacks.inversion import ATTACKS as INVERSION_ATTACKS

    for cls in INVERSION_ATTACKS:
        register(cls)


@hookimpl
def vispriv_register_metrics(register):
    from plugins.metrics.inversion_report import ReconstructionReport

    register(ReconstructionReport)


@hookimpl
def vispriv_register_defenses(register):
    from plugins.defenses.ldp_feat import LdpFeat

    register(LdpFeat)
