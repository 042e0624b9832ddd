"""Public value types of the Gym-facing API: actions, step results, episode state.

Layer: plain data, frozen pydantic models (they cross the wire or are handed to users).
Imports nothing else from mcpgym.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Generic, TypeVar

import mcp_types as types
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, JsonValue

JSONValue = JsonValue
"""Anything JSON can carry: what `reset()` observations and tool arguments are made of."""

ObsT = TypeVar("ObsT")
ModelT = TypeVar("ModelT", bound=BaseModel)


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


# The slots every BaseModel instance carries, set through their descriptors (what
# `model_construct` does, minus its per-field Python loop).
_new = object.__new__
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def trusted(cls: type[ModelT], values: dict[str, Any], fields_set: set[str]) -> ModelT:
    """The instance of `cls` that validating `values` would build, built without validating.

    Only for values the caller knows are already valid, of a model with no private attributes
    and no `extra="allow"` (that is, hot-path objects built from our own data). `values` holds
    every field by its Python name, exactly as the validated instance's `__dict__` would;
    `fields_set` is what `model_fields_set` would be. The result is a real `cls` instance,
    equal to the validated one (`==`, `model_dump`, fields set), and a frozen model stays
    frozen; tests/test_fastpath.py pins this for each use. It costs about a fifth of
    validation, which matters on the in-process step (rfcs/0002-in-process-mode.md).
    """
    obj = _new(cls)
    _set_dict(obj, values)
    _set_fields_set(obj, fields_set)
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj


ToolStep = StepResult[types.CallToolResult]
"""What a tool call's step returns."""


def tool_step(
    result: types.CallToolResult,
    reward: float,
    done: bool,
    truncated: bool,
    step: int,
    components: Components | None = None,
) -> ToolStep:
    """A tool call's `StepResult`, from exactly typed values (a `float` reward, `bool` flags, the
    episode's step number): `trusted`, spelled out, since every step of every door builds one.
    `terminated` is `done and not truncated`: the core never sets both."""
    obj = _new(ToolStep)
    _set_dict(
        obj,
        {
            "observation": result,
            "reward": reward,
            "done": done,
            "truncated": truncated,
            "info": {"step": step},
            "terminated": done and not truncated,
            "components": {} if components is None else components,
        },
    )
    _set_fields_set(obj, _TOOL_STEP_FIELDS)
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj


_TOOL_STEP_FIELDS = {"observation", "reward", "done", "truncated", "info", "terminated", "components"}


UNKNOWN_TOOL_INFO = "unknown_tool"
"""The `StepResult.info` key (value True) that marks the step of a call to a tool the
environment does not have (rfcs/0001: what an RL loop sees when a policy invents a name)."""


def unknown_tool_step(
    message: str, done: bool, truncated: bool, step: int, reward: float = 0.0, components: Components | None = None
) -> ToolStep:
    """The `is_error` step of a call to an unknown tool, identical on every door (its reward is
    0 unless a rubric scores such steps)."""
    result = types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)
    outcome = tool_step(result, reward, done, truncated, step, components)
    outcome.info[UNKNOWN_TOOL_INFO] = True
    return outcome
