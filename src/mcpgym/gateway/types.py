"""The gateway's records: one model call (`Call`) and an episode's merged token sequence (`TokenSequence`).

Layer: plain data (pydantic, frozen: written to JSONL and handed to trainers); imports nothing
else from mcpgym. The harness imports `TokenSequence` for `Trajectory.tokens`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class Choice(_Frozen):
    """One choice of a completion: what the model generated, as the engine reported it."""

    index: int = 0
    completion_token_ids: list[int] | None = None
    logprobs: list[float | None] | None = None
    """The sampled token's logprob at each position (the engine's, so `None` where it had none)."""
    finish_reason: str | None = None
    message: dict[str, Any] = Field(default_factory=dict)


class Call(_Frozen):
    """One model request through the gateway, as appended to `DIR/<episode>.jsonl` when it finished."""

    episode_id: str | None = None
    turn: int = 0
    """The call's position among its episode's calls (0-based; retries and failures count)."""
    id: str = ""
    time: float = 0.0
    latency: float = 0.0
    """Seconds from the client's request to the gateway's reply."""
    route: str = "chat"
    """`chat` (`/v1/chat/completions`) or `messages` (Anthropic `/v1/messages`, translated)."""
    stream: bool = False
    model: str | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)
    """The request's messages, in chat-completions form (what the engine rendered)."""
    tools: list[dict[str, Any]] | None = None
    sampling: dict[str, Any] = Field(default_factory=dict)
    """Every other request field the client sent (temperature, max_tokens, n, stop, ...)."""
    prompt_token_ids: list[int] | None = None
    """The whole prompt, as the engine tokenised it (in the file, often `prompt_from` + `prompt_tail`: `record`)."""
    choices: list[Choice] = Field(default_factory=list)
    usage: dict[str, Any] | None = None
    status: int = 200
    """The HTTP status the client got."""
    error: str | None = None
    request_hash: str = ""
    retry_of: int | None = None
    """The turn this call repeats byte for byte (a client retry); the merge keeps the last of them."""


class TokenSequence(_Frozen):
    """One branch of an episode's calls merged into the tokens the model saw and produced.

    `token_ids[i]` came from the model when `mask[i]` is 1 (its logprob is `logprobs[i]`) and
    from the prompt otherwise (system, user and tool text, the template's markup: mask 0,
    logprob None). The first `prompt_length` tokens are the first call's prompt. A branch ends
    where a later prompt stops extending it (context compaction, a template that re-renders
    history differently from what the model produced); the next branch starts from that prompt
    and says where it `diverged_at` (tokens shared with its `parent`).
    """

    episode_id: str | None = None
    branch: int = 0
    parent: int | None = None
    diverged_at: int | None = None
    reason: str = "start"
    turns: list[int] = Field(default_factory=list)
    """The calls merged into this branch, by turn."""
    prompt_length: int = 0
    token_ids: list[int] = Field(default_factory=list)
    mask: list[int] = Field(default_factory=list)
    logprobs: list[float | None] = Field(default_factory=list)

    @property
    def completion(self) -> tuple[list[int], list[int], list[float | None]]:
        """Everything after the first prompt: (token ids, mask, logprobs), as a trainer's completion."""
        at = self.prompt_length
        return self.token_ids[at:], self.mask[at:], self.logprobs[at:]
