"""`mcpgym tools TARGET`: list a target's tools, as `name(arg: type, …)` and their first sentence.

Layer: CLI, over the public client API. `signature` and `first_sentence` are shared with `play`.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

import anyio
import mcp_types as types

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
        print(signature(t))
        if t.description:
            print(f"    {first_sentence(t.description)}")


def signature(tool: types.Tool) -> str:
    """`name(arg: type, opt: type = default)` from the tool's input schema."""
    schema = tool.input_schema
    required = set(schema.get("required") or ())
    params = []
    for name, prop in (schema.get("properties") or {}).items():
        shown = f"{name}: {type_name(prop)}"
        if name not in required and isinstance(prop, dict) and "default" in prop:
            shown += f" = {json.dumps(prop['default'], ensure_ascii=False)}"
        elif name not in required:
            shown += " (optional)"
        params.append(shown)
    return f"{tool.name}({', '.join(params)})"


def type_name(prop: Any) -> str:
    """A short type for one property schema: `string`, `integer`, `up|down`, `list[integer]`."""
    if not isinstance(prop, dict):
        return "any"
    if "enum" in prop:
        return "|".join(str(v) for v in prop["enum"])
    if "const" in prop:
        return json.dumps(prop["const"], ensure_ascii=False)
    kind = prop.get("type")
    if kind == "array":
        return f"list[{type_name(prop.get('items'))}]"
    if isinstance(kind, str):
        return kind
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    options = prop.get("anyOf") or prop.get("oneOf")
    if isinstance(options, list):
        return " | ".join(type_name(option) for option in options)
    if isinstance(prop.get("$ref"), str):
        return str(prop["$ref"]).rsplit("/", 1)[-1]
    return "any"


_SENTENCE_END = re.compile(r"(?<![ei]\.[eg]\.)(?<=[.!?])\s")  # "e.g." and "i.e." end no sentence


def first_sentence(description: str) -> str:
    """The description's first sentence, whole even where the docstring breaks the line."""
    paragraph = " ".join(description.strip().split("\n\n", 1)[0].split())
    return _SENTENCE_END.split(paragraph, maxsplit=1)[0]
