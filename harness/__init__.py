"""vispriv core: plugin discovery, the attack-versus-defense matrix, caching and MLflow tracking.

The core knows nothing about any one paper. Scenario plugins (``vispriv.plugins.*``) build on the
public API re-exported here.
"""

from vispriv.harness.cache import Cache
from vispriv.harness.context import CellContext
from vispriv.harness.errors import ConfigError, PluginError, VisprivError
from vispriv.harness.hookspecs import hookimpl
from vispriv.harness.payloads import Images, Labels, Payload, Rankings, Scene
from vispriv.harness.plugin import (
    Attack,
    AttackResult,
    Dataset,
    Defense,
    FolderPath,
    Metric,
    PluginConfig,
    Protected,
    UtilityOnly,
)
from vispriv.harness.stats import mean_se

__all__ = [
    "Attack",
    "AttackResult",
    "Cache",
    "CellContext",
    "ConfigError",
    "Dataset",
    "Defense",
    "FolderPath",
    "Images",
    "Labels",
    "Metric",
    "Payload",
    "PluginConfig",
    "PluginError",
    "Protected",
    "Rankings",
    "Scene",
    "UtilityOnly",
    "VisprivError",
    "hookimpl",
    "mean_se",
]

__version__ = "0.1.0"
