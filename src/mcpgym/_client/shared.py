"""`SharedClient`: one MCP client that every episode of a process shares.

Layer: client door. Imports the other doors and the SDK's `ClientSession`; imported by
`__init__`, the vector env, the harness and `mcpgym.trl`.

An episode is named by the id in each request's `_meta` (rfcs/0001), not by the connection,
so one client can carry any number of concurrent episodes. `SharedClient(target)` opens that
client once; `shared.connect()` hands out cheap per-episode `AsyncEnv`s over it:

- a streamable-HTTP URL of a 2026-07-28 server: the lean path, the SDK's `ClientSession` on
  `HTTPDispatcher` (one aiohttp keep-alive pool, one POST per request, `Mcpgym-Episode` set per
  request from `_meta`). See rfcs/0014-lean-client.md for the measurements.
- any other MCP target (stdio command, in-memory server): one ordinary `MCPEnv` connection
  (one server process for all episodes over stdio), multiplexed the same way.
- a handshake-era HTTP server, a non-asyncio event loop, an in-process environment or a pool:
  nothing to share at this layer, so `connect()` returns exactly what `mcpgym.connect` would.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, Self

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, HEADER_MISMATCH, REQUEST_TIMEOUT
from mcp_types.version import LATEST_MODERN_VERSION, MODERN_PROTOCOL_VERSIONS

from mcpgym._client.api import AsyncEnv
from mcpgym._client.dispatch import DEFAULT_CONNECTIONS, HTTPDispatcher, HTTPStatusError
from mcpgym._client.mcp_door import (
    MCPEnv,
    _ssl_context,
    _unknown_tool,
    no_state,
    plain_reset,
    send_close,
    send_reset,
    send_state,
    stepped,
)
from mcpgym._core.protocol import (
    EXTENSION_ID,
    ResetResult,
    episode_meta,
)
from mcpgym._core.types import EpisodeState, ToolStep
from mcpgym._targets.connect import Target, connect


class LeanHTTPEnv(AsyncEnv):
    """The door primitives over one `ClientSession` on `HTTPDispatcher`, for any episode id.

    Holds no episode of its own: `EpisodeEnv`s call its primitives with theirs."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session
        self._plain = False
        """The server has no mcpgym control plane (any other MCP server): tools still work."""

    async def _connect(self) -> None:
        pass

    async def _disconnect(self) -> None:
        pass

    async def _reset(
        self, episode_id: str, seed: int | None, options: dict[str, Any] | None, previous: str | None
    ) -> ResetResult:
        if not self._plain:
            result = await send_reset(self.session, episode_id, seed, options, previous)
            if result is not None:
                return result
            self._plain = True
        return plain_reset()

    async def _call(self, episode_id: str, name: str, arguments: dict[str, Any]) -> ToolStep:
        try:
            try:
                result = await self._send_call(episode_id, name, arguments)
            except MCPError as exc:
                if exc.code != HEADER_MISMATCH:
                    raise
                # The spec's recovery (as `mcp.Client.call_tool`): re-list the tools, resend once.
                await self._list_tools()
                result = await self._send_call(episode_id, name, arguments)
        except MCPError as exc:
            step = _unknown_tool(exc)  # a counted `is_error` step, as on every door
            if step is None:
                raise
            return step
        return stepped(result)

    async def _send_call(self, episode_id: str, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        if self._plain:  # someone else's server: the SDK's checks, output schema included
            return await self.session.call_tool(name, arguments)
        # An mcpgym server validated the result against the tool's output model before
        # sending it (the in-process door does no more): the client's jsonschema pass, a
        # tenth of a step's CPU, would only repeat it (rfcs/0014-lean-client.md).
        params = types.CallToolRequestParams(name=name, arguments=arguments, _meta=episode_meta(episode_id))
        return await self.session.send_request(types.CallToolRequest(params=params), types.CallToolResult)

    async def _list_tools(self) -> list[types.Tool]:
        tools: list[types.Tool] = []
        params: types.PaginatedRequestParams | None = None
        while True:
            page = await self.session.list_tools(params=params)
            tools.extend(page.tools)
            if not page.next_cursor:
                return tools
            params = types.PaginatedRequestParams(cursor=page.next_cursor)

    async def _state(self, episode_id: str) -> EpisodeState:
        if self._plain:
            raise no_state()
        return await send_state(self.session, episode_id)

    async def _close(self, episode_id: str) -> EpisodeState | None:
        return None if self._plain else await send_close(self.session, episode_id)


class EpisodeEnv(AsyncEnv):
    """One episode's `AsyncEnv` on a shared door: the door's primitives, this env's episode id.

    Opening and closing it costs nothing on the wire (closing ends its episode, as any
    `AsyncEnv`); the connection belongs to the `SharedClient`."""

    def __init__(self, door: AsyncEnv) -> None:
        self.door = door

    async def _connect(self) -> None:
        pass

    async def _disconnect(self) -> None:
        pass

    async def _reset(
        self, episode_id: str, seed: int | None, options: dict[str, Any] | None, previous: str | None
    ) -> ResetResult:
        return await self.door._reset(episode_id, seed, options, previous)

    async def _call(self, episode_id: str, name: str, arguments: dict[str, Any]) -> ToolStep:
        return await self.door._call(episode_id, name, arguments)

    async def _list_tools(self) -> list[types.Tool]:
        return await self.door._list_tools()

    async def _state(self, episode_id: str) -> EpisodeState:
        return await self.door._state(episode_id)

    async def _close(self, episode_id: str) -> EpisodeState | None:
        return await self.door._close(episode_id)


class SharedClient:
    """One client for every episode of a process: `async with mcpgym.SharedClient(url) as shared:`.

    ```python
    async with mcpgym.SharedClient("http://127.0.0.1:8000/mcp") as shared:
        async with anyio.create_task_group() as tg:
            for seed in range(512):
                tg.start_soon(run_episode, shared.connect(), seed)  # each: `async with env: ...`
    ```

    `mcpgym.connect(shared)` is the same as `shared.connect()`. Options are `mcpgym.connect`'s;
    `connections` bounds the keep-alive HTTP connections of the lean path (requests beyond it
    wait for a free one). Enter it in the task that outlives the episodes using it.
    """

    def __init__(
        self,
        target: Target,
        *,
        mode: str = "auto",
        read_timeout: float | None = None,
        headers: dict[str, str] | None = None,
        connections: int = DEFAULT_CONNECTIONS,
    ) -> None:
        self.target = target
        self.mode = mode
        self.read_timeout = read_timeout
        self.headers = dict(headers or {})
        self.connections = connections
        self.door: AsyncEnv | None = None
        """What the episodes share (None: nothing is shared, each `connect()` is independent)."""
        self._stack: AsyncExitStack | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def options(self) -> dict[str, Any]:
        """The `connect` options this client was made with (to open a like one elsewhere)."""
        return {"mode": self.mode, "read_timeout": self.read_timeout, "headers": self.headers or None}

    @property
    def lean(self) -> bool:
        """True when episodes ride the lean HTTP path (`HTTPDispatcher`)."""
        return isinstance(self.door, LeanHTTPEnv)

    def connect(self) -> AsyncEnv:
        """A new episode client over the shared connection (use it as `async with env:`)."""
        if self._stack is None:
            raise RuntimeError("use the SharedClient inside `async with` before connecting episodes to it")
        if (running := _running_loop()) is not None and running is not self._loop:
            raise RuntimeError(
                "this SharedClient belongs to the event loop that opened it; open another one on this loop"
            )
        if self.door is not None:
            return EpisodeEnv(self.door)
        return connect(self.target, mode=self.mode, read_timeout=self.read_timeout, headers=self.headers or None)

    def __mcpgym_connect__(self, *, mode: str, read_timeout: float | None, headers: dict[str, str] | None) -> AsyncEnv:
        return self.connect()

    async def __aenter__(self) -> Self:
        try:
            async with AsyncExitStack() as stack:
                self.door = await self._open(stack)
                self._loop = _running_loop()
                self._stack = stack.pop_all()
        except* MCPError as group:
            # Raised inside the session's task group, which wraps it: hand back the error itself.
            error = group.exceptions[0]
            raise error from error.__cause__
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        stack, self._stack, self.door = self._stack, None, None
        if stack is not None:
            await stack.aclose()

    async def _open(self, stack: AsyncExitStack) -> AsyncEnv | None:
        # `connect` reads the target (one parser of targets); building its door does no I/O.
        probe = connect(self.target, mode=self.mode, read_timeout=self.read_timeout, headers=self.headers or None)
        if not isinstance(probe, MCPEnv):
            return None  # in-process or a pool: each episode gets its own client, as from connect()
        if isinstance(probe.target, str):
            return await self._open_http(probe.target, stack) if _on_asyncio() else None
        return await stack.enter_async_context(probe)  # stdio / in-memory: one connection, many episodes

    async def _open_http(self, url: str, stack: AsyncExitStack) -> AsyncEnv | None:
        if self.mode == "legacy":
            return None  # a handshake session per client: nothing to multiplex on our side
        dispatcher = HTTPDispatcher(url, headers=self.headers, connections=self.connections, ssl_context=_ssl_context())
        await dispatcher.open()
        stack.push_async_callback(dispatcher.aclose)
        # Advertising the Gym extension keeps us on the stateless wire (as `MCPEnv` does): an
        # mcpgym server sends clients that do not name their episodes to the handshake era.
        gym: dict[str, dict[str, Any]] = {EXTENSION_ID: {}}
        session = ClientSession(dispatcher=dispatcher, read_timeout_seconds=self.read_timeout, extensions=gym)
        await stack.enter_async_context(session)
        if not await _negotiate(session, self.mode):
            await stack.aclose()  # handshake era: fall back to one `mcp.Client` per episode
            return None
        return LeanHTTPEnv(session)


async def _negotiate(session: ClientSession, mode: str) -> bool:
    """Settle on a 2026-07-28-era version; False when the server only speaks the handshake era."""
    if mode in MODERN_PROTOCOL_VERSIONS:
        version = mode
    else:
        try:
            raw = await session.send_discover(LATEST_MODERN_VERSION)
        except MCPError as exc:
            if exc.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT) or _refused_access(exc):
                raise  # an outage or a missing credential is no era verdict
            return False  # what `mcp.Client`'s auto mode reads as a legacy server
        result = types.DiscoverResult.model_validate(raw)
        mutual = [v for v in MODERN_PROTOCOL_VERSIONS if v in result.supported_versions]
        if not mutual:
            return False
        session.adopt(result)
        return True
    session.adopt(
        types.DiscoverResult(
            supported_versions=[version],
            capabilities=types.ServerCapabilities(),
            result_type="complete",
            ttl_ms=0,
            cache_scope="public",
        )
    )
    return True


def _refused_access(error: MCPError) -> bool:
    return isinstance(error, HTTPStatusError) and error.status in (401, 403)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # another anyio backend (trio), or no loop at all
        return None


def _on_asyncio() -> bool:
    """aiohttp needs asyncio; under another anyio backend the SDK's own transport is used."""
    return _running_loop() is not None
