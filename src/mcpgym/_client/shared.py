"""`SharedClient`: one MCP connection that every episode of a process shares, held open.

Layer: client facade over the doors. Imported by `__init__`, the vector env, the harness and
`mcpgym.trl`.

An episode is named by the id in each request's `_meta` (rfcs/0001), not by the connection,
so one connection can carry any number of concurrent episodes. `connect(url)` already shares
the process's lean connection to a server (`mcpgym._client.lean`); a `SharedClient` holds that
connection open across episodes (so it is not reopened when the last episode closes) and, for
other MCP targets, is the one connection they share:

- a streamable-HTTP URL of a 2026-07-28 server: a lease on the lean connection (the SDK's
  `ClientSession` on `HTTPDispatcher`: one aiohttp keep-alive pool, one POST per request,
  `Mcpgym-Episode` set per request from `_meta`). See rfcs/0014-lean-client.md. A
  handshake-era server gets one session (its id on every request), shared the same way.
- a stdio command or an in-memory server: one `mcp.Client` (one server process for all
  episodes over stdio), each episode an `AsyncEnv` borrowing it.
- a non-asyncio event loop, an in-process environment or a pool: nothing to share at this
  layer, so `connect()` returns exactly what `mcpgym.connect` would.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

from mcp.shared.exceptions import MCPError

from mcpgym._client.api import AsyncEnv
from mcpgym._client.dispatch import DEFAULT_CONNECTIONS
from mcpgym._client.door import Borrowed, Door
from mcpgym._client.http_door import HTTPDoor
from mcpgym._client.lean import running_loop
from mcpgym._client.mcp_door import ClientDoor
from mcpgym._targets.connect import Target, connect
from mcpgym._targets.spec import is_spec, open_spec
from mcpgym._targets.target import parse


class SharedClient:
    """One client for every episode of a process: `async with mcpgym.SharedClient(url) as shared:`.

    ```python
    async with mcpgym.SharedClient("http://127.0.0.1:8000/mcp") as shared:
        async with anyio.create_task_group() as tg:
            for seed in range(512):
                tg.start_soon(run_episode, shared.connect(), seed)  # each: `async with env: ...`
    ```

    `mcpgym.connect(shared)` is the same as `shared.connect()`; options given there are laid
    over this client's (headers merged, the others replaced) and get a connection of their own
    when they differ. Options are `mcpgym.connect`'s; `connections` bounds the keep-alive HTTP
    connections of the lean path (requests beyond it wait for a free one). Enter it in the task
    that outlives the episodes using it.
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
        self.door: Door | None = None
        """What the episodes share (None: nothing is shared, each `connect()` is independent)."""
        self._open = False
        self._loop: object | None = None

    def options(self) -> dict[str, Any]:
        """The `connect` options this client was made with (to open a like one elsewhere)."""
        return {"mode": self.mode, "read_timeout": self.read_timeout, "headers": self.headers or None}

    @property
    def lean(self) -> bool:
        """True when episodes ride the lean HTTP path (`HTTPDispatcher`)."""
        return isinstance(self.door, HTTPDoor) and self.door.lean

    def connect(self) -> AsyncEnv:
        """A new episode client over the shared connection (use it as `async with env:`)."""
        if not self._open:
            raise RuntimeError("use the SharedClient inside `async with` before connecting episodes to it")
        if (running := running_loop()) is not None and running is not self._loop:
            raise RuntimeError(
                "this SharedClient belongs to the event loop that opened it; open another one on this loop"
            )
        return self._connect(self.mode, self.read_timeout, self.headers)

    def _connect(self, mode: str, read_timeout: float | None, headers: dict[str, str]) -> AsyncEnv:
        same = (mode, read_timeout, headers) == (self.mode, self.read_timeout, self.headers)
        if isinstance(self.door, HTTPDoor):
            # Another lease on the lean connection this client holds (or, with other options,
            # on that connection's own twin).
            url = self.door.url
            return AsyncEnv(
                HTTPDoor(url, mode=mode, read_timeout=read_timeout, headers=headers, connections=self.connections)
            )
        if isinstance(self.door, ClientDoor) and same:
            return AsyncEnv(Borrowed(self.door))
        return connect(self.target, mode=mode, read_timeout=read_timeout, headers=headers or None)

    def __mcpgym_connect__(self, *, mode: str, read_timeout: float | None, headers: dict[str, str] | None) -> AsyncEnv:
        if not self._open:
            raise RuntimeError("use the SharedClient inside `async with` before connecting episodes to it")
        # What `mcpgym.connect(shared, ...)` was given goes over this client's own options.
        return self._connect(
            mode if mode != "auto" else self.mode,
            read_timeout if read_timeout is not None else self.read_timeout,
            {**self.headers, **(headers or {})},
        )

    async def __aenter__(self) -> Self:
        if is_spec(self.target):  # an mcpgym.yaml: what it names, with its token as a header
            self.target, headers = open_spec(self.target, self.headers)
            self.headers = headers or {}
        door = self._door()
        if door is not None:
            try:
                await door.connect()
            except* MCPError as group:
                # Raised inside the session's task group, which wraps it: hand back the error itself.
                error = group.exceptions[0]
                raise error from error.__cause__
            if isinstance(door, HTTPDoor) and not door.lean:
                await door.disconnect()  # not on asyncio: one `mcp.Client` per episode, as before
                door = None
        self.door, self._open, self._loop = door, True, running_loop()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        door, self.door, self._open = self.door, None, False
        if door is not None:
            await door.disconnect()

    def _door(self) -> HTTPDoor | ClientDoor | None:
        # `parse` reads the target (one grammar of targets); building a door does no I/O.
        parsed = parse(self.target)
        if parsed.form == "url":
            return HTTPDoor(
                parsed.value,
                mode=self.mode,
                read_timeout=self.read_timeout,
                headers=self.headers,
                connections=self.connections,
            )
        if parsed.form in ("command", "server"):
            return ClientDoor(parsed.value, mode=self.mode, read_timeout=self.read_timeout)
        return None  # in-process or a pool: each episode gets its own client, as from connect()
