"""Gymnasium spaces as MCP tool schemas, and values across the boundary both ways.

Layer: plain conversion, no episode or transport. A space becomes a type annotation the MCP
SDK turns into the tool's input schema (so validation is the SDK's own, as for any tool):

    Discrete(n, start)       int, start <= a <= start + n - 1 (action names in the description)
    MultiDiscrete(nvec)      nested lists of int, one per entry, each in [start, start + nvec)
    MultiBinary(n)           nested lists of 0 / 1
    Box(low, high, shape)    nested lists of float (int for an integer dtype), shape fixed
    Dict({k: space})         an object with one required property per key
    Tuple((space, ...))      a fixed-length array, one item per space
    Text(min, max)           str

Bounds that differ per entry cannot be said per item in the annotation; `to_action` checks
them with `space.contains` and refuses what the space would not contain. Observations go the
other way as JSON (`to_json`): arrays as nested lists, numpy scalars as Python numbers (a
float32 widens to float exactly, so JSON carries Gymnasium's values unchanged).
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

import numpy as np
import pydantic
from gymnasium import spaces
from pydantic import Field


def annotation(space: spaces.Space[Any], names: dict[int, str] | None = None) -> Any:
    """The type annotation whose JSON Schema is `space`'s (see the module docstring)."""
    if isinstance(space, spaces.Discrete):
        return _discrete(space, names or {})
    if isinstance(space, spaces.MultiDiscrete):
        low, high = int(space.start.min()), int((space.start + space.nvec).max()) - 1
        return _nested(Annotated[int, Field(ge=low, le=high)], space.shape)
    if isinstance(space, spaces.MultiBinary):
        return _nested(Annotated[int, Field(ge=0, le=1)], space.shape)
    if isinstance(space, spaces.Box):
        return _nested(_box_item(space), space.shape)
    if isinstance(space, spaces.Dict):
        fields: dict[str, Any] = {key: (annotation(sub), ...) for key, sub in space.spaces.items()}
        return pydantic.create_model("DictAction", __config__=pydantic.ConfigDict(extra="forbid"), **fields)
    if isinstance(space, spaces.Tuple):
        return tuple[tuple(annotation(sub) for sub in space.spaces)]  # type: ignore[misc]
    if isinstance(space, spaces.Text):
        return Annotated[str, Field(min_length=space.min_length, max_length=space.max_length)]
    raise TypeError(f"mcpgym cannot state {type(space).__name__} as a tool schema yet: {space}")


def _discrete(space: spaces.Discrete, names: dict[int, str]) -> Any:
    low = int(space.start)
    high = low + int(space.n) - 1
    described = ", ".join(f"{i}: {names[i]}" for i in range(low, high + 1) if i in names)
    description = f"an integer from {low} to {high}" + (f" ({described})" if described else "")
    return Annotated[int, Field(ge=low, le=high, description=description)]


def _box_item(space: spaces.Box) -> Any:
    kind: type = int if np.issubdtype(space.dtype, np.integer) else float
    bounds: dict[str, Any] = {}
    low, high = float(space.low.min()), float(space.high.max())
    # One bound for every entry is stated in the schema; per-entry bounds are checked by contains().
    if math.isfinite(low) and bool((space.low == space.low.flat[0]).all()):
        bounds["ge"] = kind(low)
    if math.isfinite(high) and bool((space.high == space.high.flat[0]).all()):
        bounds["le"] = kind(high)
    return Annotated[kind, Field(**bounds)] if bounds else kind


def _nested(item: Any, shape: tuple[int, ...]) -> Any:
    if not shape:
        return item
    inner = _nested(item, shape[1:])
    return Annotated[list[inner], Field(min_length=shape[0], max_length=shape[0])]  # type: ignore[valid-type]


def to_action(space: spaces.Space[Any], value: Any) -> Any:
    """A validated tool argument as the action `space.contains` (and so the environment) takes."""
    action = _convert(space, value)
    if not space.contains(action):
        raise ValueError(f"{to_json(action)} is not in the action space {space}")
    return action


def _convert(space: spaces.Space[Any], value: Any) -> Any:
    if isinstance(space, spaces.Discrete):
        return np.int64(value)
    if isinstance(space, spaces.MultiDiscrete | spaces.MultiBinary | spaces.Box):
        return np.asarray(value, dtype=space.dtype)
    if isinstance(space, spaces.Dict):
        items = value.__dict__ if isinstance(value, pydantic.BaseModel) else value
        return {key: _convert(sub, items[key]) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_convert(sub, item) for sub, item in zip(space.spaces, value, strict=True))
    return value


def to_json(value: Any) -> Any:
    """`value` (an observation, an info dict) as JSON-compatible Python values."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(key): to_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(item) for item in value]
    return value


_NAMED_ACTION = re.compile(r"^\s*(?:[-*]\s*(\d+)\s*:\s*(.+?)|\|\s*(\d+)\s*\|\s*([^|]+?)\s*\|.*)\s*$")


def action_names(doc: str | None, space: spaces.Space[Any]) -> dict[int, str]:
    """The names a Gymnasium environment's docstring gives its discrete actions, under its
    "## Action Space" heading (`- 0: Move left`, or a `| 0 | Push left |` table); {} when
    they do not name every action of `space` exactly once."""
    if not isinstance(space, spaces.Discrete) or not doc:
        return {}
    section = doc.partition("## Action Space")[2].split("\n#", 1)[0]
    names: dict[int, str] = {}
    for line in section.splitlines():
        match = _NAMED_ACTION.match(line)
        if match:
            number = int(match.group(1) or match.group(3))
            names[number] = (match.group(2) or match.group(4)).strip().rstrip(".")
    start = int(space.start)
    return names if sorted(names) == list(range(start, start + int(space.n))) else {}
