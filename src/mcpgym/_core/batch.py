"""`mcpgym/steps`: one request that steps many episodes, beside the control plane's methods.

Layer: protocol vocabulary only (as `_core.protocol`), imported by the server's handler and the
client's session door. A vector env whose slots share one connection sends its whole batch of
tool calls as one request instead of one `tools/call` per slot (rfcs/0019-doors.md):

- params `{"steps": [{"episode", "name", "arguments"}, ...]}`: each entry is exactly what a
  `tools/call` naming `episode` in `_meta` would carry; at most `MAX_STEPS` of them.
- result `{"results": [{"result": CallToolResult} | {"error": ErrorData}, ...]}`, one per entry,
  in order. A `result` carries its own step stamp in `_meta` (rfcs/0001), as `tools/call` would;
  an `error` is the protocol error that `tools/call` would have raised for that entry alone (an
  unknown or malformed episode, an unknown tool with its counted step in `data`), so each slot's
  errors are its own and never fail the batch.
- A server that lacks the method answers METHOD_NOT_FOUND (it is listed in the Gym extension's
  `methods` setting when present), and the client steps the slots one request each.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field

STEPS_METHOD: Final = "mcpgym/steps"
MAX_STEPS: Final = 4096
"""Entries one request may carry (a vector env is rarely wider; the body limit also applies)."""


class BatchStep(BaseModel):
    model_config = ConfigDict(frozen=True)

    episode: str
    name: str
    arguments: dict[str, Any] | None = None


class StepsParams(types.RequestParams):
    steps: list[BatchStep] = Field(max_length=MAX_STEPS)


class BatchOutcome(BaseModel):
    """One entry's answer: its result, or its own error."""

    result: types.CallToolResult | None = None
    error: types.ErrorData | None = None


class StepsResult(types.Result):
    results: list[BatchOutcome]


class StepsRequest(types.Request[StepsParams, Literal["mcpgym/steps"]]):
    method: Literal["mcpgym/steps"] = "mcpgym/steps"
    params: StepsParams
