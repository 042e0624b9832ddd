"""Flags and argument parsing that several `mcpgym` commands share.

Layer: CLI. Imports only the target grammar (for the help text).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from typing import Any

from mcpgym._targets.target import FORMS

TARGETS = f"""\
TARGET is what to talk to (modules are found from the working directory, as with `python -m`):
{FORMS}
"""

EPILOG = f"""\
{TARGETS}
examples:
  mcpgym serve mcpgym.servers.echo:Echo                     # stdio (what Claude Desktop / Claude Code launch)
  mcpgym serve mcpgym.servers.echo:Echo --http --port 8000  # streamable HTTP on http://127.0.0.1:8000/mcp
  mcpgym tools mcpgym.servers.echo:Echo
  mcpgym call "python -m mcpgym.servers.echo" echo_message '{{"message": "hi"}}'
  mcpgym check mcpgym.servers.echo:Echo
  mcpgym serve mcpgym.servers.echo:Echo --http --web        # and a page to play it at http://127.0.0.1:8000/web
  mcpgym view runs/                                         # review --record dirs and rollout --out files
  mcpgym init my-env                                        # a new environment package, tests included
"""


def add_client_options(parser: argparse.ArgumentParser) -> None:
    """How a client authenticates to an HTTP target (`tools`, `call`, `rollout`)."""
    parser.add_argument(
        "--token",
        default=os.environ.get("MCPGYM_TOKEN"),
        help="send 'Authorization: Bearer TOKEN' to an HTTP target (default: $MCPGYM_TOKEN, as `serve` reads it)",
    )
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="an HTTP header to send to an HTTP target (e.g. for a proxy); repeatable",
    )


def client_headers(args: argparse.Namespace) -> dict[str, str]:
    """The headers `add_client_options` asked for (`--header` wins over `--token`)."""
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    for line in args.header:
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise SystemExit(f"mcpgym: --header {line!r} is not 'NAME: VALUE'")
        headers[name.strip()] = value.strip()
    return headers


def json_object(text: str, what: str) -> dict[str, Any]:
    """`text` parsed as a JSON object, or the command's one-line error."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"mcpgym: {what} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise SystemExit(f"mcpgym: {what} must be a JSON object, got {type(value).__name__}")
    return value


def load_object(spec: str) -> Any:
    """The object `MODULE:OBJECT` names (modules in the working directory load, as for targets)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        sys.exit(f"mcpgym: {spec!r} is not MODULE:OBJECT")
    from mcpgym._cli.main import working_directory_last

    working_directory_last()  # as for `serve MODULE:CLASS`: after every installed module
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        sys.exit(f"mcpgym: cannot load {spec}: {exc}")
