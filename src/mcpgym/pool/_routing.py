"""`PoolDoor`: a door made of doors, spreading episodes over a pool's replicas; `PoolEnv` is
the `AsyncEnv` over it.

Layer: client door composed of doors. Each replica is reached through an ordinary `HTTPDoor`
(so the wire is exactly the single-server one: episode id in `_meta` and the `Mcpgym-Episode`
header, and the replica's lean connection is the one this process shares); this module only
decides which replica a request goes to.

Why each replica's door is held by a task of its own: where a replica has no lean path, its
door is an `mcp.Client`, which runs its transport in a task group entered by whoever opened it.
Opened in the caller's task, a replica dying would cancel the caller (and, inside
`anyio.fail_after`, opening it lazily would leave a cancel scope open across the caller's
scopes). Held by a child task of this door's task group, a dead replica instead fails the
pending request with `MCPError("Connection closed")`, which we turn into a clear truncation
error, and the holder task ends quietly after marking the replica down.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import anyio
import mcp_types as types
from anyio.abc import TaskGroup, TaskStatus
from mcp_types import CONNECTION_CLOSED

from mcpgym._client.api import AsyncEnv
from mcpgym._client.http_door import HTTPDoor
from mcpgym._client.mcp_door import _TRANSPORT_ERRORS
from mcpgym._core.errors import AT_CAPACITY, MCPError
from mcpgym._core.protocol import ResetResult
from mcpgym._core.types import EpisodeState, ToolStep
from mcpgym._episode.catalog import Task
from mcpgym._episode.episode import unknown_episode
from mcpgym.pool._replicas import Pool, Replica

log = logging.getLogger("mcpgym.pool")
T = TypeVar("T")


@dataclass(frozen=True)
class EpisodeHandle:
    """Where an episode lives: its client-minted id and the replica that holds it."""

    episode_id: str
    url: str


@dataclass
class _Link:
    """An open connection to one replica, held by its own task until `stop` is set."""

    replica: Replica
    door: HTTPDoor
    stop: anyio.Event


class _ReplicaLost(Exception):
    """A request failed because the replica's connection is gone (not because it said no)."""


