"""Posting to an OpenAI-compatible chat-completions endpoint: retries, backoff, timeouts.

Layer: bottom utility (httpx2, the MCP SDK's own HTTP client). Shared by the harness's
`OpenAIPolicy` (the model being trained or evaluated) and `mcpgym.rubrics.LLMJudge` (the model
that scores): one client, so both get the same retry and error behaviour. Imports nothing from
mcpgym; the harness imports it, never the other way round.

    EndpointError       the endpoint failed for good: a 4xx other than 429, a body that is
    │                   not a JSON object, or transient errors that outlived every retry
    └── EndpointTimeout no response within the timeout (not retried: a model that is slow now
                        is usually slow on a second try too)
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2


class EndpointError(Exception):
    """The chat-completions endpoint failed and retrying will not help."""


class EndpointTimeout(EndpointError):
    """The chat-completions endpoint did not answer within the timeout."""


@dataclass(frozen=True)
class Backoff:
    """Up to `attempts` tries; before try n+1 wait a random time in [delay/2, delay] where
    delay = min(cap, base * 2**n). Jitter spreads the retries of many concurrent episodes that
    failed together (an endpoint restart) instead of letting them stampede back in lockstep."""

    attempts: int = 6
    base: float = 0.5
    cap: float = 20.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"Backoff needs attempts >= 1 (the first try counts), got {self.attempts}")

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number `retry` (0-based). A server's Retry-After wins
        when it asks for longer, but never beyond the cap."""
        ceiling = min(self.cap, self.base * 2**retry)
        delay = random.uniform(ceiling / 2, ceiling)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.cap))
        return delay


def retry_after_seconds(value: str | None) -> float | None:
    """A Retry-After header given in seconds (the HTTP-date form is rare from model servers)."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


class ChatEndpoint:
    """POST chat-completion bodies to `{base_url}/chat/completions`, retrying transient failures
    (connection errors, 429, 5xx) with `backoff`. `errors` are the classes raised (a caller may
    pass subclasses of `EndpointError` / `EndpointTimeout` that fit its own error hierarchy).

    A refused connection before the endpoint ever answered fails at once: nothing listens
    there (a wrong URL, a server not started), which no retry mends. Once it has answered, a
    refusal is a restart and is retried like any other connection error."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        backoff: Backoff | None = None,
        errors: tuple[type[EndpointError], type[EndpointTimeout]] = (EndpointError, EndpointTimeout),
    ) -> None:
        if not base_url.startswith(("http://", "https://")):  # else every request fails and is retried for ages
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.timeout = timeout
        self.backoff = backoff if backoff is not None else Backoff()
        self._error, self._timeout = errors
        self._answered = False
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # Pool sized for many concurrent requests; the caller's concurrency is the real bound.
        self._client = httpx2.AsyncClient(
            headers=headers, timeout=timeout, limits=httpx2.Limits(max_connections=None, max_keepalive_connections=64)
        )

    async def post(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
        """The endpoint's JSON reply to `body` (an object), after retrying transient failures.
        `headers` are added to this request's (e.g. the episode a model call belongs to)."""
        for retry in range(self.backoff.attempts):
            last = retry == self.backoff.attempts - 1
            try:
                response = await self._client.post(self.url, json=body, headers=headers)
            except httpx2.ReadTimeout:
                raise self._timeout(
                    f"{self.url} sent no response within {self.timeout:g}s (raise the timeout)"
                ) from None
            except httpx2.TransportError as exc:  # connect errors, dropped connections: the server may come back
                if not self._answered and _refused(exc):
                    raise self._error(
                        f"nothing listens at {self.url} (connection refused): start the model server, "
                        "or check the base URL"
                    ) from exc
                if last:
                    raise self._error(f"cannot reach {self.url}: {exc!r} (is the model server running?)") from exc
                await anyio.sleep(self.backoff.delay(retry))
                continue
            self._answered = True
            if response.status_code == 429 or response.status_code >= 500:
                if last:
                    raise self._error(f"{self.url} kept failing: HTTP {response.status_code}: {_excerpt(response)}")
                await anyio.sleep(self.backoff.delay(retry, retry_after_seconds(response.headers.get("retry-after"))))
                continue
            if response.status_code != 200:
                status = response.status_code
                raise self._error(f"{self.url} refused the request: HTTP {status}: {_excerpt(response)}")
            return self._json_object(response)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def aclose(self) -> None:
        await self._client.aclose()

    def _json_object(self, response: httpx2.Response) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError:
            raise self._error(f"{response.url} answered with non-JSON: {_excerpt(response)}") from None
        if not isinstance(body, dict):
            raise self._error(f"{response.url} answered with JSON that is not an object: {_excerpt(response)}")
        return body


def _refused(exc: BaseException) -> bool:
    """A `ConnectionRefusedError` is in `exc`'s chain (httpx wraps the socket's error twice)."""
    seen: BaseException | None = exc
    while seen is not None and not isinstance(seen, ConnectionRefusedError):
        seen = seen.__cause__ or seen.__context__
    return seen is not None


def _excerpt(response: httpx2.Response) -> str:
    return response.text[:300]
