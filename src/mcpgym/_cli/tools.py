"""`mcpgym tools TARGET`: list a target's tools.

Layer: CLI, over the public client API.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import anyio

from mcpgym._cli.options import TARGETS, add_client_options, client_headers
from mcpgym._targets.connect import connect

NAME = "tools"


def register(sub: Any) -> None:
    tools = sub.add_parser(
        "tools", help="list a target's tools", epilog=TARGETS, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    tools.add_argument("target", metavar="TARGET")
    tools.add_argument("--json", action="store_true", help="print the full tools/list entries as JSON")
    add_client_options(tools)


def dispatch(args: argparse.Namespace) -> None:
    anyio.run(_tools, args.target, args.json, client_headers(args))


async def _tools(target: str, as_json: bool, headers: dict[str, str]) -> None:
    async with connect(target, headers=headers) as env:
        listed = await env.list_tools()
    if as_json:
        print(json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed], indent=2))
        return
    for t in listed:
        params = ", ".join(t.input_schema.get("properties", {}))
        print(f"{t.name}({params})")
        if t.description:
            print(f"    {t.description.splitlines()[0]}")
