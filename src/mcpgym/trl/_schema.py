"""MCP `inputSchema` -> Python signature, type hints and Google docstring.

Layer: pure functions over `mcp_types.Tool`; imports nothing else from mcpgym.

TRL shows the model each environment method through transformers' `get_json_schema`, which
rebuilds a JSON Schema from the method's signature, type hints and docstring. What a hint can
say exactly goes in the hint: basic types, scalar enums, arrays, string-keyed maps, unions,
nullability, required-ness. Everything else (bounds, patterns, defaults, nested object shapes,
`$ref`s, inlined here) is appended as compact JSON to the argument's docstring line, so the
model still reads everything the MCP catalog says. Titles are dropped: pydantic derives them
from the names, so they only repeat what the model already sees.
"""

from __future__ import annotations

import inspect
import json
import keyword
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args

import mcp_types as types

_BASIC: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None)}
_CONTAINER: dict[str, Any] = {"array": list, "object": dict}
_SCALAR_TYPE: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
_SHOWN_AS_TEXT = frozenset({"title", "description"})
_ONE = ("items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else")
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
_NAMED = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
# transformers cuts a docstring at the first of these anywhere, even inside a word ("buildArgs:"),
# and reads a trailing "(choices: [...])" on an argument line as an enum: rewrite them where they
# are text, and escape their colon where they are JSON (`\u003a`: still valid JSON, same value).
_SECTION = re.compile(r"(Args|Returns|Raises):")
_CHOICES = re.compile(r"\(choices:", re.IGNORECASE)
_STRUCTURE = re.compile(r"(Args|Returns|Raises|\((?i:choices)):")
# Top-level keywords the parameters express (or that only say what dialect the schema is in).
_SHOWN_AT_TOP = frozenset({"type", "properties", "required", "title", "description", "$schema"})


@dataclass(frozen=True)
class Param:
    """One argument: `name` is what the model sees and writes, `wire` the inputSchema key."""

    name: str
    wire: str
    hint: Any
    required: bool
    doc: str
    lost: Mapping[str, Any]
    """The keywords of the property schema that `hint` cannot express (also in `doc`)."""


@dataclass(frozen=True)
class ToolShape:
    """A tool as a Python method: name, description, parameters."""

    name: str
    description: str
    params: tuple[Param, ...]

    def signature(self) -> inspect.Signature:
        # Keyword-only, so required and optional parameters may come in schema order.
        params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        for p in self.params:
            default = inspect.Parameter.empty if p.required else None
            params.append(inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=p.hint))
        return inspect.Signature(params)

    def annotations(self) -> dict[str, Any]:
        return {p.name: p.hint for p in self.params}

    def docstring(self) -> str:
        if not self.params:
            return self.description
        lines = "\n".join(f"    {p.name}: {p.doc}" for p in self.params)
        return f"{self.description}\n\nArgs:\n{lines}"

    def wire_names(self) -> dict[str, str]:
        return {p.name: p.wire for p in self.params}


def tool_shape(tool: types.Tool) -> ToolShape:
    """The Python view of an MCP tool (see the module docstring for what goes where)."""
    schema = normalise(tool.input_schema)
    properties: dict[str, Any] = schema.get("properties") or {}
    raw: dict[str, Any] = tool.input_schema.get("properties") or {}
    required = set(schema.get("required") or ())
    taken: set[str] = {"self"}
    params = []
    for wire, prop in properties.items():
        name = unique(python_name(wire), taken)
        hint, lost = translate(prop)
        text = _one_line(_text_of(prop, raw.get(wire), wire))
        doc = f"{text} {compact(lost)}" if lost else text
        params.append(Param(name, wire, hint, wire in required, _CHOICES.sub("(choices -", doc), lost))
    description = _SECTION.sub(r"\1 -", (tool.description or tool.title or tool.name).strip())
    # Top-level anyOf/oneOf/allOf/additionalProperties... have no parameter to carry them: without
    # this, a tool taking "a path or a url" or a free-form map would look argument-less.
    top = {k: v for k, v in schema.items() if k not in _SHOWN_AT_TOP}
    if top.get("additionalProperties") is False:
        del top["additionalProperties"]  # keyword parameters are a closed set already
    return ToolShape(tool.name, f"{description} {compact(top)}" if top else description, tuple(params))


def translate(schema: Any) -> tuple[Any, dict[str, Any]]:
    """A type hint for a normalised schema, and the keywords the hint cannot express."""
    if not isinstance(schema, dict):
        return Any, {}  # the boolean schemas `true` / `false`
    hint, kept = _hint(schema)
    return hint, {k: v for k, v in schema.items() if k not in kept and k not in _SHOWN_AS_TEXT}


