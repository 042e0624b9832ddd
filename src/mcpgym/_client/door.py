"""`Door`: what an `AsyncEnv` drives — the primitives of one way to reach an environment.

Layer: client contract. Imports only the protocol-free core and the episode core's catalog
type; every door (in-process, an MCP session over any transport, the lean HTTP connection a
process shares, a pool made of doors) implements it, and `AsyncEnv` is the one class above them
(rfcs/0019-doors.md).

The contract, written once:

- A door holds no episode of its own. Every primitive that touches an episode takes its id,
  which `AsyncEnv` mints (before the first request, so a router can pin it) and keeps; so one
  door may carry any number of concurrent episodes, each `AsyncEnv` naming its own.
- `connect()` / `disconnect()` bracket the door's use by one `AsyncEnv`: open a connection,
  take a lease on a shared one, or nothing. `disconnect()` after a failed `connect()` is not
  called.
- `reset(episode_id, seed, options, previous)` starts `episode_id` (ending `previous`, if any,
  in the same round trip where the door can); a failed reset leaves nothing open.
- `call(episode_id, name, arguments)` is one step. A tool the environment lacks is the counted
  `is_error` step every door returns (`info["unknown_tool"]`), not an exception. It may return
  the awaitable of the work itself (the in-process door hands back the episode's coroutine: one
  frame less on the hot path), so callers only `await` it.
- `state(episode_id)`; `close(episode_id)` returns the final state (None when there was nothing
  to close, or the door cannot say); `list_tools()`; `list_tasks(limit, prompts)` reads the task
  catalog (rfcs/0010).
- Failures are `MCPError`s (protocol errors, with the server's code and message) or the
  transport's own exceptions (`OSError`, a broken stream), which `AsyncEnv` turns into one
  `MCPError(CONNECTION_CLOSED)` naming `describe()`: errors are mapped once, above every door.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol, runtime_checkable

import mcp_types as types

from mcpgym._core.protocol import ResetResult
from mcpgym._core.types import EpisodeState, ToolStep
from mcpgym._episode.catalog import Task


@runtime_checkable
class Door(Protocol):
    """One way to reach an environment (see the module docstring for the contract)."""

    async def connect(self) -> None: ...
    async def disconnect(self) -> None: ...
    async def reset(
        self, episode_id: str, seed: int | None, options: dict[str, Any] | None, previous: str | None
    ) -> ResetResult: ...
    def call(self, episode_id: str, name: str, arguments: dict[str, Any]) -> Awaitable[ToolStep]: ...
    async def list_tools(self) -> list[types.Tool]: ...
    async def state(self, episode_id: str) -> EpisodeState: ...
    async def close(self, episode_id: str) -> EpisodeState | None: ...
    async def list_tasks(self, limit: int | None, prompts: bool) -> list[Task]: ...
    def describe(self) -> tuple[str, str]:
        """What the door reaches, for error messages and their data: ("url", URL), ("command",
        its command line), ("server", a server object's repr) or ("environment", a class name)."""
        ...


class Forwarding:
    """The primitives of another door, `inner` (what a door that only opens and closes
    something, and then speaks through it, inherits)."""

    @property
    def inner(self) -> Door:
        raise NotImplementedError

    async def reset(
        self, episode_id: str, seed: int | None, options: dict[str, Any] | None, previous: str | None
    ) -> ResetResult:
        return await self.inner.reset(episode_id, seed, options, previous)

    def call(self, episode_id: str, name: str, arguments: dict[str, Any]) -> Awaitable[ToolStep]:
        return self.inner.call(episode_id, name, arguments)

    async def list_tools(self) -> list[types.Tool]:
        return await self.inner.list_tools()

    async def state(self, episode_id: str) -> EpisodeState:
        return await self.inner.state(episode_id)

    async def close(self, episode_id: str) -> EpisodeState | None:
        return await self.inner.close(episode_id)

    async def list_tasks(self, limit: int | None, prompts: bool) -> list[Task]:
        return await self.inner.list_tasks(limit, prompts)


class Borrowed(Forwarding):
    """A door another owner keeps open (a `SharedClient`'s): its primitives, and a
    `connect()` / `disconnect()` that leave the connection alone."""

    def __init__(self, door: Door) -> None:
        self.door = door

    @property
    def inner(self) -> Door:
        return self.door

    async def connect(self) -> None:
        pass

    async def disconnect(self) -> None:
        pass

    def describe(self) -> tuple[str, str]:
        return self.door.describe()
