"""MCP door: drive an environment server through the official `mcp.Client`.

Layer: client door. Works against a URL (streamable HTTP), a command (stdio) or a server
object (the SDK's in-memory transport). The episode id rides in `_meta` on every request
and, over HTTP, in the `Mcpgym-Episode` header too, so a router can pin an episode to the
replica that holds it (rfcs/0001-protocol-mapping.md).
"""

from __future__ import annotations

import contextlib
import functools
import ssl
from collections.abc import Iterator
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.extension import advertise
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp_types import CONNECTION_CLOSED, INVALID_PARAMS, METHOD_NOT_FOUND

from mcpgym._client.api import AsyncEnv
from mcpgym._client.faults import FaultMappingTransport
from mcpgym._core.errors import MCPError
from mcpgym._core.protocol import (
    EPISODE_HEADER,
    EXTENSION_ID,
    STEP_KEY,
    CloseRequest,
    CloseResult,
    EpisodeParams,
    ResetParams,
    ResetRequest,
    ResetResult,
    StateRequest,
    StateResult,
    StepMeta,
    episode_meta,
    split_meta,
)
from mcpgym._core.types import EpisodeState, ToolStep, tool_step, trusted, unknown_tool_step

MCPTarget = str | StdioServerParameters | Server[Any] | MCPServer

# What the SDK's transports raise when the server is gone or unreachable.
_TRANSPORT_ERRORS = (OSError, httpx2.TransportError, anyio.BrokenResourceError, anyio.ClosedResourceError)


