"""vispriv core: plugin discovery, the attack-versus-defense matrix, caching and MLflow tracking.

The core knows nothing about any one paper. Scenario plugins (``vispriv.plugins.*``) build on the
public API re-exported here.
"""

from vispriv.harness.cache import Cache
from vispriv.harness.context import CellContext, Progress, no_progress
from vispriv.harness.errors import ConfigError, PluginError, VisprivError
from vispriv.harness.hookspecs import hookimpl
from vispriv.harness.payloads import Images, Labels, Payload, Rankings, Scene
from vispriv.harness.plugin import (
    Anchor,
    Anchors,
    Attack,
    AttackResult,
    Dataset,
    Defense,
    FilePath,
    FolderPath,
    Metric,
    PluginConfig,
    Protected,
    UtilityOnly,
)
from vispriv.harness.stats import mean_se
from vispriv.harness.threads import blas_threads, torch_threads

__all__ = [
    "Anchor",
    "Anchors",
    "Attack",
    "AttackResult",
    "Cache",
    "CellContext",
    "ConfigError",
    "Dataset",
    "Defense",
    "FilePath",
    "FolderPath",
    "Images",
    "Labels",
    "Metric",
    "Payload",
    "PluginConfig",
    "PluginError",
    "Progress",
    "Protected",
    "Rankings",
    "Scene",
    "UtilityOnly",
    "VisprivError",
    "blas_threads",
    "hookimpl",
    "mean_se",
    "no_progress",
    "torch_threads",
]

__version__ = "0.1.0"
