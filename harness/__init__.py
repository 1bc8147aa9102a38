"""vispriv core: plugin discovery, the attack-versus-defense matrix, caching and MLflow tracking.

The core knows nothing about any one paper. Scenario plugins (``plugins.*``) build on the
public API re-exported here.
"""

from harness.cache import Cache
from harness.context import CellContext
from harness.errors import ConfigError, PluginError, VisprivError
from harness.hookspecs import hookimpl
from harness.payloads import Images, Labels, Payload, Rankings, Scene
from harness.plugin import Attack, AttackResult, Dataset, Defense, Metric, PluginConfig, Protected

__all__ = [
    "Attack",
    "AttackResult",
    "Cache",
    "CellContext",
    "ConfigError",
    "Dataset",
    "Defense",
    "Images",
    "Labels",
    "Metric",
    "Payload",
    "PluginConfig",
    "PluginError",
    "Protected",
    "Rankings",
    "Scene",
    "VisprivError",
    "hookimpl",
]

__version__ = "0.1.0"
