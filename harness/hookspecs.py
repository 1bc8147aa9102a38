"""pluggy hook specifications.

Each hook receives a ``register`` callback, in the style of ``llm`` and ``datasette``::

    from vispriv.harness import hookimpl

    @hookimpl
    def vispriv_register_defenses(register):
        register(MyDefense)

A plugin module implements any subset of these hooks and is announced through the
``vispriv`` entry-point group of its distribution. ``vispriv_register_commands`` receives the
``vispriv`` click group itself, as ``llm``'s and ``datasette``'s ``register_commands`` do, and
adds subcommands to it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    import click

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


@hookspec
def vispriv_register_commands(cli: click.Group) -> None:
    """Add subcommands to the ``vispriv`` command line: ``@cli.command()`` or ``cli.add_command(cmd)``.

    Loaded only when a command the core does not have is asked for, or the command list is
    shown (``vispriv --help``). A command that clashes with an existing one is refused, and
    the plugin named (``vispriv plugins`` lists it among the failures).
    """