def _first_leaf(error: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups."""
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # One shared context: building one loads the CA bundle (~30 ms), once per env otherwise.
    return ssl.create_default_context()


def _unknown_tool(exc: MCPError) -> ToolStep | None:
    """The step an mcpgym server counted for an unknown tool (its stamp rides in the protocol
    error's data), as the in-process door returns it; None for any other error."""
    data = exc.data
    if exc.code != INVALID_PARAMS or not isinstance(data, dict) or not isinstance(data.get(STEP_KEY), dict):
        return None
    stamp = StepMeta.model_validate(data[STEP_KEY])
    components = stamp.components or None
    return unknown_tool_step(exc.message, stamp.done, stamp.truncated, stamp.step, stamp.reward, components)


def stepped(result: types.CallToolResult) -> ToolStep:
    """A `tools/call` result as a step, on every MCP door (this one and the shared client's):
    our `_meta` stamp read off (reward, flags, components), the tool's own `_meta` kept."""
    stamp, own_meta = split_meta(result.meta)
    if result.meta:  # `trusted`: the result was validated on arrival, only its `_meta` changes
        result = trusted(types.CallToolResult, {**result.__dict__, "meta": own_meta}, result.model_fields_set)
    if stamp is None:  # not an mcpgym server: a plain tool result, no reward
        return tool_step(result, 0.0, False, False, 0)
    return tool_step(result, stamp.reward, stamp.done, stamp.truncated, stamp.step, stamp.components or None)


# The control plane's requests, as both MCP doors send them over a session (this one's
# `mcp.Client`, the shared client's lean one). Each door maps the errors its own way.


async def send_reset(
    session: ClientSession, episode_id: str, seed: int | None, options: dict[str, Any] | None, previous: str | None
) -> ResetResult | None:
    """`reset` on the control plane; None from a server without one (any other MCP server)."""
    params = ResetParams(seed=seed, options=options, previous=previous, _meta=episode_meta(episode_id))
    try:
        return await session.send_request(ResetRequest(params=params), ResetResult)
    except MCPError as exc:
        if exc.code != METHOD_NOT_FOUND:
            raise
        return None


def plain_reset() -> ResetResult:
    """What reset gives on a server without a control plane: its tools are still actions,
    without reward or episodes."""
    return ResetResult(observation=None, info={"plain_mcp_server": True})


def no_state() -> MCPError:
    return MCPError(METHOD_NOT_FOUND, "This MCP server has no mcpgym control plane, so it has no episode state")


async def send_state(session: ClientSession, episode_id: str) -> EpisodeState:
    request = StateRequest(params=EpisodeParams(_meta=episode_meta(episode_id)))
    return (await session.send_request(request, StateResult)).state


async def send_close(session: ClientSession, episode_id: str) -> EpisodeState | None:
    """`close` on the control plane; None when the connection is gone: the episode ended with
    it, which the call that noticed has already reported, so there is nothing left to close."""
    request = CloseRequest(params=EpisodeParams(_meta=episode_meta(episode_id)))
    try:
        return (await session.send_request(request, CloseResult)).state
    except MCPError as exc:
        if exc.code != CONNECTION_CLOSED:
            raise
        return None


class MCPEnv(AsyncEnv):
    """An environment reached over MCP (see `mcpgym.connect` for the accepted targets)."""

    def __init__(
        self,
        target: MCPTarget,
        *,
        mode: str = "auto",
        read_timeout: float | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.target = target
        self.mode = mode
        self.read_timeout = read_timeout
        self.headers = dict(headers or {})
        self._stack: AsyncExitStack | None = None
        self._client: Client | None = None
        self._http: httpx2.AsyncClient | None = None
        self._plain = False
        """The server has no mcpgym control plane (any other MCP server): tools still work."""

    async def _connect(self) -> None:
        with self._transport_errors("Could not connect to"):
            await self._open()

    async def _open(self) -> None:
        async with AsyncExitStack() as stack:
            server: Any = self.target
            if isinstance(server, str):
                # One HTTP client per env: its headers carry this env's current episode id.
                # A failed or refused POST is answered by FaultMappingTransport as a JSON-RPC
                # error: the SDK would otherwise cancel the caller's task (see _client_faults).
                transport = FaultMappingTransport(server, httpx2.AsyncHTTPTransport(verify=_ssl_context()))
                self._http = await stack.enter_async_context(
                    httpx2.AsyncClient(
                        headers=self.headers, timeout=httpx2.Timeout(30.0, read=300.0), transport=transport
                    )
                )
                server = streamable_http_client(server, http_client=self._http)
            # Advertising the Gym extension tells a server this client names its episodes, so it
            # may stay on the stateless wire (mcpgym._server.plain_agents keeps other agents on sessions).
            gym = [advertise(EXTENSION_ID)]
            client = Client(server, mode=self.mode, read_timeout_seconds=self.read_timeout, extensions=gym)
            self._client = await stack.enter_async_context(client)
            self._stack = stack.pop_all()

    async def _disconnect(self) -> None:
        stack, self._stack, self._client = self._stack, None, None
        if stack is None:
            return
        with self._transport_errors("Lost the connection to"):
            await stack.aclose()

    @contextlib.contextmanager
    def _transport_errors(self, what: str) -> Iterator[None]:
        """Turn the SDK's transport failures (a task group's exception group) into one MCPError."""
        try:
            yield
        except* (MCPError, *_TRANSPORT_ERRORS) as group:
            cause = _first_leaf(group)
            if isinstance(cause, MCPError) and isinstance(cause.data, dict) and "url" in cause.data:
                raise cause from None  # already says which server and what happened (_client_faults)
            raise MCPError(
                CONNECTION_CLOSED, f"{what} the environment server {self._describe()}: {type(cause).__name__}: {cause}"
            ) from group

    def _describe(self) -> str:
        if isinstance(self.target, str):
            return self.target
        if isinstance(self.target, StdioServerParameters):
            return " ".join([self.target.command, *self.target.args])
        return repr(self.target)

    @property
    def client(self) -> Client:
        """The underlying `mcp.Client` (for anything beyond the Gym API)."""
        if self._client is None:
            raise RuntimeError("not connected: use `async with mcpgym.connect(...)`")
        return self._client

    async def _reset(
        self, episode_id: str, seed: int | None, options: dict[str, Any] | None, previous: str | None
    ) -> ResetResult:
        if self._http is not None:
            self._http.headers[EPISODE_HEADER] = episode_id
        if not self._plain:
            try:
                result = await send_reset(self.client.session, episode_id, seed, options, previous)
            except MCPError as exc:
                raise self._lost(exc) from None
            if result is not None:
                return result
            self._plain = True
        return plain_reset()

    async def _call(self, episode_id: str, name: str, arguments: dict[str, Any]) -> ToolStep:
        meta = None if self._plain else episode_meta(episode_id)
        try:
            result = await self.client.call_tool(name, arguments, meta=meta)
        except MCPError as exc:
            step = _unknown_tool(exc)
            if step is None:
                raise self._lost(exc) from None
            return step
        return stepped(result)

    async def _list_tools(self) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        while True:
            try:
                page = await self.client.list_tools(cursor=cursor)
            except MCPError as exc:
                raise self._lost(exc) from None
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools

    async def _state(self, episode_id: str) -> EpisodeState:
        if self._plain:
            raise no_state()
        try:
            return await send_state(self.client.session, episode_id)
        except MCPError as exc:
            raise self._lost(exc) from None

    async def _close(self, episode_id: str) -> EpisodeState | None:
        return None if self._plain else await send_close(self.client.session, episode_id)

    def _lost(self, exc: MCPError) -> MCPError:
        """`exc`, or for the stdio door's bare "Connection closed", one that names the server."""
        if exc.code != CONNECTION_CLOSED or isinstance(exc.data, dict):
            return exc
        what = "command" if isinstance(self.target, StdioServerParameters) else "server"
        return MCPError(
            CONNECTION_CLOSED,
            f"Lost the connection to the environment server {self._describe()}: {exc.message} "
            "(the server exited or closed its end)",
            {what: self._describe(), "reason": exc.message},
        )
