"""`HTTPDoor`: a streamable-HTTP environment server, on the connection this process shares.

Layer: client door. `connect()` takes a lease on the process's lean connection to the server
(`mcpgym._client.lean`: one aiohttp pool and one `ClientSession` for every episode of the
process, however each was opened, of either protocol era); `disconnect()` gives it back. On an
anyio backend other than asyncio (aiohttp needs asyncio), or with `share=False`, it opens its own
`ClientDoor` (an `mcp.Client` on the SDK's httpx transport) instead, as `connect(url)` did
before #22. Either way the primitives are `SessionDoor`'s, so the wire is the same (rfcs/0019-doors.md).
"""

from __future__ import annotations

from typing import Any

from mcpgym._client.dispatch import DEFAULT_CONNECTIONS
from mcpgym._client.door import Door, Forwarding
from mcpgym._client.lean import Lease, lease
from mcpgym._client.mcp_door import ClientDoor


class HTTPDoor(Forwarding):
    """A streamable-HTTP server at `url` (see the module docstring). `lean` says which path the
    open door took; `share=False` always opens its own `mcp.Client`."""

    def __init__(
        self,
        url: str,
        *,
        mode: str = "auto",
        read_timeout: float | None = None,
        headers: dict[str, str] | None = None,
        connections: int = DEFAULT_CONNECTIONS,
        share: bool = True,
    ) -> None:
        self.url = url
        self.mode = mode
        self.read_timeout = read_timeout
        self.headers = dict(headers or {})
        self.connections = connections
        self.share = share
        self._lease: Lease | None = None
        self._door: Door | None = None

    def describe(self) -> tuple[str, str]:
        return "url", self.url

    @property
    def lean(self) -> bool:
        """True while connected over the shared lean connection."""
        return self._lease is not None

    @property
    def session(self) -> Any:
        """The MCP `ClientSession` this door sends on (shared with the process's other episodes
        on the lean path)."""
        return getattr(self._door, "session", None)

    @property
    def client(self) -> Any:
        """The `mcp.Client`, where the door opened its own (no lean path); else None."""
        return self._door.client if isinstance(self._door, ClientDoor) else None

    async def connect(self) -> None:
        if self.share:
            self._lease = await lease(
                self.url,
                mode=self.mode,
                read_timeout=self.read_timeout,
                headers=self.headers,
                connections=self.connections,
            )
        if self._lease is not None:
            assert self._lease.door is not None
            self._door = self._lease.door
            return
        own = ClientDoor(self.url, mode=self.mode, read_timeout=self.read_timeout, headers=self.headers)
        await own.connect()
        self._door = own

    async def disconnect(self) -> None:
        door, held, self._door, self._lease = self._door, self._lease, None, None
        if held is not None:
            await held.release()
        elif door is not None:
            await door.disconnect()

    @property
    def inner(self) -> Door:
        if self._door is None:
            raise RuntimeError("not connected: use `async with mcpgym.connect(...)`")
        return self._door
