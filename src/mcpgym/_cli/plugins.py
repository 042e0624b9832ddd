"""Subcommands that packages built on mcpgym add to the `mcpgym` command.

Layer: CLI plumbing. The core never imports the packages built on it: a package declares an
entry point in the group `mcpgym.commands` naming an object (a module will do) with

    COMMANDS: tuple of the subcommand names it adds
    register(subparsers): add them to `mcpgym`'s argparse subparsers
    dispatch(args): run one of them (exiting with its status)

e.g. `[project.entry-points."mcpgym.commands"] harness = "mcpgym.harness.cli"` gives `mcpgym rollout`
and `mcpgym harness`. Plugins are loaded only when the CLI builds its parser.
"""

from __future__ import annotations

import argparse
import functools
import sys
from importlib.metadata import entry_points
from typing import Any, Protocol, cast

GROUP = "mcpgym.commands"


class CommandPlugin(Protocol):
    COMMANDS: tuple[str, ...]

    def register(self, sub: Any) -> None: ...

    def dispatch(self, args: argparse.Namespace) -> None: ...


@functools.cache
def plugins() -> tuple[CommandPlugin, ...]:
    """Every installed plugin that loads; one that does not is reported on stderr and left out."""
    found: list[CommandPlugin] = []
    for point in sorted(entry_points(group=GROUP), key=lambda p: p.name):
        try:
            plugin = point.load()
        except ImportError as exc:  # installed metadata, missing code: the other commands still work
            print(f"mcpgym: commands from {point.value} unavailable: {exc}", file=sys.stderr)
            continue
        found.append(cast(CommandPlugin, plugin))
    return tuple(found)


def register_all(sub: Any) -> None:
    """Add every plugin's subcommands to `mcpgym`'s subparsers."""
    for plugin in plugins():
        plugin.register(sub)


def command_owner(command: str) -> CommandPlugin | None:
    """The plugin that added `command`, if one did."""
    return next((plugin for plugin in plugins() if command in plugin.COMMANDS), None)
