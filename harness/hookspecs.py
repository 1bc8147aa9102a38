"""pluggy hook specifications.

Each hook receives a ``register`` callback, in the style of ``llm`` and ``datasette``::

    from vispriv.harness import hookimpl

    @hookimpl
    def vispriv_register_defenses(register):
        register(MyDefense)

A plugin module implements any subset of these hooks and is announced through the
``vispriv`` entry-point group of its distribution.
"""

from __future__ import annotations

from collections.abc import Callable

import pluggy

PROJECT = "vispriv"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

Register = Callable[[type], None]


@hookspec
def vispriv_register_datasets(register: Register) -> None:
    """Register :class:`vispriv.harness.plugin.Dataset` subclasses."""


@hookspec
def vispriv_register_defenses(register: Register) -> None:
    """Register :class:`vispriv.harness.plugin.Defense` subclasses."""


@hookspec
def vispriv_register_attacks(register: Register) -> None:
    """Register :class:`vispriv.harness.plugin.Attack` subclasses."""


@hookspec
def vispriv_register_metrics(register: Register) -> None:
    """Register :class:`vispriv.harness.plugin.Metric` subclasses."""
