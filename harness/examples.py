"""The example configs shipped with the package (``vispriv examples``).

The YAML files live in the repository's ``examples/`` folder, installed as the data
package ``vispriv.examples``, so a wheel user gets the configs the README and docs cite.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from vispriv.harness.errors import ConfigError

PACKAGE = "vispriv.examples"


def example_configs() -> dict[str, Traversable]:
    """Every shipped example config, by name (the file name without ``.yaml``)."""
    return {p.name.removesuffix(".yaml"): p for p in sorted(files(PACKAGE).iterdir(), key=lambda p: p.name)
            if p.name.endswith(".yaml")}


def find_example(name: str) -> Traversable:
    """The config called ``name`` (``image_release``, ``image-release`` and ``image_release.yaml`` all work)."""
    configs = example_configs()
    key = name.removesuffix(".yaml").replace("-", "_")
    if key not in configs:
        raise ConfigError(f"unknown example {name!r}; shipped examples: {', '.join(configs)}")
    return configs[key]


def summary(config: Traversable) -> str:
    """The first comment line of a config: what it runs."""
    for line in config.read_text().splitlines():
        if line.startswith("#"):
            return line.lstrip("# ").strip()
    return ""


def write_examples(names: list[str], out_dir: Path, overwrite: bool = False) -> list[Path]:
    """Copy the named configs (all when ``names`` is empty) into ``out_dir``; return the paths written.

    An existing file is never replaced unless ``overwrite``: the user may have edited it.
    """
    chosen = [find_example(n) for n in names] if names else list(example_configs().values())
    targets = [out_dir / c.name for c in chosen]
    clash = [str(t) for t in targets if t.exists()]
    if clash and not overwrite:
        raise ConfigError(f"{', '.join(clash)} already exist(s); pass --force to replace, or choose another --out")
    out_dir.mkdir(parents=True, exist_ok=True)
    for config, target in zip(chosen, targets):
        target.write_text(config.read_text())
    return targets
