"""The example configs shipped with the package (``vispriv examples``).

The YAML files live in the repository's ``examples/`` folder, installed as the data
package ``vispriv.examples``, so a wheel user gets the configs the README and docs cite.
Sub-folders are sub-packages (``examples/paper/``: one config per table of the papers,
``vispriv.examples.paper``); their configs are named ``<folder>/<name>``.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from vispriv.harness.errors import ConfigError
from vispriv.harness.writes import make_folder, write_text

PACKAGE = "vispriv.examples"


def _yaml_files(folder: Traversable, prefix: str = "") -> dict[str, Traversable]:
    """The ``.yaml`` files of ``folder`` and of its sub-folders, by ``prefix`` + name without ``.yaml``."""
    found: dict[str, Traversable] = {}
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".yaml"):
            found[prefix + entry.name.removesuffix(".yaml")] = entry
        elif entry.is_dir() and not entry.name.startswith(("_", ".")):
            found.update(_yaml_files(entry, f"{prefix}{entry.name}/"))
    return found


def example_configs() -> dict[str, Traversable]:
    """Every shipped example config, by name: the file name without ``.yaml``, ``paper/<name>`` for a sub-folder's."""
    return _yaml_files(files(PACKAGE))


def example_key(name: str) -> str:
    """The name under which ``name`` is shipped (``image_release``, ``image-release`` and
    ``image_release.yaml`` all work; ``paper/dphe-table1-caltech`` for one in a sub-folder)."""
    configs = example_configs()
    key = name.removesuffix(".yaml").replace("-", "_").removeprefix("examples/")
    if key not in configs:
        raise ConfigError(f"unknown example {name!r}; shipped examples: {', '.join(configs)}")
    return key


def find_example(name: str) -> Traversable:
    """The config called ``name`` (see :func:`example_key`)."""
    return example_configs()[example_key(name)]


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
    configs = example_configs()
    chosen_names = [example_key(n) for n in names] if names else list(configs)
    chosen = [configs[n] for n in chosen_names]
    targets = [out_dir / f"{n}.yaml" for n in chosen_names]
    clash = [t for t in targets if t.exists()]
    if clash and not overwrite:
        raise ConfigError(_clash_message(clash, len(targets), out_dir))
    for config, target in zip(chosen, targets):
        make_folder(target.parent)
        write_text(target, config.read_text())
    return targets


def _clash_message(clash: list[Path], wanted: int, out_dir: Path) -> str:
    """One short line for configs that exist already (a checkout's ``examples/`` holds them all)."""
    if len(clash) == 1:
        return f"{clash[0]} already exists; pass --force to replace it, or choose another --out"
    shown = ", ".join(str(p.relative_to(out_dir)) for p in clash[:2]) + (", ..." if len(clash) > 2 else "")
    return (f"folder {out_dir} already holds {len(clash)} of the {wanted} configs to write ({shown}); "
            "pass --force to replace them, or choose another --out")
