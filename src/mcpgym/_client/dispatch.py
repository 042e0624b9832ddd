"""`HTTPDispatcher`: the MCP SDK's `Dispatcher` for a streamable-HTTP server, on aiohttp.

Layer: client transport. Below `mcp.client.session.ClientSession` (which keeps the protocol:
request and result types, version stamps, header rules); above aiohttp's connection pool. It
imports nothing from mcpgym but the protocol vocabulary and the wording of transport
faults (`_client_faults`, so both HTTP doors fail alike).

Why it exists (rfcs/0014-lean-client.md): on the 2026-07-28 revision every request is
self-contained (no session, no standing stream), so the SDK's stream machinery (a task per
POST, memory streams, a JSON-RPC receive loop) and its pure-Python HTTP/1.1 stack are most of
the ~1 ms of client CPU a step costs. Here a request is one POST made in the caller's task on
a pooled keep-alive connection, parsed by aiohttp's C parser; the JSON-RPC envelope is the
SDK's own `JSONRPCRequest` / `jsonrpc_message_adapter`.

Every transport fault (refused, reset, timed out, a non-JSON-RPC HTTP answer) is raised in the
caller's task as `MCPError` naming the URL and what happened, never as a cancellation.

A handshake-era server (one that answers `initialize`, not `server/discover`) is served by the
same dispatcher once `handshake` is set (rfcs/0019-doors.md): the `Mcp-Session-Id` its first
answer carries goes on every later request, notifications (`notifications/initialized`) are
POSTed, and closing DELETEs the session. No standing GET stream is opened: an environment
server sends a Gym client nothing unasked.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import ssl
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Final

import aiohttp
import anyio
import anyio.abc
import yarl
from mcp.shared.dispatcher import CallOptions, OnNotify, OnNotifyIntercept, OnRequest
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    INVALID_REQUEST,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    ProgressNotificationParams,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from mcpgym._client.faults import MAX_ERROR_BODY, Loss, lost, refusal
from mcpgym._core.errors import HTTP_ERROR
from mcpgym._core.protocol import EPISODE_HEADER, EPISODE_KEY

log = logging.getLogger("mcpgym.client")

ACCEPT: Final = "application/json, text/event-stream"
SESSION_HEADER: Final = "Mcp-Session-Id"
CLOSE_WAIT: Final = 5.0
"""Seconds a closing dispatcher waits for the server to acknowledge the end of its session."""
DEFAULT_CONNECTIONS: Final = 256
"""Keep-alive connections per server; further concurrent requests wait for a free one."""


class HTTPStatusError(MCPError):
    """An HTTP answer without a JSON-RPC error in it (its `status` says which). A refusal
    (4xx/5xx) is `HTTP_ERROR` with the message and data the SDK client's door gives
    (`mcpgym._client.faults.refusal`), so callers need not know which door they are on."""

    def __init__(self, code: int, message: str, status: int, data: Any = None) -> None:
        super().__init__(code, message, data)
        self.status = status


class HTTPDispatcher:
    """POST each request on a shared aiohttp pool; answer with its JSON or SSE response.

    `open()` / `aclose()` own the pool. `run()` only parks until cancelled (responses come back
    on their own POST, so there is no receive loop). Inbound notifications on an SSE response
    are progress for that request (handed to its `on_progress`) or logged and dropped: on this
    revision nothing else reaches a client that asked for no logs.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        connections: int = DEFAULT_CONNECTIONS,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.url = url
        self._url = yarl.URL(url)  # parsed once, not per request
        self._headers = {"Accept": ACCEPT, "Content-Type": "application/json", **(headers or {})}
        self._connections = connections
        self._ssl = ssl_context
        self._ids = itertools.count(1)
        self._http: aiohttp.ClientSession | None = None
        self.handshake = False
        """Speak the handshake era: keep the server's session id, POST notifications."""
        self.session_id: str | None = None

    async def open(self) -> None:
        connector = aiohttp.TCPConnector(limit=self._connections, ssl=self._ssl if self._ssl is not None else True)
        # No total timeout: a tool may run long; per-request timeouts come from CallOptions.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30)
        self._http = aiohttp.ClientSession(
            connector=connector,
            timeout=timeout,
            headers=self._headers,
            cookie_jar=aiohttp.DummyCookieJar(),  # MCP has no cookies; the jar is per-request work
            auto_decompress=False,  # nor compressed answers: we send no Accept-Encoding
            skip_auto_headers=("Accept-Encoding", "User-Agent"),
        )

    async def aclose(self) -> None:
        http, self._http = self._http, None
        if http is None:
            return
        try:
            if self.session_id is not None:  # the session's end: the server closes what it held
                with anyio.move_on_after(CLOSE_WAIT), contextlib.suppress(aiohttp.ClientError, OSError):
                    headers = {SESSION_HEADER: self.session_id}
                    async with http.delete(self._url, headers=headers, allow_redirects=False):
                        pass
        finally:
            await http.close()

    async def run(
        self,
        on_request: OnRequest,
        on_notify: OnNotify,
        on_notify_intercept: OnNotifyIntercept | None = None,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started()
        await anyio.sleep_forever()

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        if not self.handshake:
            # The 2026-07-28 HTTP wire has no client-to-server notifications (cancelling is closing
            # the request's own connection, which aiohttp does when the caller is cancelled).
            log.debug("dropped client notification %s: nothing to send it on", method)
            return
        fields: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            fields["params"] = dict(params)
        body = JSONRPCNotification.model_construct(**fields).model_dump_json(by_alias=True, exclude_unset=True)
        headers = self._session_headers(dict((opts or {}).get("headers") or {}))
        if self._http is None:
            raise MCPError(CONNECTION_CLOSED, f"The client of {self.url} is closed")
        try:
            async with self._http.post(self._url, data=body.encode(), headers=headers) as response:
                if response.status >= 300:
                    message, data = refusal(self.url, response.status, response.reason, await response.read())
                    raise HTTPStatusError(HTTP_ERROR, message, response.status, data)
        except (aiohttp.ClientError, OSError) as exc:
            raise self._lost(method, "lost", exc) from exc

    def _session_headers(self, headers: dict[str, str]) -> dict[str, str]:
        if self.session_id is not None:
            headers[SESSION_HEADER] = self.session_id
        return headers

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        opts = opts or {}
        # Built from the session's already-validated dump: constructed, not validated again.
        fields: dict[str, Any] = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
        if params is not None:
            fields["params"] = dict(params)
        request = JSONRPCRequest.model_construct(**fields)
        headers = self._session_headers(dict(opts.get("headers") or {}))
        meta = (params or {}).get("_meta")
        if isinstance(meta, dict) and isinstance(episode := meta.get(EPISODE_KEY), str):
            headers[EPISODE_HEADER] = episode  # what a router hashes on (rfcs/0001)
        timeout = opts.get("timeout")
        try:
            with anyio.fail_after(timeout) if timeout is not None else contextlib.nullcontext():
                reply = await self._post(request, headers, opts)
        except aiohttp.ClientConnectorError as exc:  # (before ClientError: it is one)
            raise self._lost(method, "unreachable", exc) from exc
        except aiohttp.ClientError as exc:  # (its timeouts too: they are ClientErrors first)
            raise self._lost(method, "timeout" if isinstance(exc, TimeoutError) else "lost", exc) from exc
        except TimeoutError as exc:  # (before OSError, of which it is one)
            if timeout is None:  # the OS's, not ours
                raise self._lost(method, "timeout", exc) from exc
            raise MCPError(REQUEST_TIMEOUT, f"{method} to {self.url} timed out after {timeout:g}s") from None
        except OSError as exc:
            raise self._lost(method, "lost", exc) from exc
        if isinstance(reply, JSONRPCError):
            raise MCPError(reply.error.code, reply.error.message, reply.error.data)
        return reply.result

    def _lost(self, method: str, kind: Loss, exc: BaseException) -> MCPError:
        """CONNECTION_CLOSED, worded and with the data (url, reason) of the SDK client's door."""
        message, data = lost(self.url, kind, exc, method)
        return MCPError(CONNECTION_CLOSED, message, data)

    async def _post(
        self, request: JSONRPCRequest, headers: dict[str, str], opts: CallOptions
    ) -> JSONRPCResponse | JSONRPCError:
        if self._http is None:
            raise MCPError(CONNECTION_CLOSED, f"The client of {self.url} is closed")
        body = request.model_dump_json(by_alias=True, exclude_unset=True).encode()
        async with self._http.post(self._url, data=body, headers=headers, allow_redirects=False) as response:
            if self.handshake and self.session_id is None:
                self.session_id = response.headers.get(SESSION_HEADER)  # (initialize's answer names it)
            kind = response.content_type
            if response.status >= 300 or response.status == 202:
                return await self._refused(response, request)
            if kind == "application/json":
                return _answer(_parse(await response.read()), request)
            if kind == "text/event-stream":
                return await self._read_events(response, request, opts)
            raise MCPError(INVALID_REQUEST, f"{self.url} answered {request.method} with content type {kind!r}")

    async def _refused(self, response: aiohttp.ClientResponse, request: JSONRPCRequest) -> JSONRPCError:
        """A non-2xx answer: the JSON-RPC error in its body, else an error saying what HTTP said."""
        status = f"HTTP {response.status} {response.reason or ''}".rstrip()
        if response.content_type == "application/json":  # may carry a JSON-RPC error: read it whole
            body = await response.read()
            with contextlib.suppress(MCPError):
                reply = _parse(body)
                if isinstance(reply, JSONRPCError):
                    return reply
        else:  # only ever a hint for the message
            body = await response.content.read(MAX_ERROR_BODY + 1)
        if response.status == 202:
            message = f"{self.url} answered {request.method} with 202 Accepted and no result"
            raise HTTPStatusError(INVALID_REQUEST, message, response.status)
        if 300 <= response.status < 400:
            where = response.headers.get("Location", "?")  # not followed: the SDK only follows within origin
            message = f"{self.url} redirected {request.method} to {where} ({status}): not followed"
            raise HTTPStatusError(INVALID_REQUEST, message, response.status)
        message, data = refusal(self.url, response.status, response.reason, body)
        raise HTTPStatusError(HTTP_ERROR, message, response.status, data)

    async def _read_events(
        self, response: aiohttp.ClientResponse, request: JSONRPCRequest, opts: CallOptions
    ) -> JSONRPCResponse | JSONRPCError:
        # aclosing: returning mid-stream finalises the generator here, not whenever the GC gets to it.
        async with contextlib.aclosing(_sse_data(response.content)) as events:
            async for data in events:
                message = _parse(data)
                if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id == request.id:
                    return message
                if isinstance(message, JSONRPCNotification):
                    await _progress(message, opts)
        raise MCPError(CONNECTION_CLOSED, f"{self.url} ended the event stream of {request.method} without a result")


def _parse(data: bytes) -> JSONRPCMessage:
    try:
        return jsonrpc_message_adapter.validate_json(data, by_name=False)
    except ValidationError as exc:
        raise MCPError(PARSE_ERROR, f"Not a JSON-RPC message: {exc.errors()[0]['msg']}: {data[:200]!r}") from None


def _answer(message: JSONRPCMessage, request: JSONRPCRequest) -> JSONRPCResponse | JSONRPCError:
    if isinstance(message, JSONRPCResponse | JSONRPCError):
        return message
    raise MCPError(PARSE_ERROR, f"Expected the answer to {request.method}, got a {type(message).__name__}")


async def _progress(message: JSONRPCNotification, opts: CallOptions) -> None:
    on_progress = opts.get("on_progress")
    if message.method != "notifications/progress" or on_progress is None:
        log.debug("dropped server notification %s", message.method)
        return
    params = ProgressNotificationParams.model_validate(message.params or {})
    await on_progress(params.progress, params.total, params.message)


async def _sse_data(lines: aiohttp.StreamReader) -> AsyncGenerator[bytes, None]:
    """The `data` of each server-sent event (the format's one rule: a blank line ends an event)."""
    data: list[bytes] = []
    async for raw in lines:
        line = raw.rstrip(b"\r\n")
        if not line:
            if data:
                yield b"\n".join(data)
                data = []
        elif line.startswith(b"data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(b" ") else value)
    if data:
        yield b"\n".join(data)
