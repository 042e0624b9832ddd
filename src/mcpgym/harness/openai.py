"""`OpenAIPolicy`: a policy backed by any OpenAI-compatible chat-completions endpoint.

Layer: policy implementation (HTTP via httpx2, the mcp SDK's own client). Works with vLLM,
SGLang, llama.cpp's server, and hosted APIs: POST `{base_url}/chat/completions` with
`tools`, read `choices[0].message` and `usage`.

Transient failures (connection errors, 429, 5xx) are retried with `Backoff`; a read timeout
is not (see `EndpointTimeout`). Anything else raises `EndpointError`, which fails the episode.

Every request names the episode it is for (`Mcpgym-Episode`, from the rollout's context) and
asks a gateway for the token ids (`Mcpgym-Tokens: 1`); other servers ignore both headers. When
the reply carries vLLM's token fields (a gateway's, or vLLM's own with `tokens=True`), the turn
keeps them (`AssistantTurn.tokens`) and the trajectory merges them (`Trajectory.tokens`).
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import Any, Self

from mcpgym._core.chat import ChatEndpoint
from mcpgym._core.protocol import EPISODE_HEADER
from mcpgym.gateway import engine
from mcpgym.gateway.app import TOKENS_HEADER
from mcpgym.harness.errors import EndpointError, EndpointTimeout
from mcpgym.harness.policy import EPISODE, tool_call
from mcpgym.harness.retry import Backoff
from mcpgym.harness.types import AssistantTurn, ChatTool, Message, ToolCall, TurnTokens, Usage

API_KEY_ENV = "OPENAI_API_KEY"


class OpenAIPolicy:
    """Ask a chat-completions endpoint for the next turn. Use as `async with OpenAIPolicy(...) as policy:`.

    `base_url` includes the API prefix, as OpenAI clients expect (`http://127.0.0.1:8000/v1`).
    `api_key` defaults to `$OPENAI_API_KEY`; local servers usually need none. `extra_body`
    is merged into every request (e.g. `{"top_p": 0.9}` or vLLM's `chat_template_kwargs`).
    `tokens=True` asks the endpoint itself for token ids and logprobs in vLLM's fields (for a
    vLLM server reached directly; a gateway returns them without).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        timeout: float = 120.0,
        backoff: Backoff | None = None,
        extra_body: dict[str, Any] | None = None,
        tokens: bool = False,
    ) -> None:
        self.model = model
        self._body = {k: v for k, v in {"temperature": temperature, "max_tokens": max_tokens}.items() if v is not None}
        if tokens:
            self._body.update(engine.ask("vllm", self._body)[0])
        self._body.update(extra_body or {})
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        # The posting (retries, backoff, timeouts) is mcpgym's, shared with the LLM judge; our
        # error classes are raised, so the harness's hierarchy stands.
        self._endpoint = ChatEndpoint(
            base_url, api_key=key, timeout=timeout, backoff=backoff, errors=(EndpointError, EndpointTimeout)
        )
        self.url = self._endpoint.url
        self.backoff = self._endpoint.backoff
        self.timeout = timeout

    async def __call__(self, messages: list[Message], tools: list[ChatTool]) -> AssistantTurn:
        body: dict[str, Any] = {"model": self.model, "messages": messages, **self._body}
        if tools:
            body["tools"] = tools
        return parse_completion(await self._post(body))

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        headers = {TOKENS_HEADER: "1"}
        if (episode := EPISODE.get()) is not None:
            headers[EPISODE_HEADER] = episode
        return await self._endpoint.post(body, headers)

    async def aclose(self) -> None:
        await self._endpoint.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def parse_completion(body: dict[str, Any]) -> AssistantTurn:
    """`choices[0].message` and `usage` of a chat completion as an `AssistantTurn`. A reply that
    is not one raises `EndpointError`; a tool call without an id gets `call_{i}`."""
    try:
        choice = body["choices"][0]
        message = choice["message"]
        calls = [_tool_call(i, c) for i, c in enumerate(message.get("tool_calls") or [])]
        return AssistantTurn(
            content=_content(message.get("content")),
            tool_calls=calls,
            usage=_usage(body.get("usage")),
            finish_reason=choice.get("finish_reason"),
            tokens=_tokens(body),
        )
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:  # ValidationError is a ValueError
        reason = f"missing {exc}" if isinstance(exc, KeyError | IndexError) else _first_line(exc)
        raise EndpointError(f"not a chat completion ({reason}): {str(body)[:300]}") from None


def _tokens(body: dict[str, Any]) -> TurnTokens | None:
    prompt, choices = engine.prompt_ids(body), engine.choices(body)
    ids = choices[0]["completion_token_ids"] if choices else None
    if prompt is None or ids is None:
        return None
    return TurnTokens(prompt_token_ids=prompt, completion_token_ids=ids, logprobs=choices[0]["logprobs"])


def _tool_call(index: int, call: dict[str, Any]) -> ToolCall:
    function = call["function"]
    if not isinstance(function.get("name"), str):
        raise TypeError(f"tool call {index} has no function name")
    # Some servers omit the id; the tool message must still answer the call by one.
    return tool_call(call.get("id") or f"call_{index}", function["name"], function.get("arguments") or "")


def _content(content: Any) -> str | None:
    """Text, or the text parts of a list of content parts (some servers reply that way)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    raise TypeError(f"message content is a {type(content).__name__}")


def _usage(usage: Any) -> Usage:
    if not isinstance(usage, dict):
        return Usage()  # optional, and some servers send [] or null
    counts = {k: usage.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    return Usage(**{k: v if isinstance(v, int) and not isinstance(v, bool) else 0 for k, v in counts.items()})


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
