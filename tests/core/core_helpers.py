"""Helpers shared by the core's tests (a module of its own: two conftest.py files cannot both be imported as ``conftest``)."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
SITE_OK = FIXTURES / "site_ok"
SITE_BROKEN = FIXTURES / "site_broken"


def toy_config(**overrides) -> dict:
    config = {
        "name": "toy",
        "seed": 1,
        "datasets": [{"name": "toy-images", "n": 3}],
        "defenses": [{"name": "toy-noise", "sigma": [0.05, 0.2]}, {"name": "toy-histogram"}],
        "attacks": [{"name": "toy-denoise"}],
    }
    config.update(overrides)
    return config
