"""``vispriv new-plugin``: scaffold a separate, installable plugin package.

The package announces its module in the ``vispriv`` entry-point group, so after
``pip install -e DIR`` it shows up in ``vispriv plugins`` and takes part in matrices
without touching the vispriv repository. The template plugin works on the
``image-release`` scenario (``sample-images`` dataset, ``Images`` payloads) so that it
runs at once; change its scenario and payload types for your own threat model.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from vispriv.harness.errors import ConfigError, WriteError
from vispriv.harness.paths import check_folder
from vispriv.harness.writes import make_folder, write_text

_BODIES = {
    "defense": '''
class {cls}(Defense):
    """Publishes each image with Gaussian noise of standard deviation ``sigma`` added."""

    class Config(PluginConfig):
        sigma: float = Field(0.1, ge=0.0)

    name = "{name}"
    version = "0.1.0"
    scenario = "image-release"
    consumes = (Images,)
    produces = (Images,)

    def protect(self, private: Images, public: Payload | None, ctx: CellContext) -> Protected:
        rng = ctx.rng("noise")
        noisy = np.clip(private.images + rng.normal(0, self.config.sigma, private.images.shape), 0, 1)
        # The defense's own utility: what it costs the published photo (lower is better). The same
        # name as the built-in defenses, so `vispriv report --frontier pixel_change:ssim` sets it beside them.
        change = float(np.mean(np.abs(noisy - private.images)))
        return Protected(
            release=Images(noisy, ids=list(private.ids)),
            truth={{"images": private}},
            utility={{"pixel_change": change}},
            utility_directions={{"pixel_change": False}},
        )


@hookimpl
def vispriv_register_defenses(register):
    register({cls})
''',
    "attack": '''
class {cls}(Attack):
    """Estimates each private image by box-filtering the released one (denoising)."""

    class Config(PluginConfig):
        radius: int = Field(1, ge=0)

    name = "{name}"
    version = "0.1.0"
    scenario = "image-release"
    consumes = (Images,)
    produces = (Images,)

    def attack(self, release: Images, public: Payload | None, ctx: CellContext) -> AttackResult:
        r = self.config.radius
        padded = np.pad(release.images, ((0, 0), (r, r), (r, r), (0, 0)), mode="edge")
        h, w = release.images.shape[1:3]
        acc = np.zeros_like(release.images)
        for dy in range(2 * r + 1):
            for dx in range(2 * r + 1):
                acc += padded[:, dy : dy + h, dx : dx + w]
        return AttackResult(estimate={{"images": Images(acc / (2 * r + 1) ** 2, ids=list(release.ids))}})


@hookimpl
def vispriv_register_attacks(register):
    register({cls})
''',
    "metric": '''
class {cls}(Metric):
    """Largest absolute pixel error between estimate and truth (lower is better)."""

    name = "{name}"
    version = "0.1.0"
    scenario = "any"
    consumes = (Images,)
    higher_is_better = {{"max_abs_error": False}}

    def score(self, truth: Images, estimate: Images, ctx: CellContext) -> dict[str, float]:
        return {{"max_abs_error": float(np.max(np.abs(truth.images - estimate.images)))}}


@hookimpl
def vispriv_register_metrics(register):
    register({cls})
''',
    "dataset": '''
class {cls}(Dataset):
    """Random crops of scikit-image's ``camera`` photo: private and public halves."""

    class Config(PluginConfig):
        size: int = Field(32, ge=8, le=256)
        n: int = Field(4, ge=1, le=32)

    name = "{name}"
    version = "0.1.0"
    scenario = "image-release"
    produces = (Images,)

    def load(self, ctx: CellContext) -> Scene:
        from skimage import data

        photo = data.camera().astype(np.float32) / 255.0
        rng = ctx.rng("crops")
        s = self.config.size
        ys = rng.integers(0, photo.shape[0] - s, 2 * self.config.n)
        xs = rng.integers(0, photo.shape[1] - s, 2 * self.config.n)
        crops = np.stack([photo[y : y + s, x : x + s, None] for y, x in zip(ys, xs)])
        n = self.config.n
        return Scene(private=Images(crops[:n]), public=Images(crops[n:]))


@hookimpl
def vispriv_register_datasets(register):
    register({cls})
''',
}

_HEADER = '''"""vispriv plugin {name!r} ({kind}): scaffolded by ``vispriv new-plugin``."""

from __future__ import annotations

import numpy as np
{field}
from vispriv.harness import {imports}

