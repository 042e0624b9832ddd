"""`OpenAIPolicy`: a policy backed by any OpenAI-compatible chat-completions endpoint.

Layer: policy implementation (HTTP via httpx2, the mcp SDK's own client). Works with vLLM,
SGLang, llama.cpp's server, and hosted APIs: POST `{base_url}/chat/completions` with
`tools`, read `choices[0].message` and `usage`.

Transient failures (connection errors, 429, 5xx) are retried with `Backoff`; a read timeout
is not (see `EndpointTimeout`). Anything else raises `EndpointError`, which fails the episode.
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import Any, Self

import anyio
import httpx2

from harness.errors import EndpointError, EndpointTimeout
from harness.policy import tool_call
from harness.retry import Backoff, retry_after_seconds
from harness.types import AssistantTurn, Message, ToolCall, ToolSpec, Usage

API_KEY_ENV = "OPENAI_API_KEY"


class OpenAIPolicy:
    """Ask a chat-completions endpoint for the next turn. Use as `async with OpenAIPolicy(...) as policy:`.

    `base_url` includes the API prefix, as OpenAI clients expect (`http://127.0.0.1:8000/v1`).
    `api_key` defaults to `$OPENAI_API_KEY`; local servers usually need none. `extra_body`
    is merged into every request (e.g. `{"top_p": 0.9}` or vLLM's `chat_template_kwargs`).
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
    ) -> None:
        if not base_url.startswith(("http://", "https://")):  # else every request fails and is retried for ages
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.backoff = backoff if backoff is not None else Backoff()
        self.timeout = timeout
        self._body = {k: v for k, v in {"temperature": temperature, "max_tokens": max_tokens}.items() if v is not None}
        self._body.update(extra_body or {})
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        # Pool sized for many concurrent episodes; the rollout's concurrency is the real bound.
        self._client = httpx2.AsyncClient(
            headers=headers, timeout=timeout, limits=httpx2.Limits(max_connections=None, max_keepalive_connections=64)
        )

    async def __call__(self, messages: list[Message], tools: list[ToolSpec]) -> AssistantTurn:
        body = {"model": self.model, "messages": messages, **self._body}
        if tools:
            body["tools"] = tools
        return parse_completion(await self._post(body))

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        for retry in range(self.backoff.attempts):
            last = retry == self.backoff.attempts - 1
            try:
                response = await self._client.post(self.url, json=body)
            except httpx2.ReadTimeout:
                raise EndpointTimeout(
                    f"{self.url} sent no response within {self.timeout:g}s (raise the timeout)"
                ) from None
            except httpx2.TransportError as exc:  # connect errors, dropped connections: the server may come back
                if last:
                    raise EndpointError(f"cannot reach {self.url}: {exc!r} (is the model server running?)") from exc
                await anyio.sleep(self.backoff.delay(retry))
                continue
            if response.status_code == 429 or response.status_code >= 500:
                if last:
                    raise EndpointError(f"{self.url} kept failing: HTTP {response.status_code}: {_excerpt(response)}")
                await anyio.sleep(self.backoff.delay(retry, retry_after_seconds(response.headers.get("retry-after"))))
                continue
            if response.status_code != 200:
                status = response.status_code
                raise EndpointError(f"{self.url} refused the request: HTTP {status}: {_excerpt(response)}")
            return _json_object(response)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def aclose(self) -> None:
        await self._client.aclose()

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
        )
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:  # ValidationError is a ValueError
        reason = f"missing {exc}" if isinstance(exc, KeyError | IndexError) else _first_line(exc)
        raise EndpointError(f"not a chat completion ({reason}): {str(body)[:300]}") from None


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


def _json_object(response: httpx2.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        raise EndpointError(f"{response.url} answered with non-JSON: {_excerpt(response)}") from None
    if not isinstance(body, dict):
        raise EndpointError(f"{response.url} answered with JSON that is not an object: {_excerpt(response)}")
    return body


def _excerpt(response: httpx2.Response) -> str:
    return response.text[:300]
