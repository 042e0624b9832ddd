"""The `mcpgym` command line: one module per command, parsed and dispatched here.

Layer: top. Each command module (`_cli/<name>.py`) has `NAME`, `register(sub)` and
`dispatch(args)`; packages built on mcpgym add theirs through entry points (`_cli/plugins.py`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from mcpgym._cli import call, check, gateway, init, listing, play, rescore, serve, tools, view, wrap
from mcpgym._cli.options import EPILOG
from mcpgym._cli.plugins import command_owner, register_all
from mcpgym._core.errors import MCPError
from mcpgym._targets.spec import RunSpec, SpecError, is_spec, load_spec, spec_defaults

COMMANDS: tuple[ModuleType, ...] = (serve, tools, call, check, view, init, wrap, rescore, gateway, play, listing)
# Failures while serving keep their traceback; every other command says what went wrong in one line.
_SERVING = {"serve", "view", "wrap"}


def _parser(defaults: dict[str, dict[str, Any]] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcpgym",
        description="Serve, inspect and call mcpgym environments (MCP servers whose tools are actions).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    register_all(sub)  # rollout, harness, ...: added by the packages built on mcpgym (entry points)
    for name, values in (defaults or {}).items():  # a run spec's settings, under the flags given
        sub.choices[name].set_defaults(**values)
    return parser


# Commands that never load a user's target: nothing of theirs is looked up in the working directory.
_NO_TARGET = {"view", "init"}


def working_directory_last() -> None:
    """Let a command line name modules in the working directory (`serve mymod:Env`), found after
    every installed one: a file there (a downloaded runs folder's `h11.py`) never shadows what the
    CLI imports later."""
    if not {"", ".", os.getcwd()} & set(sys.path):
        sys.path.append(os.getcwd())


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.command not in _NO_TARGET:
        working_directory_last()
    spec = _spec_of(args)
    if spec is not None:  # parse again with the spec's settings as defaults: flags given still win
        args = _parser({args.command: spec_defaults(args.command, spec)}).parse_args(argv)
    if args.command == "serve":
        serve.dispatch(args, spec)
        return
    owner = command_owner(args.command) or next(c for c in COMMANDS if c.NAME == args.command)
    if args.command in _SERVING:
        owner.dispatch(args)
        return
    try:
        owner.dispatch(args)
    except MCPError as exc:
        sys.exit(f"mcpgym: {exc.message}")
    except SpecError as exc:
        sys.exit(f"mcpgym: {exc}")
    except (ImportError, AttributeError, TypeError, ValueError) as exc:  # a target that cannot be loaded
        sys.exit(f"mcpgym: {exc}")


def _spec_of(args: argparse.Namespace) -> RunSpec | None:
    target = getattr(args, "env", None) if args.command == "serve" else getattr(args, "target", None)
    if args.command not in ("serve", "rollout") or not is_spec(target):
        return None
    try:
        return load_spec(target)
    except SpecError as exc:
        sys.exit(f"mcpgym: {exc}")