'''

#: The names each kind's template uses (its module imports these and nothing else).
_IMPORTS = {
    "defense": ["CellContext", "Defense", "Images", "Payload", "PluginConfig", "Protected", "hookimpl"],
    "attack": ["Attack", "AttackResult", "CellContext", "Images", "Payload", "PluginConfig", "hookimpl"],
    "metric": ["CellContext", "Images", "Metric", "hookimpl"],
    "dataset": ["CellContext", "Dataset", "Images", "PluginConfig", "Scene", "hookimpl"],
}

_PYPROJECT = '''[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "vispriv-{name}"
version = "0.1.0"
description = "A vispriv {kind} plugin: {name}"
requires-python = ">=3.10"
dependencies = ["vispriv"]

[project.optional-dependencies]
test = ["pytest>=8"]

[project.entry-points.vispriv]
{name} = "{module}.plugin"

[tool.setuptools]
packages = ["{module}"]
'''

_TEST = '''"""Tests of the {name!r} {kind} plugin, run with pytest."""

from pathlib import Path

from vispriv.harness import Cache, CellContext
from vispriv.harness.registry import load_registry


def test_registered_through_entry_point():
    registry = load_registry(only=["{name}"])
    assert registry.get("{kind}", "{name}").__module__ == "{module}.plugin"


def test_runs(tmp_path: Path):
    from {module}.plugin import {cls}
    from vispriv.plugins.image_release.data import SampleImages

    ctx = CellContext(seed=0, cache=Cache(tmp_path), artifact_dir=tmp_path / "art", quiet=True)
    scene = SampleImages().load(ctx)
    plugin = {cls}()
    kind = "{kind}"
    if kind == "defense":
        out = plugin.protect(scene.private, scene.public, ctx)
        assert out.release.images.shape == scene.private.images.shape
    elif kind == "attack":
        out = plugin.attack(scene.private, scene.public, ctx)
        assert out.estimate["images"].images.shape == scene.private.images.shape
    elif kind == "metric":
        assert plugin.score(scene.private, scene.private, ctx)["max_abs_error"] == 0.0
    else:
        assert len(plugin.load(ctx).private.images) == plugin.config.n
'''

_README = '''# vispriv-{name}

A vispriv {kind} plugin scaffolded by `vispriv new-plugin {name} --kind {kind}`.

    pip install -e '.[test]'          # into the environment that has vispriv
    vispriv plugins {name}            # its parameters; `vispriv plugins --kind {kind}` lists it
    pytest tests

Use it in a matrix config by name (`{name}`). The guide from scaffold to matrix ships with
vispriv: `vispriv docs writing-a-plugin` prints it. To add a `vispriv` subcommand of your own
(an inspector, a converter), implement `vispriv_register_commands(cli)` beside the register hook
in `{module}/plugin.py` and add click commands to `cli` (the guide's "Adding a command").
'''


def scaffold(name: str, kind: str, directory: Path) -> Path:
    """Write the plugin package ``directory/NAME`` and return its path."""
    if not re.fullmatch(r"[a-z][a-z0-9-]{1,40}", name):
        raise ConfigError(f"plugin name {name!r}: use 2-41 lowercase letters, digits and '-', starting with a letter")
    if kind not in _BODIES:
        raise ConfigError(f"unknown plugin kind {kind!r}; allowed: {', '.join(_BODIES)}")
    check_folder(directory, "folder", "choose another --dir", ConfigError)
    root = directory / name
    if root.exists():
        raise ConfigError(f"{root} already exists; choose another name or --dir")
    module = "vispriv_" + name.replace("-", "_")
    cls = "".join(part.capitalize() for part in name.split("-"))
    fields = {"name": name, "kind": kind, "module": module, "cls": cls}
    names = _IMPORTS[kind]
    header = _HEADER.format(**fields, imports=", ".join(names),
                            field="from pydantic import Field\n" if "PluginConfig" in names else "")
    files = {
        root / "pyproject.toml": _PYPROJECT.format(**fields),
        root / "README.md": _README.format(**fields),
        root / module / "__init__.py": "",
        root / module / "plugin.py": header + _BODIES[kind].format(**fields),
        root / "tests" / f"test_{module}.py": _TEST.format(**fields),
    }
    try:
        for path, text in files.items():
            write_text(make_folder(path.parent) / path.name, text)
    except WriteError:
        shutil.rmtree(root, ignore_errors=True)  # a refused write leaves no half a package
        raise
    return root
