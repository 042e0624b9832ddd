"""What a dead, unreachable or refusing HTTP server looks like to a client: an `MCPError`.

Layer: client transport (below the MCP door, `mcpgym._client.mcp_door`). The SDK's streamable-HTTP
client runs each request's POST as a task in a task group that lives in the caller's task, so
a transport failure there (the server killed mid-episode, connection refused) cancels the
caller: `await env.step(...)` raised `CancelledError` and the error only surfaced when the
`async with` exited. This httpx transport sits under the SDK and answers every failed POST
itself with a JSON-RPC error body, which the SDK hands to the waiting request as an
`MCPError`: the call in flight and every later one fail with a message naming the URL and
what happened, and no cancel scope of the caller's is touched.

It also turns HTTP refusals that carry no JSON-RPC error (401, 403, 404, 421, ...) into one
that says the status and what to do, instead of the SDK's "Server returned an error response".
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx2
from mcp_types import CONNECTION_CLOSED

from mcpgym._core.errors import HTTP_ERROR

_JSON = "application/json"
MAX_ERROR_BODY = 4096
"""Bytes of a refusal's body kept for the message (a hint, never a page of HTML)."""

_HINTS = {
    401: "pass the server's token: --token T or MCPGYM_TOKEN=T (mcpgym CLI), "
    "headers={'Authorization': 'Bearer T'} (mcpgym.connect)",
    403: "the server refused this request's Origin (DNS-rebinding protection): start it with "
    "--allowed-host NAME for the name you use",
    421: "the server refused this Host name (DNS-rebinding protection): start it with --allowed-host NAME[:PORT] "
    "for the name you use",
}


class FaultMappingTransport(httpx2.AsyncBaseTransport):
    """Wraps the real transport; a failed or refused POST becomes a JSON-RPC error response."""

    def __init__(self, url: str, inner: httpx2.AsyncBaseTransport) -> None:
        self.url = url
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method != "POST":
            # The SDK already survives a failed GET stream or DELETE (it logs and goes on).
            return await self._inner.handle_async_request(request)
        try:
            response = await self._inner.handle_async_request(request)
            if response.status_code < 400 and not response.headers.get("content-type", "").startswith(_JSON):
                return response  # an SSE stream: the SDK resolves a request whose stream breaks
            # Read a one-shot answer here, so a server dying mid-body is mapped too.
            body = await _read(response, MAX_ERROR_BODY if response.status_code >= 400 else None)
            if response.status_code >= 400 and not _is_json_rpc(body):
                return self._refusal(request, response, body[:MAX_ERROR_BODY])
            return _replace_body(response, request, body)
        except httpx2.TransportError as exc:
            kind: Loss = (
                "unreachable"
                if isinstance(exc, httpx2.ConnectError)
                else "timeout"
                if isinstance(exc, httpx2.TimeoutException)
                else "lost"
            )
            method = request.headers.get("mcp-method")  # (the 2026-07-28 wire names it on every POST)
            message, data = lost(self.url, kind, exc, method)
            return _error(request, CONNECTION_CLOSED, message, data)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def _refusal(self, request: httpx2.Request, response: httpx2.Response, raw: bytes) -> httpx2.Response:
        message, data = refusal(self.url, response.status_code, response.reason_phrase, raw)
        return _error(request, HTTP_ERROR, message, data, status=response.status_code)


Loss = Literal["unreachable", "timeout", "lost"]


def lost(url: str, kind: Loss, exc: BaseException, method: str | None = None) -> tuple[str, dict[str, Any]]:
    """The message and data of a CONNECTION_CLOSED error, alike on every HTTP door (this
    transport's and the shared client's `HTTPDispatcher`)."""
    what = _what(exc)
    where = f"{url} during {method}" if method else url
    if kind == "unreachable":
        message = f"Cannot reach the environment server {where} (is it running?): {what}"
    elif kind == "timeout":
        message = f"The environment server {where} did not answer in time: {what}"
    else:
        message = f"Lost the connection to the environment server {where}{'' if method else ' mid-request'}: {what}"
    return message, {"url": url, "reason": what}


def refusal(url: str, status: int, reason: str | None, raw: bytes) -> tuple[str, dict[str, Any]]:
    """The message and data of an HTTP_ERROR: a non-2xx answer with no JSON-RPC error in its
    `raw` body (at most `MAX_ERROR_BODY` bytes), alike on every HTTP door."""
    said = _server_message(raw[:MAX_ERROR_BODY])
    hint = _HINTS.get(status)
    if status == 404 and not urlsplit(url).path.rstrip("/").endswith("/mcp"):
        hint = f"MCP endpoints usually end in /mcp: try {url.rstrip('/')}/mcp"
    line = f"HTTP {status} {reason or ''}".rstrip()
    message = f"{line} from {url}" + "".join(f": {part}" for part in (said, hint) if part)
    return message, {"status": status, "url": url, "server_message": said, "hint": hint}


def _what(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def _read(response: httpx2.Response, limit: int | None) -> bytes:
    """The raw body (up to about `limit` bytes: a refusal's body is only ever a hint)."""
    chunks: list[bytes] = []
    size = 0
    try:
        async with contextlib.aclosing(response.aiter_raw()) as raw:  # (left midway)
            async for chunk in raw:
                chunks.append(chunk)
                size += len(chunk)
                if limit is not None and size > limit:
                    break
    finally:
        await response.aclose()
    return b"".join(chunks)


def _is_json_rpc(body: bytes) -> bool:
    # The SDK reads a JSON-RPC error out of any non-2xx JSON body itself (e.g. "Session not found");
    # a plain refusal (text, or JSON without "jsonrpc" like our 401) is rewritten here.
    try:
        parsed = json.loads(body)
    except ValueError:
        return False
    return isinstance(parsed, dict) and "jsonrpc" in parsed


def _server_message(raw: bytes) -> str | None:
    """The server's own words: `message` of a JSON body, else the body's first line of text."""
    text = raw.decode("utf-8", "replace").strip()
    try:
        parsed: Any = json.loads(text)
    except ValueError:
        return text.splitlines()[0][:300] if text and not text.startswith("<") else None
    if isinstance(parsed, dict):
        found = parsed.get("message") or (parsed.get("error") or {}).get("message")
        return str(found) if found else None
    return None


def _replace_body(response: httpx2.Response, request: httpx2.Request, body: bytes) -> httpx2.Response:
    return httpx2.Response(
        response.status_code,
        headers=response.headers,
        stream=httpx2.ByteStream(body),
        request=request,
        extensions=response.extensions,
    )


def _error(
    request: httpx2.Request, code: int, message: str, data: dict[str, Any], *, status: int = 502
) -> httpx2.Response:
    """A JSON-RPC error the SDK delivers to the request that was waiting (its id is filled in)."""
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message, "data": data}}
    return httpx2.Response(status, json=body, request=request)
