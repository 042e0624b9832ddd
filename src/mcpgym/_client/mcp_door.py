"""`ClientDoor`: an environment server behind one official `mcp.Client`.

Layer: client door. For a command (stdio), a server object (the SDK's in-memory transport),
and HTTP where the lean path cannot go (an anyio backend other than asyncio:
`mcpgym._client.http_door`). The primitives are `SessionDoor`'s over the
client's session; this module only opens and closes the client. The episode id rides in
`_meta` on every request and, over HTTP, in the `Mcpgym-Episode` header too, so a router can
pin an episode to the replica that holds it (rfcs/0001-protocol-mapping.md).
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
from mcp import Client, StdioServerParameters
from mcp.client.extension import advertise
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp_types import CONNECTION_CLOSED

from mcpgym._client.door import Forwarding
from mcpgym._client.faults import FaultMappingTransport
from mcpgym._client.session_door import SessionDoor
from mcpgym._core.errors import MCPError
from mcpgym._core.protocol import EPISODE_HEADER, EXTENSION_ID, ResetResult

MCPTarget = str | StdioServerParameters | Server[Any] | MCPServer

# What the SDK's transports raise when the server is gone or unreachable.
_TRANSPORT_ERRORS = (OSError, httpx2.TransportError, anyio.BrokenResourceError, anyio.ClosedResourceError)


def _first_leaf(error: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups."""
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


@functools.cache
def ssl_context() -> ssl.SSLContext:
    # One shared context: building one loads the CA bundle (~30 ms), once per env otherwise.
    return ssl.create_default_context()


def describe(target: MCPTarget) -> tuple[str, str]:
    """("url" / "command" / "server", how to name it) for error messages and their data."""
    if isinstance(target, str):
        return "url", target
    if isinstance(target, StdioServerParameters):
        return "command", " ".join([target.command, *target.args])
    return "server", repr(target)


class ClientDoor(Forwarding):
    """An environment reached through one `mcp.Client` (see the module docstring)."""

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
        self._door: SessionDoor | None = None

    def describe(self) -> tuple[str, str]:
        return describe(self.target)

    async def connect(self) -> None:
        with self._transport_errors("Could not connect to"):
            await self._open()

    async def _open(self) -> None:
        async with AsyncExitStack() as stack:
            server: Any = self.target
            if isinstance(server, str):
                # One HTTP client per door: its headers carry this door's current episode id.
                # A failed or refused POST is answered by FaultMappingTransport as a JSON-RPC
                # error: the SDK would otherwise cancel the caller's task (see faults.py).
                transport = FaultMappingTransport(server, httpx2.AsyncHTTPTransport(verify=ssl_context()))
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
            self._door = SessionDoor(self._client.session, self.describe())
            self._stack = stack.pop_all()

    async def disconnect(self) -> None:
        stack, self._stack, self._client, self._door = self._stack, None, None, None
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
                raise cause from None  # already says which server and what happened (faults.py)
            where = self.describe()[1]
            raise MCPError(
                CONNECTION_CLOSED, f"{what} the environment server {where}: {type(cause).__name__}: {cause}"
            ) from group

    @property
    def client(self) -> Client:
        """The underlying `mcp.Client` (for anything beyond the Gym API)."""
        if self._client is None:
            raise RuntimeError("not connected: use `async with mcpgym.connect(...)`")
        return self._client

    @property
    def session(self) -> ClientSession:
        return self.client.session

    @property
    def inner(self) -> SessionDoor:
        if self._door is None:
            raise RuntimeError("not connected: use `async with mcpgym.connect(...)`")
        return self._door

    async def reset(
        self, episode_id: str, seed: int | None, options: dict[str, Any] | None, previous: str | None
    ) -> ResetResult:
        if self._http is not None:
            self._http.headers[EPISODE_HEADER] = episode_id  # what a router hashes on (rfcs/0001)
        return await self.inner.reset(episode_id, seed, options, previous)