class PoolEnv(AsyncEnv):
    """One client of a `Pool`: one episode at a time, like any `AsyncEnv` (it is one, over a
    `PoolDoor`).

    `reset()` reserves a slot on the live replica with the fewest episodes and starts the
    episode there; `step` / `call_tool` / `state` / `close_episode` go straight to that
    replica (`handle` says which). When the replica dies the episode is truncated: the call
    raises `MCPError` saying so, and the next `reset()` lands on a live replica.
    """

    door: PoolDoor

    def __init__(
        self,
        pool: Pool,
        *,
        mode: str | None = None,
        read_timeout: float | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(PoolDoor(pool, mode=mode, read_timeout=read_timeout, headers=headers))

    @property
    def pool(self) -> Pool:
        return self.door.pool

    @property
    def handle(self) -> EpisodeHandle | None:
        """The current episode's id and replica URL (None before the first reset)."""
        return self.door.handle(self.episode_id)


class PoolDoor:
    """The door primitives over a pool: each episode on the replica that holds it."""

    def __init__(
        self,
        pool: Pool,
        *,
        mode: str | None = None,
        read_timeout: float | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.pool = pool
        self.mode = mode or pool.mode
        self.read_timeout = read_timeout if read_timeout is not None else pool.read_timeout
        self.headers = {**pool.headers, **(headers or {})}
        self._links: dict[int, _Link] = {}  # id(replica) -> its open connection
        self._connecting: dict[int, anyio.Lock] = {}  # id(replica) -> held while its link opens
        self._held: dict[str, Replica] = {}  # episode id -> the replica that holds it
        self._lost: dict[str, str] = {}  # episode id -> why it was truncated
        self._tg: TaskGroup | None = None
        self._probes: TaskGroup | None = None  # the pool's re-probes of down replicas, for our resets
        self._stack: AsyncExitStack | None = None

    def handle(self, episode_id: str | None) -> EpisodeHandle | None:
        """Where `episode_id` lives (None when this door holds no such episode)."""
        replica = self._held.get(episode_id or "")
        return None if replica is None or episode_id is None else EpisodeHandle(episode_id, replica.url)

    def describe(self) -> tuple[str, str]:
        return "pool", ", ".join(r.url for r in self.pool.replicas)

    # -- connection lifecycle ------------------------------------------------------------------

    async def connect(self) -> None:
        # First, while nothing is open: a refresh cancelled or failing after the task group was
        # detached below would leave its cancel scope entered on the caller's task. (So it
        # skips down replicas: their probes need `_probes`; our first reset starts them.)
        await self.pool.refresh()
        async with AsyncExitStack() as stack:
            self._tg = await stack.enter_async_context(anyio.create_task_group())
            # A group of its own, cancelled on exit: a probe of a hung replica would otherwise
            # hold our close for `health_timeout` (the holders, in `_tg`, end when stopped).
            self._probes = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(self._probes.cancel_scope.cancel)
            stack.callback(self._stop_links)  # runs first on exit: the holders end, then the groups
            self._stack = stack.pop_all()

    async def disconnect(self) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()
        self._tg = self._probes = None

    def _stop_links(self) -> None:
        for link in list(self._links.values()):
            link.stop.set()

    async def _link(self, replica: Replica) -> _Link:
        link = self._links.get(id(replica))
        if link is not None:
            return link
        if self._tg is None:
            raise RuntimeError("not connected: use `async with pool.connect() as env:`")
        # One connection per replica: concurrent first requests wait for the one being opened
        # (a second holder would replace the first in `_links`, which then never stops).
        lock = self._connecting.setdefault(id(replica), anyio.Lock())
        waited = lock.locked()
        async with lock:
            link = self._links.get(id(replica))
            if link is not None:
                return link
            if waited and not replica.live:  # the attempt we waited for failed: no second one
                raise _ReplicaLost(replica.error or "could not connect")
            try:
                started: _Link = await self._tg.start(self._hold, replica)
            except* (MCPError, *_TRANSPORT_ERRORS) as group:
                reason = f"could not connect: {group.exceptions[0]}"
                self.pool.mark_down(replica, reason)
                raise _ReplicaLost(reason) from group
            return started

    async def _hold(self, replica: Replica, *, task_status: TaskStatus[_Link]) -> None:
        """Open a connection to `replica` and keep it until stopped or broken."""
        door = HTTPDoor(replica.url, mode=self.mode, read_timeout=self.read_timeout, headers=self.headers)
        link: _Link | None = None
        try:
            await door.connect()
            try:
                link = _Link(replica, door, anyio.Event())
                self._links[id(replica)] = link
                task_status.started(link)
                await link.stop.wait()
            finally:
                await door.disconnect()
        except MCPError as exc:
            if link is None:
                raise  # before `started`: tg.start() re-raises it to the caller, who reroutes
            # The connection broke under us. Requests in flight have already failed with
            # "Connection closed" (and were reported as truncations); record why, for `describe`.
            self.pool.mark_down(replica, str(exc))
            log.warning("mcpgym.pool: replica %s is down: %s", replica.url, exc)
        finally:
            if link is not None and self._links.get(id(replica)) is link:
                del self._links[id(replica)]

    @contextlib.contextmanager
    def _on_replica(self, replica: Replica) -> Iterator[None]:
        """Turn a transport failure of one replica into `_ReplicaLost` (and forget its link)."""
        try:
            yield
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise  # the replica answered: unknown episode, capacity, … are the caller's
            self._drop(replica, str(exc))
            raise _ReplicaLost(str(exc)) from exc
        except _TRANSPORT_ERRORS as exc:
            self._drop(replica, f"{type(exc).__name__}: {exc}")
            raise _ReplicaLost(f"{type(exc).__name__}: {exc}") from exc

    def _drop(self, replica: Replica, reason: str) -> None:
        self.pool.mark_down(replica, reason)
        if (link := self._links.pop(id(replica), None)) is not None:
            link.stop.set()  # its holder exits (the broken client's own error is logged there)

    # -- the primitives -----------------------------------------------------------------------

    async def reset(
        self, episode_id: str, seed: int | None, options: dict[str, Any] | None, previous: str | None
    ) -> ResetResult:
        try:
            return await self._route_reset(episode_id, seed, options, previous)
        except BaseException:
            if previous is not None:  # a failed reset ends the previous episode too (AsyncEnv.reset)
                with anyio.CancelScope(shield=True):
                    await self._forget(previous, closed=False)
            raise

    async def _route_reset(
        self, episode_id: str, seed: int | None, options: dict[str, Any] | None, previous: str | None
    ) -> ResetResult:
        old = self._held.get(previous) if previous is not None else None
        tried: list[Replica] = []
        while True:
            # raises once nothing live is left; down replicas are re-probed without holding us up
            replica = await self.pool.choose(exclude=tried, background=self._probes)
            tried.append(replica)
            # Same replica: it closes the previous episode in the same round trip.
            same = old is replica
            try:
                result = await self._reset_on(replica, episode_id, seed, options, previous if same else None)
            except _ReplicaLost:
                continue  # never started there: try the next live replica
            except MCPError as exc:
                self.pool.release(replica)
                if exc.code != AT_CAPACITY:
                    raise
                self.pool.mark_full(replica)
                continue
            except BaseException:
                self.pool.release(replica)
                raise
            break
        self._held[episode_id] = replica
        if previous is not None:
            await self._forget(previous, closed=same)
        return result

    async def _reset_on(
        self,
        replica: Replica,
        episode_id: str,
        seed: int | None,
        options: dict[str, Any] | None,
        previous: str | None,
    ) -> ResetResult:
        link = await self._link(replica)
        with self._on_replica(replica):
            return await link.door.reset(episode_id, seed, options, previous)

    async def call(self, episode_id: str, name: str, arguments: dict[str, Any]) -> ToolStep:
        replica, link = await self._route(episode_id)
        with self._truncating(episode_id, replica), self._on_replica(replica):
            return await link.door.call(episode_id, name, arguments)

    async def list_tools(self) -> list[types.Tool]:
        return await self._on_any(lambda door: door.list_tools())

    async def list_tasks(self, limit: int | None, prompts: bool) -> list[Task]:
        # Every replica serves the same environment, so any live one has the catalog.
        return await self._on_any(lambda door: door.list_tasks(limit, prompts))

    async def _on_any(self, request: Callable[[HTTPDoor], Awaitable[T]]) -> T:
        """A request that belongs to no episode, on the replica of a live episode or any live one."""
        replica = next(iter(self._held.values()), None) or self.pool.any_live()
        try:
            link = await self._link(replica)
            with self._on_replica(replica):
                return await request(link.door)
        except _ReplicaLost as exc:
            raise MCPError(CONNECTION_CLOSED, f"Replica {replica.url} is unreachable ({exc}); try again") from exc

    async def state(self, episode_id: str) -> EpisodeState:
        replica, link = await self._route(episode_id)
        with self._truncating(episode_id, replica), self._on_replica(replica):
            return await link.door.state(episode_id)

    async def close(self, episode_id: str) -> EpisodeState | None:
        return await self._forget(episode_id, closed=False)

    # -- routing ------------------------------------------------------------------------------

    async def _route(self, episode_id: str) -> tuple[Replica, _Link]:
        replica = self._held.get(episode_id)
        if replica is None:
            reason = self._lost.get(episode_id)
            if reason is None:  # never ours (or long closed): what any server says of such an id
                raise unknown_episode()
            message = f"Episode {episode_id} is over: {reason}. Call reset() to start a new one."
            raise MCPError(CONNECTION_CLOSED, message)
        link = self._links.get(id(replica))
        if link is None:  # its connection broke earlier (found by another request): same verdict
            self._truncate(episode_id, replica, replica.error or "the connection to its replica broke")
        return replica, link

    @contextlib.contextmanager
    def _truncating(self, episode_id: str, replica: Replica) -> Iterator[None]:
        try:
            yield
        except _ReplicaLost as exc:
            self._truncate(episode_id, replica, str(exc))

    def _truncate(self, episode_id: str, replica: Replica, cause: str) -> NoReturn:
        """The episode died with its replica: record it and raise the error the caller sees."""
        self._held.pop(episode_id, None)
        reason = f"truncated: its replica {replica.url} is unreachable ({cause})"
        self._lost[episode_id] = reason
        message = f"Episode {episode_id} was {reason}. Call reset() to start a new episode on a live replica."
        raise MCPError(CONNECTION_CLOSED, message)

    async def _forget(self, episode_id: str, *, closed: bool) -> EpisodeState | None:
        """End our bookkeeping of an episode; close it on its replica unless that already happened.

        An episode whose replica is unreachable needs no closing (it died with the replica), so
        a failure here only marks the replica down: the caller wanted the episode gone, and it is.
        """
        self._lost.pop(episode_id, None)
        replica = self._held.pop(episode_id, None)
        if replica is None:
            return None
        self.pool.release(replica)
        if closed or (link := self._links.get(id(replica))) is None:
            return None
        with contextlib.suppress(_ReplicaLost), self._on_replica(replica):  # _on_replica marked it down
            return await link.door.close(episode_id)
        return None
