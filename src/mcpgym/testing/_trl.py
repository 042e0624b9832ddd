"""The TRL schema round trip: what the model is shown for a generated tool method, plus the JSON
in its docstring, is the tool's MCP `inputSchema`.

Layer: testing tools over `mcpgym.trl`. The oracle is transformers' `get_json_schema` (what
TRL renders into the chat template), so this needs the `mcpgym[trl]` extra; torch is not
imported.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import mcp_types as types

from mcpgym._core.extras import needs
from mcpgym._episode.environment import Environment


def get_json_schema(method: Callable[..., Any]) -> dict[str, Any]:
    """transformers' rendering of `method` as a tool (what the model sees)."""
    with needs("trl", "the TRL round trip (transformers)"):
        from transformers.utils.chat_template_utils import get_json_schema as render
    return render(method)


def assert_trl_round_trip(env: type[Environment]) -> None:
    """Check every tool of `env` survives `mcpgym.trl.environment_class` without losing schema."""
    import mcpgym.trl

    cls = mcpgym.trl.environment_class(env)
    methods = {m.__name__: m for _, m in inspect.getmembers(cls, inspect.isfunction)}
    tools = [spec.definition for spec in env.__mcpgym_tools__.values()]
    if not tools:
        raise AssertionError(f"{env.__name__} has no tools to round-trip")
    for tool in tools:
        assert_tool_round_trip(tool, methods[tool.name])


def assert_tool_round_trip(tool: types.Tool, method: Callable[..., Any]) -> None:
    """One tool: name, description, parameters, required set and each property's schema agree."""
    from mcpgym.trl._schema import normalise, tool_shape

    shown = get_json_schema(method)["function"]
    shape = tool_shape(tool)
    assert shown["name"] == tool.name
    assert " ".join(shown["description"].split()) == " ".join(shape.description.split())
    wire = shape.wire_names()
    schema = normalise(tool.input_schema)
    properties = schema.get("properties", {})
    parameters = shown["parameters"]
    assert {wire[p] for p in parameters["properties"]} == set(properties)
    assert {wire[p] for p in parameters.get("required", [])} == set(schema.get("required", []))
    for name, seen in parameters["properties"].items():
        seen = dict(seen)
        extras = _docstring_json(seen.pop("description"))
        if {"anyOf", "oneOf", "allOf"} & extras.keys():  # a lossy union: the docstring holds all of it
            seen = {k: v for k, v in seen.items() if k not in ("type", "nullable", "anyOf", "enum", "items")}
        merged = {**seen, **extras}
        expected = {k: v for k, v in properties[wire[name]].items() if k != "description"}
        assert alternatives(merged) == alternatives(expected), (tool.name, name, seen, extras, expected)


def alternatives(schema: Any) -> frozenset[str]:
    """A schema as a set of canonical alternatives, so `nullable`, type lists and anyOf compare.

    Sibling keywords (a `default` beside an `anyOf`, say) are distributed over the alternatives.
    """
    if not isinstance(schema, dict):
        return frozenset({json.dumps(schema)})
    s = {k: v for k, v in schema.items() if k not in ("title", "description")}
    nullable = s.pop("nullable", False)
    if "const" in s:
        s["enum"] = [s.pop("const")]
    if "enum" in s:
        s.pop("type", None)  # implied by the values
    members = s.pop("anyOf", None)
    for key in ("items", "additionalProperties"):
        if isinstance(s.get(key), dict):
            s[key] = sorted(alternatives(s[key]))
    if isinstance(s.get("properties"), dict):
        s["properties"] = {k: sorted(alternatives(v)) for k, v in s["properties"].items()}
    kinds = s.pop("type", None)
    if members is not None:
        alts = [{**json.loads(a), **s} for m in members for a in alternatives(m)]
    else:
        alts = [{**s, "type": k} if k else dict(s) for k in (kinds if isinstance(kinds, list) else [kinds])]
    if nullable:
        alts.append({"type": "null"})
    # Keywords of other types do not constrain null: keep only `default` on the null branch.
    alts = [_null_branch({**s, **a}) if a.get("type") == "null" else a for a in alts]
    return frozenset(json.dumps(a, sort_keys=True) for a in alts)


def _null_branch(alternative: dict[str, Any]) -> dict[str, Any]:
    default = {"default": alternative["default"]} if "default" in alternative else {}
    return {"type": "null", **default}


def _docstring_json(description: str) -> dict[str, Any]:
    for i, ch in enumerate(description):
        if ch == "{":
            try:
                value = json.loads(description[i:])
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value
    return {}
