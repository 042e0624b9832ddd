"""Public value types of the Gym-facing API: actions, step results, episode state.

Layer: plain data, frozen pydantic models (they cross the wire or are handed to users).
Imports only the core's hot-path module (`trusted`, which builds each `ToolStep`).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Generic, TypeVar

import mcp_types as types
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, JsonValue

from mcpgym._core.fastpath import trusted

JSONValue = JsonValue
"""Anything JSON can carry: what `reset()` observations and tool arguments are made of."""

ObsT = TypeVar("ObsT")


def _none_is_nan(value: Any) -> Any:
    return math.nan if value is None else value


Score = Annotated[float, BeforeValidator(_none_is_nan)]
"""A reward: NaN means unscored (a judge or rubric that failed; never 0). JSON has no NaN, so
it travels as null, and null reads back as NaN."""

Components = dict[str, float | None]
"""Named reward components (rfcs/0007-rewards.md); None: a component that could not score."""


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
    `ListToolsAction`. `reward` is what this step earned (NaN: unscored). As in Gymnasium,
    `terminated` says the episode ended on the task's own terms (a value bootstrap should stop
    here) and `truncated` that it was cut short (a step limit, a stranded tool: bootstrap from
    the last state); `done` is their OR. `components` names the parts of `reward` when the
    environment has a rubric (rfcs/0007-rewards.md), trajectory components on the last step.
    """

    observation: ObsT
    reward: Score = 0.0
    done: bool = False
    truncated: bool = False
    info: dict[str, Any] = Field(default_factory=dict)
    terminated: bool = False
    components: Components = Field(default_factory=dict)

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


class Rendering(_Frozen):
    """What `Environment.render()` showed of an episode's current state (`EpisodeState.render`):
    any of plain text, markdown and an image (base64, with its MIME type)."""

    text: str | None = None
    markdown: str | None = None
    image: str | None = None
    mime_type: str | None = None


class EpisodeState(_Frozen):
    """A snapshot of one episode, as `env.state()` returns it."""

    episode_id: str
    environment: str
    step_count: int = 0
    total_reward: Score = 0.0
    """The episode's return so far (with a rubric: including its trajectory score once scored)."""
    done: bool = False
    truncated: bool = False
    seed: int | None = None
    info: dict[str, Any] = Field(default_factory=dict)
    """What the environment's `state_info()` reports (e.g. which sandbox protections are active)."""
    terminated: bool = False
    components: Components = Field(default_factory=dict)
    """The episode's sum of each rubric component so far (trajectory components once scored)."""
    render: Rendering | None = None
    """The environment's `render()` of its current state, if it offers one (for people: the web
    page, `mcpgym play`); never shown to agents."""


ToolStep = StepResult[types.CallToolResult]
"""What a tool call's step returns."""


UNKNOWN_TOOL_INFO = "unknown_tool"
"""The `StepResult.info` key (value True) that marks the step of a call to a tool the
environment does not have (rfcs/0001: what an RL loop sees when a policy invents a name)."""


def tool_step(
    result: types.CallToolResult,
    reward: float,
    done: bool,
    truncated: bool,
    step: int,
    components: Components | None = None,
    *,
    unknown: bool = False,
) -> ToolStep:
    """A tool call's `StepResult`, from exactly typed values (a `float` reward, `bool` flags, the
    episode's step number), built `trusted` since every step of every door builds one.
    `terminated` is `done and not truncated`: the core never sets both. `unknown`: the step of
    a call to a tool the environment lacks (`info[UNKNOWN_TOOL_INFO]`); the model is frozen, so
    what its `info` says is decided here, never written in afterwards."""
    values = {
        "observation": result,
        "reward": reward,
        "done": done,
        "truncated": truncated,
        "info": {"step": step, UNKNOWN_TOOL_INFO: True} if unknown else {"step": step},
        "terminated": done and not truncated,
        "components": {} if components is None else components,
    }
    return trusted(ToolStep, values, _TOOL_STEP_FIELDS)


_TOOL_STEP_FIELDS = {"observation", "reward", "done", "truncated", "info", "terminated", "components"}


def unknown_tool_step(
    message: str, done: bool, truncated: bool, step: int, reward: float = 0.0, components: Components | None = None
) -> ToolStep:
    """The `is_error` step of a call to an unknown tool, identical on every door (its reward is
    0 unless a rubric scores such steps)."""
    result = types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)
    return tool_step(result, reward, done, truncated, step, components, unknown=True)
