"""OpenEnv's wire vocabulary (openenv 0.10), as mcpgym speaks it: its message and model shapes.

Layer: protocol vocabulary only (pydantic and the MCP types; nothing else from mcpgym but
`_core`). Both sides of the bridge use it: the server door (`_serve`) answers in these shapes,
the import side (`_remote`) reads them. The shapes are OpenEnv's, read from its server and
clients; the code is ours (rfcs/0017-bridges.md, "OpenEnv").

Over `/ws` a client sends `{"type": "reset"|"step"|"state"|"close"|"mcp", "data": ...}` and gets
`{"type": "observation"|"state"|"mcp"|"error", "data": ...}`. An observation payload is
`{"observation": {...}, "reward": float | None, "done": bool, "metadata"?: {...}}`; reward and
done live beside the observation, never in it.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field

from mcpgym._core.protocol import ResetResult, split_meta
from mcpgym._core.types import ToolStep

# The error codes of an OpenEnv `{"type": "error"}` frame.
INVALID_JSON = "INVALID_JSON"
UNKNOWN_TYPE = "UNKNOWN_TYPE"
VALIDATION_ERROR = "VALIDATION_ERROR"
EXECUTION_ERROR = "EXECUTION_ERROR"
CAPACITY_REACHED = "CAPACITY_REACHED"
SESSION_ERROR = "SESSION_ERROR"

SESSION_CREATE = "openenv/session/create"
SESSION_CLOSE = "openenv/session/close"

_OBSERVATION_FIELDS = frozenset({"done", "reward", "tools", "tool_name"})
"""Keys OpenEnv's clients read as their own: a reset observation holding one is nested, not spread
(a `metadata` object is merged with ours: an observation that came from OpenEnv goes back as it was)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CallToolAction(_Model):
    """Call one tool: OpenEnv's MCP action (the `action` schema of every mcpgym environment)."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="CallToolAction")

    type: Literal["call_tool"] = "call_tool"
    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)


class ListToolsAction(_Model):
    type: Literal["list_tools"] = "list_tools"
    metadata: dict[str, Any] = Field(default_factory=dict)


class ToolError(_Model):
    error_type: Literal["execution_error", "invalid_args", "transport_error", "tool_not_found", "timeout"]
    message: str


class CallToolObservation(_Model):
    """What a `call_tool` step observes (the `observation` schema of every mcpgym environment)."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="CallToolObservation")

    done: bool = False
    reward: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    tool_name: str
    result: Any = None
    """The MCP result: `content`, `structured_content`, `data` (its value), `is_error`, `meta`."""
    error: ToolError | None = None


class State(BaseModel):
    """`state`: OpenEnv's two fields, then mcpgym's `EpisodeState` fields beside them."""

    model_config = ConfigDict(extra="allow", title="State")

    episode_id: str | None = None
    step_count: int = Field(default=0, ge=0)


class ResetRequest(BaseModel):
    """The body of `POST /reset` and the `data` of a `reset` message: extra keys are reset options."""

    model_config = ConfigDict(extra="allow")

    seed: int | None = Field(default=None, ge=0)
    episode_id: str | None = Field(default=None, max_length=255)

    def options(self) -> dict[str, Any] | None:
        """The environment's reset options: every key but seed and episode_id (OpenEnv's own)."""
        return dict(self.model_extra) if self.model_extra else None


class StepRequest(BaseModel):
    """The body of `POST /step`."""

    model_config = ConfigDict(extra="allow")

    action: dict[str, Any]


def parse_action(data: dict[str, Any]) -> CallToolAction | ListToolsAction:
    """A `step`'s action: `{"type": "list_tools"}`, or a `call_tool` (its `type` may be left out)."""
    if data.get("type") == "list_tools":
        return ListToolsAction.model_validate(data)
    return CallToolAction.model_validate(data)


def tool_entry(tool: types.Tool) -> dict[str, Any]:
    """One `tools` entry: OpenEnv's `name`, `description`, `input_schema`."""
    return {"name": tool.name, "description": tool.description or "", "input_schema": tool.input_schema}


def reset_payload(result: ResetResult) -> dict[str, Any]:
    """The observation payload of a reset. A JSON-object observation spreads into OpenEnv's
    observation (its keys are the environment's fields); anything else sits under `observation`.
    `metadata.message` is the observation as text, what OpenEnv's echo example prints."""
    obs = result.observation
    fields: dict[str, Any]
    own: Any = obs.get("metadata") if isinstance(obs, dict) else None
    if isinstance(obs, dict) and not obs.keys() & _OBSERVATION_FIELDS and isinstance(own, dict | None):
        fields = dict(obs)
    else:
        fields, own = ({} if obs is None else {"observation": obs}), None
    metadata: dict[str, Any] = {"message": as_text(obs), **(own or {})}
    if result.info:
        metadata["info"] = result.info
    fields["metadata"] = metadata
    return {"observation": fields, "reward": None, "done": False, "metadata": metadata}


def step_payload(name: str, step: ToolStep, *, unknown: bool) -> dict[str, Any]:
    """The observation payload of a `call_tool` step: the result and OpenEnv's reward and done;
    the rest of mcpgym's step stamp (terminated, truncated, step, components) in `metadata`."""
    metadata: dict[str, Any] = {
        "terminated": step.terminated,
        "truncated": step.truncated,
        "step": step.info.get("step"),
    }
    if step.components:
        metadata["components"] = step.components
    error: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    if unknown:
        error = {"error_type": "tool_not_found", "message": step.text}
    else:
        result = result_payload(step.observation)
    observation = {"tool_name": name, "result": result, "error": error, "metadata": metadata}
    return {"observation": observation, "reward": score(step.reward), "done": step.done, "metadata": metadata}


def result_payload(result: types.CallToolResult) -> dict[str, Any]:
    """An MCP tool result in the shape OpenEnv's MCP environments return (FastMCP's result):
    `data` is the value itself, the structured result unwrapped, else the text."""
    structured = result.structured_content
    if isinstance(structured, dict) and structured.keys() == {"result"}:
        data: Any = structured["result"]  # the SDK wraps a non-object return value so
    elif structured is not None:
        data = structured
    else:
        texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
        data = "\n".join(texts) if texts else None
    _, own_meta = split_meta(result.meta)
    return {
        "content": [c.model_dump(mode="json", exclude_none=True) for c in result.content],
        "structured_content": structured,
        "data": data,
        "is_error": bool(result.is_error),
        "meta": own_meta,
    }


def score(value: float) -> float | None:
    """A reward on OpenEnv's wire: JSON has no NaN, and an unscored step is null."""
    return None if math.isnan(value) else value


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
