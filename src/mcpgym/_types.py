"""Public value types of the Gym-facing API: actions, step results, episode state.

Layer: plain data, frozen pydantic models (they cross the wire or are handed to users).
Imports nothing else from mcpgym.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field, JsonValue

JSONValue = JsonValue
"""Anything JSON can carry: what `reset()` observations and tool arguments are made of."""

ObsT = TypeVar("ObsT")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CallToolAction(_Frozen):
    """Call one of the environment's tools: the action space of an mcpgym environment."""

    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ListToolsAction(_Frozen):
    """Ask for the environment's tools (the same list an MCP client sees in `tools/list`)."""


Action = CallToolAction | ListToolsAction


class StepResult(_Frozen, Generic[ObsT]):
    """What `reset()` and `step()` return.

    `observation` is the environment's first observation after `reset()`, the MCP
    `CallToolResult` after a `CallToolAction`, and the list of `Tool`s after a
    `ListToolsAction`. `reward` is what this step earned; `done` ends the episode
    (`truncated` says it ended on a step limit rather than on the task's own terms).
    """

    observation: ObsT
    reward: float = 0.0
    done: bool = False
    truncated: bool = False
    info: dict[str, Any] = Field(default_factory=dict)

    @property
    def is_error(self) -> bool:
        """True when the tool call failed (the result the agent sees has `isError`)."""
        return isinstance(self.observation, types.CallToolResult) and bool(self.observation.is_error)

    @property
    def text(self) -> str:
        """The text content of a tool result, joined by newlines (empty for other observations)."""
        if not isinstance(self.observation, types.CallToolResult):
            return ""
        return "\n".join(c.text for c in self.observation.content if isinstance(c, types.TextContent))


class EpisodeState(_Frozen):
    """A snapshot of one episode, as `env.state()` returns it."""

    episode_id: str
    environment: str
    step_count: int = 0
    total_reward: float = 0.0
    done: bool = False
    truncated: bool = False
    seed: int | None = None
    info: dict[str, Any] = Field(default_factory=dict)
    """What the environment's `state_info()` reports (e.g. which sandbox protections are active)."""
