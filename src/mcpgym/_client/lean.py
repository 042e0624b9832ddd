"""The lean HTTP connections a process shares: one `ClientSession` on `HTTPDispatcher` per
(server, options, event loop), leased by every door that reaches that server, of either era
(a 2026-07-28 server by `server/discover`, a handshake-era one by `initialize` and its session).

Layer: client transport owner, below `mcpgym._client.http_door`. On the 2026-07-28 wire every
request is self-contained and names its episode in `_meta` (rfcs/0001), so nothing ties an
episode to a connection: one aiohttp keep-alive pool and one session carry every episode of a
process, however each was opened (`connect(url)`, a `SharedClient`, a pool's replica links, a
vector env). rfcs/0014-lean-client.md has the measurements; rfcs/0019-doors.md the lifetime.

The session is never entered: `HTTPDispatcher` has no receive loop (each answer comes back on
its own POST, in the caller's task), so there is no task group to bind it to the task that
opened it, and the last lease can be released from any task. The pool closes with the last
lease; a later lease opens a new one.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from mcp_types.version import LATEST_MODERN_VERSION, MODERN_PROTOCOL_VERSIONS

from mcpgym._client.dispatch import DEFAULT_CONNECTIONS, HTTPDispatcher, HTTPStatusError
from mcpgym._client.mcp_door import ssl_context
from mcpgym._client.session_door import SessionDoor
from mcpgym._core.protocol import EXTENSION_ID

Key = tuple[str, str, float | None, tuple[tuple[str, str], ...], int]
"""(url, mode, read_timeout, headers, connections): what makes two connections differ."""


@dataclass
class _Entry:
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    users: int = 0
    door: SessionDoor | None = None
    dispatcher: HTTPDispatcher | None = None


_OPEN: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Key, _Entry]] = weakref.WeakKeyDictionary()


def running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # another anyio backend (trio), or no loop at all
        return None


def key(url: str, *, mode: str, read_timeout: float | None, headers: dict[str, str] | None, connections: int) -> Key:
    return url, mode, read_timeout, tuple(sorted((headers or {}).items())), connections


class Lease:
    """One user's hold on a shared lean connection; `release()` exactly once."""

    def __init__(self, table: dict[Key, _Entry], key: Key, entry: _Entry) -> None:
        self._table, self._key, self._entry = table, key, entry
        self.door = entry.door

    async def release(self) -> None:
        entry, self.door = self._entry, None
        entry.users -= 1
        if entry.users or self._table.get(self._key) is not entry:
            return
        del self._table[self._key]  # a lease taken from now on opens a fresh connection
        dispatcher, entry.dispatcher, entry.door = entry.dispatcher, None, None
        if dispatcher is not None:
            with anyio.CancelScope(shield=True):
                await dispatcher.aclose()


async def lease(
    url: str,
    *,
    mode: str = "auto",
    read_timeout: float | None = None,
    headers: dict[str, str] | None = None,
    connections: int = DEFAULT_CONNECTIONS,
) -> Lease | None:
    """A lease on this process's lean connection to `url` (opened by the first lease); None
    where there is no lean path: not on asyncio (aiohttp's loop). A handshake-era server (or
    `mode="legacy"`) gets one session, shared the same way. Raises `MCPError` when the server
    cannot be reached."""
    loop = running_loop()
    if loop is None:
        return None
    table = _OPEN.setdefault(loop, {})
    k = key(url, mode=mode, read_timeout=read_timeout, headers=headers, connections=connections)
    entry = table.setdefault(k, _Entry())
    entry.users += 1
    held = Lease(table, k, entry)
    try:
        async with entry.lock:  # concurrent first users wait for the one opening it
            if entry.door is None:
                await _open(entry, url, mode, read_timeout, headers, connections)
    except BaseException:
        await held.release()
        raise
    held.door = entry.door
    return held


async def _open(
    entry: _Entry, url: str, mode: str, read_timeout: float | None, headers: dict[str, str] | None, connections: int
) -> None:
    dispatcher = HTTPDispatcher(url, headers=headers, connections=connections, ssl_context=ssl_context())
    await dispatcher.open()
    try:
        # Advertising the Gym extension keeps us on the stateless wire (as `ClientDoor` does): an
        # mcpgym server sends clients that do not name their episodes to the handshake era.
        gym: dict[str, dict[str, Any]] = {EXTENSION_ID: {}}
        session = ClientSession(dispatcher=dispatcher, read_timeout_seconds=read_timeout, extensions=gym)
        if mode == "legacy" or not await _negotiate(session, mode):
            dispatcher.handshake = True  # the handshake era: one session, its id on every request
            await session.initialize()
    except BaseException:
        with anyio.CancelScope(shield=True):
            await dispatcher.aclose()
        raise
    entry.dispatcher, entry.door = dispatcher, SessionDoor(session, ("url", url))


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