def _hint(schema: dict[str, Any]) -> tuple[Any, set[str]]:
    kind = schema.get("type")
    if "enum" in schema:
        return _enum(schema["enum"], kind)
    if "const" in schema:
        hint, _ = _enum([schema["const"]], kind)
        return hint, set()
    for key in ("anyOf", "oneOf"):
        if key in schema and isinstance(schema[key], list):
            hint, exact = _union(schema[key])
            return hint, {key} if exact and key == "anyOf" and kind is None else set()
    if isinstance(kind, list):
        if all(k in _BASIC or k in _CONTAINER for k in kind):
            return _union_of([_BASIC.get(k) or _CONTAINER[k] for k in kind]), {"type"}
        return Any, set()
    if kind in _BASIC:
        return _BASIC[kind], {"type"}
    if kind == "array":
        return _array(schema)
    if kind == "object":
        return _object(schema)
    return (dict if "properties" in schema else Any), set()


def _enum(values: Any, kind: Any) -> tuple[Any, set[str]]:
    if not isinstance(values, list) or not values or any(type(v) not in _SCALAR_TYPE for v in values):
        return Any, set()
    hint = Literal[tuple(values)]  # type: ignore[valid-type]
    if list(get_args(hint)) != values:  # Literal dropped a duplicate: the enum is not shown verbatim
        return hint, set()
    shown = list(dict.fromkeys(_SCALAR_TYPE[type(v)] for v in values))
    return hint, {"enum", "type"} if kind in (shown[0] if len(shown) == 1 else shown, None) else {"enum"}


def _union(members: list[Any]) -> tuple[Any, bool]:
    translated = [translate(m) for m in members]
    hints = [hint for hint, _ in translated]
    union = _union_of(hints)
    distinct = len(set(map(repr, hints))) == len(hints)
    return union, distinct and union is not Any and not any(lost for _, lost in translated)


def _union_of(hints: list[Any]) -> Any:
    if not hints or Any in hints:
        return Any
    return hints[0] if len(hints) == 1 else Union[tuple(hints)]  # noqa: UP007 (built at run time)


def _array(schema: dict[str, Any]) -> tuple[Any, set[str]]:
    items = schema.get("items")
    if not isinstance(items, dict):
        return list, {"type"}
    hint, lost = translate(items)
    return list[hint], {"type"} if lost else {"type", "items"}  # type: ignore[valid-type]


def _object(schema: dict[str, Any]) -> tuple[Any, set[str]]:
    values = schema.get("additionalProperties")
    if "properties" in schema or not isinstance(values, dict):
        return dict, {"type"}
    hint, lost = translate(values)
    return dict[str, hint], {"type"} if lost else {"type", "additionalProperties"}  # type: ignore[valid-type]


def normalise(schema: Mapping[str, Any]) -> dict[str, Any]:
    """`schema` with local `$ref`s inlined (a recursive one is left as is) and titles dropped."""
    root = dict(schema)
    out = _walk(root, root, ())
    out.pop("$defs", None)
    out.pop("definitions", None)
    return out  # type: ignore[no-any-return]


def _walk(schema: Any, root: dict[str, Any], seen: tuple[str, ...]) -> Any:
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#") and ref not in seen:
        target = _resolve(root, ref)
        if isinstance(target, dict):
            merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
            return _walk(merged, root, (*seen, ref))
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title":
            continue
        if key in _ONE:
            out[key] = _walk(value, root, seen)
        elif key in _MANY and isinstance(value, list):
            out[key] = [_walk(v, root, seen) for v in value]
        elif key in _NAMED and isinstance(value, dict):
            out[key] = {k: _walk(v, root, seen) for k, v in value.items()}
        else:
            out[key] = value
    return out


def _resolve(root: dict[str, Any], ref: str) -> Any:
    node: Any = root
    for part in ref[2:].split("/") if ref.startswith("#/") else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def python_name(wire: str) -> str:
    """A parameter name for a schema property: the wire name when Python accepts it."""
    name = re.sub(r"\W", "_", wire) or "arg"
    if name[0].isdigit():
        name = f"_{name}"
    return f"{name}_" if keyword.iskeyword(name) or name == "self" else name


def unique(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def compact(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=False)
    return _STRUCTURE.sub(lambda m: m[1] + "\\u003a", text)


def _text_of(prop: Any, raw: Any, wire: str) -> str:
    """The property's description, else its title (titles survive only here), else its name."""
    for schema, key in ((prop, "description"), (raw, "title")):
        if isinstance(schema, dict) and isinstance(schema.get(key), str) and schema[key].strip():
            return str(schema[key])
    return wire


def _one_line(text: str) -> str:
    # An argument line must stay one line: transformers splits the Args block on "name:" lines.
    return _SECTION.sub(r"\1 -", " ".join(text.split()))
