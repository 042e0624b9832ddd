"""`mcpgym call TARGET TOOL [JSON]`: one tool call in a fresh episode (reset, call, close).

Every run is its own episode, and says so; `mcpgym play` keeps one episode across calls.

Layer: CLI, over the public client API.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any

import anyio

from mcpgym._cli.options import TARGETS, add_client_options, client_headers, json_object
from mcpgym._core.types import UNKNOWN_TOOL_INFO
from mcpgym._targets.connect import connect

NAME = "call"


def register(sub: Any) -> None:
    call = sub.add_parser(
        "call",
        help="call one tool in a fresh episode (reset, call, close); `play` keeps an episode going",
        epilog=TARGETS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    call.add_argument("target", metavar="TARGET")
    call.add_argument("tool", metavar="TOOL")
    call.add_argument("arguments", metavar="JSON", nargs="?", default="{}", help="the tool's arguments object")
    call.add_argument("--seed", type=int, default=None, help="seed for reset()")
    call.add_argument("--options", default=None, metavar="JSON", help="options object for reset()")
    add_client_options(call)


def dispatch(args: argparse.Namespace) -> None:
    sys.exit(anyio.run(_call, args))


async def _call(args: argparse.Namespace) -> int:
    arguments = json_object(args.arguments, "the tool arguments")
    options = json_object(args.options, "--options") if args.options else None
    async with connect(args.target, headers=client_headers(args)) as env:
        await env.reset(seed=args.seed, options=options)
        result = await env.call_tool(args.tool, arguments)
    if UNKNOWN_TOOL_INFO in result.info:  # a typo on the command line: one line, not a result dump
        raise SystemExit(f"mcpgym: {result.text}")
    body = result.observation.model_dump(mode="json", by_alias=True, exclude_none=True)
    print(json.dumps(body, indent=2, ensure_ascii=False))
    print(f"(one call in a fresh episode; `mcpgym play {shlex.quote(args.target)}` keeps one going)", file=sys.stderr)
    flags = f"done={result.done} terminated={result.terminated} truncated={result.truncated}"
    components = f" components={json.dumps(result.components)}" if result.components else ""
    print(f"reward={result.reward} {flags}{components}", file=sys.stderr)
    return 1 if result.is_error else 0
