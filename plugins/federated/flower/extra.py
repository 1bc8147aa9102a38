"""The ``flower`` extra: one line naming it when Flower is not installed."""

from __future__ import annotations

import importlib.util

from vispriv.harness.errors import ConfigError

EXTRA_HINT = "needs the 'flower' extra: pip install 'vispriv[flower]'"


def require_flwr() -> None:
    """Raise a one-line ConfigError naming the extra when ``flwr`` cannot be imported."""
    if importlib.util.find_spec("flwr") is None:
        raise ConfigError(f"Flower (flwr) is not installed; capturing and the Flower example {EXTRA_HINT}")
