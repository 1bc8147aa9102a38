"""vispriv: an adversarial evaluation harness for visual privacy.

The distribution installs one import package, ``vispriv``, with two subpackages:

* :mod:`vispriv.harness` -- the core (hookspecs, registry, payloads, matrix, runner,
  tracking, report, CLI); it knows no paper;
* :mod:`vispriv.plugins` -- the built-in defenses, attacks, metrics, datasets and each
  scenario's library.

In the source tree they are the top-level folders ``harness/`` and ``plugins/`` (the
project's fixed layout); ``pyproject.toml`` maps them under this package with setuptools'
``package-dir``, so no generic top-level ``harness`` or ``plugins`` lands in a user's
environment. This module stays import-light: ``import vispriv`` loads nothing else.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("vispriv")
except PackageNotFoundError:  # imported from a tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
