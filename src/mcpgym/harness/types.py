"""The harness's value types: what a policy returns and what a rollout records.

Layer: plain data. Frozen pydantic models (they are written to JSONL and handed to trainers);
imports nothing else from the harness.

A rollout produces one `Trajectory` per episode. Its `turns` are the model's replies, each
with the tool `steps` it caused; `messages` is the whole chat-completions conversation, ready
to be tokenised for training. A failed episode is still a `Trajectory` (`status="failed"`,
`error` says why), carrying every turn that completed before the failure.

Names: `Trajectory` is the policy's side of an episode; the server's own record of one is
`mcpgym.Recording`. `ChatTool` is one chat-completions `tools` entry (an MCP tool as the model
sees it), formerly `ToolSpec`; `CallOutcome` is one tool call's outcome, formerly `Step` (the
name a rubric's step has: `mcpgym.rubrics.Step`). The old names still import, with a
`DeprecationWarning`, until 0.2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from mcpgym._core.deprecated import deprecated_names as _deprecated_names
from mcpgym.gateway.types import TokenSequence

Message = dict[str, Any]
"""One chat-completions message (`{"role": ..., "content": ..., "tool_calls": ...}`)."""


class ChatFunction(TypedDict):
    """The `function` of a `ChatTool`: an MCP tool's name, description and `inputSchema`."""

    name: str
    description: str
    parameters: dict[str, Any]


class ChatTool(TypedDict):
    """One entry of the chat-completions `tools` list: `{"type": "function", "function": {...}}`.

    A plain dict at run time (a policy passes the list straight to its endpoint); the
    `TypedDict` only lets a type checker see the wire shape.
    """

    type: Literal["function"]
    function: ChatFunction


DEPRECATED: dict[str, tuple[str, str]] = {
    "ToolSpec": ("ChatTool", "one chat-completions tools entry"),
    "Step": ("CallOutcome", "one tool call's outcome; a rubric's step is mcpgym.rubrics.Step"),
}
"""Old names of this module's types (and `mcpgym.harness`'s), resolved with a warning until 0.2."""

StopReason = Literal["done", "truncated", "max_turns", "no_tool_calls", "error"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Usage(_Frozen):
    """Token counts as the endpoint reported them (`usage` of a chat completion)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
        )


class ToolCall(_Frozen):
    """A tool call the model asked for. `arguments` is None when `arguments_json` did not parse
    to a JSON object; the harness then answers the model with an error and does not step."""

    id: str
    name: str
    arguments_json: str
    arguments: dict[str, Any] | None = None


class TurnTokens(_Frozen):
    """The token ids of one model reply, as the endpoint reported them (vLLM's fields, which
    `mcpgym gateway` returns): its prompt, what it generated, and the sampled tokens' logprobs."""

    prompt_token_ids: list[int]
    completion_token_ids: list[int]
    logprobs: list[float | None] | None = None


class AssistantTurn(_Frozen):
    """What a policy returns: the model's reply to the conversation so far."""

    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Usage()
    finish_reason: str | None = None
    tokens: TurnTokens | None = Field(default=None, exclude=True, repr=False)
    """The reply's token ids, when the endpoint returned them; not written out per turn (the
    trajectory's `tokens` holds them merged)."""

    def message(self) -> Message:
        """This reply as the assistant message to append to the conversation."""
        message: Message = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json}}
                for c in self.tool_calls
            ]
        return message


class CallOutcome(_Frozen):
    """One tool call's outcome. `stepped` is False when the harness answered the call itself
    (unknown tool, malformed arguments, episode already over) without touching the environment.

    Formerly `harness.Step`, the name a rubric's step has (`mcpgym.rubrics.Step`)."""

    call_id: str
    tool: str
    arguments: dict[str, Any] | None
    output: str
    is_error: bool = False
    stepped: bool = True
    reward: float = 0.0
    done: bool = False
    truncated: bool = False
    terminated: bool = False
    components: dict[str, float | None] = Field(default_factory=dict)
    """The step's named reward components, when the environment has a rubric (rfcs/0007)."""
    images: list[str] = Field(default_factory=list, exclude=True, repr=False)
    """The result's images as `data:` URLs, shown to the model as image parts; not written out
    (`output` names each one by type, size and hash)."""


class Turn(_Frozen):
    """One model reply and the steps it caused."""

    assistant: AssistantTurn
    steps: list[CallOutcome] = Field(default_factory=list)

    @property
    def reward(self) -> float:
        return sum(s.reward for s in self.steps)


class Trajectory(_Frozen):
    """One episode of a rollout: the conversation, every turn, rewards, usage, and how it ended."""

    index: int
    """The episode's position in the rollout (0-based); seeds and options are drawn by it."""
    episode_id: str | None = None
    seed: int | None = None
    options: dict[str, Any] | None = None
    task_id: str | None = None
    """The catalog task played: the one given (`tasks=`), or the one the server says it drew."""
    observation: Any = None
    """What `reset()` returned (the task)."""
    status: Literal["ok", "failed"] = "ok"
    stop: StopReason = "error"
    error: str | None = None
    reward: float = 0.0
    """The episode's return: the sum of the rewards of every step, plus the trajectory score an
    environment's rubric gave an episode closed before it finished (NaN: unscored)."""
    done: bool = False
    truncated: bool = False
    terminated: bool = False
    components: dict[str, float | None] = Field(default_factory=dict)
    """The episode's sum of each rubric component (trajectory components once scored)."""
    turns: list[Turn] = Field(default_factory=list)
    messages: list[Message] = Field(default_factory=list)
    usage: Usage = Usage()
    started: float = 0.0
    duration: float = 0.0
    tokens: list[TokenSequence] = Field(default_factory=list)
    """The episode's model calls as token sequences with a loss mask (`mcpgym.gateway.merge`):
    one per branch, when every reply came with its token ids (the policy's calls went through
    `mcpgym gateway`, or an engine returning vLLM's token fields); empty otherwise."""

    @property
    def failed(self) -> bool:
        return self.status == "failed"


if TYPE_CHECKING:  # the deprecated names, typed; at run time `__getattr__` resolves them and warns
    ToolSpec = ChatTool
    Step = CallOutcome
else:
    __getattr__ = _deprecated_names(__name__, DEPRECATED)
