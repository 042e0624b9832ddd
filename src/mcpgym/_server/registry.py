"""The server's episodes: explicit ones named by the client, implicit ones tied to a connection.

Layer: above the episode core, below transports. One registry per served environment; it
owns creation (capacity), lookup, idle expiry and shutdown, so no transport keeps episode
state of its own.
"""

from __future__ import annotations

import ctypes
import gc
import math
import time
from collections.abc import Callable
from typing import Any, overload

import anyio

from mcpgym._core.errors import AT_CAPACITY, INVALID_PARAMS, MCPError
from mcpgym._core.protocol import ResetResult, new_episode_id
from mcpgym._core.types import EpisodeState
from mcpgym._episode.config import CALL_TIMEOUT
from mcpgym._episode.environment import Environment
from mcpgym._episode.episode import Episode, TaskList, build, logger, unknown_episode
from mcpgym._episode.host import Host
from mcpgym._recording.recording import Recorder

EnvFactory = Callable[[], Environment]

_TRIM_AFTER = 64
"""Hand memory back to the OS when a burst of at least this many episodes has fully closed."""


async def release_memory() -> None:
    """Collect cycles and return freed heap to the OS (glibc `malloc_trim`), so a server's RSS
    falls back after a burst of episodes instead of staying at its peak.

    The collection runs here, on the event loop: it holds the GIL throughout, so a worker
    thread would not take it off the loop, only make its pause land at a random point. The
    trim is a C call made through ctypes, which releases the GIL: that one goes to a thread."""
    gc.collect()
    await anyio.to_thread.run_sync(_trim_heap)


def _trim_heap() -> None:
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: nothing to trim, and nothing is lost


class EpisodeRegistry:
    def __init__(
        self,
        factory: EnvFactory,
        *,
        max_episodes: int | None = 10_000,
        idle_timeout: float | None = 900.0,
        recorder: Recorder | None = None,
        call_timeout: float | None = CALL_TIMEOUT,
    ) -> None:
        self.call_timeout = call_timeout
        self.factory = factory
        self.recorder = recorder
        self.max_episodes = max_episodes
        self.idle_timeout = idle_timeout
        self._episodes: dict[str, Episode] = {}
        self._owned: dict[str, set[str]] = {}
        """Live episode ids per owning transport session, so a session's end closes exactly its own."""
        self._high_water = 0
        self.tasks: TaskList | None = None
        """The catalog, for the error of a reset on an unknown `task_id` (set by the server)."""
        self.session_idle_timeout: float | None = None
        """How long the HTTP transport keeps an idle session (set by the HTTP app): an implicit
        episode bound to a session idle that long can no longer be reached, so it expires."""
        self.on_close: Callable[[Episode], None] | None = None
        """Told of every episode once it closed (the curriculum counts its outcome)."""
        self.hosts: list[Host] = []
        """The hosts serving this registry (one per entered server lifespan); an episode uses its
        caller's (a connection's lifespan ends with that connection), else the latest."""

    def __len__(self) -> int:
        return len(self._episodes)

    async def reset(
        self,
        episode_id: str,
        seed: int | None,
        options: dict[str, Any] | None,
        previous: str | None = None,
        *,
        owner: str | None = None,
        host: Host | None = None,
        task_id: str | None = None,
    ) -> ResetResult:
        """Start `episode_id` (replacing it if live) and close `previous`; `owner` binds the
        episode to a transport session so no other session can drive it; `host`: the caller's
        (its connection's lifespan), else the latest.

        The episodes it replaces never count against `max_episodes`, and they are closed
        whether or not the new one starts (a reset says the caller is done with them): a
        failed reset leaves the caller with no episode, never a half-closed one."""
        # Claim the id before any await: concurrent resets of one id then each replace the
        # instance before them, and every instance they made is closed.
        replaced = self._episodes.get(episode_id)
        if replaced is not None and replaced.owner not in (None, owner):
            raise MCPError(INVALID_PARAMS, "That episode id is taken: mint a fresh one for a new episode.")
        retired = [self._remove(episode_id)]
        if previous is not None and previous != episode_id and self.get(previous, owner, missing_ok=True):
            retired.append(self._remove(previous))  # out before admission: it frees its place
        try:
            episode = self._admit(episode_id, owner=owner, host=host)
        except BaseException:
            await self._close_each(retired)
            raise
        episode.task_id = task_id
        try:  # admitted: from here any failure or cancellation retires it, never orphans it
            await self._close_each(retired)
            return await episode.start(seed, options, self.tasks)
        except BaseException:
            await self._retire(episode)
            raise

    @overload
    def get(self, episode_id: str, owner: str | None = None) -> Episode: ...
    @overload
    def get(self, episode_id: str, owner: str | None = None, *, missing_ok: bool) -> Episode | None: ...
    def get(self, episode_id: str, owner: str | None = None, *, missing_ok: bool = False) -> Episode | None:
        """The live episode `episode_id`. One bound to another session is treated exactly like a
        missing one, so a guess learns nothing."""
        episode = self._episodes.get(episode_id)
        if episode is not None and episode.owner not in (None, owner):
            episode = None
        if episode is None and not missing_ok:
            raise unknown_episode()
        return episode

    async def open_implicit(
        self,
        seed: int | None = None,
        options: dict[str, Any] | None = None,
        host: Host | None = None,
        task_id: str | None = None,
        *,
        owner: str | None = None,
    ) -> Episode:
        """An episode for a client that never called reset (a plain MCP agent), optionally
        started on a given task; `owner`: the HTTP session it lives and ends with."""
        episode = self._admit(new_episode_id(), implicit=True, owner=owner, host=host)
        episode.task_id = task_id
        try:
            await episode.start(seed, options)
        except BaseException:
            await self._retire(episode)
            raise
        return episode

    async def close(self, episode_id: str, owner: str | None = None) -> EpisodeState | None:
        """Close `episode_id` if it is live and this caller's (else: nothing to do); its final state."""
        episode = self.get(episode_id, owner, missing_ok=True)
        if episode is None:
            return None
        await self._retire(episode)
        return episode.final

    async def close_owned(self, owner: str) -> None:
        """Close every episode bound to the transport session `owner` (the session ended)."""
        for episode_id in list(self._owned.get(owner, ())):
            await self.close(episode_id, owner)

    async def close_all(self) -> None:
        async with anyio.create_task_group() as tg:
            for episode in list(self._episodes.values()):
                tg.start_soon(self._retire, episode)

    async def expire_idle(self, now: float | None = None) -> int:
        """Close every explicit episode idle for longer than `idle_timeout`; returns how many.

        Implicit episodes (agents that never reset) live as long as their connection or stdio
        process instead: expiring one would silently hand the agent a fresh episode. One bound
        to an HTTP session goes once idle for `session_idle_timeout`, as its session has then."""
        clock = time.monotonic() if now is None else now
        expired = 0
        for episode in list(self._episodes.values()):
            limit = self._idle_limit(episode)
            # Checked at the moment of closing: an earlier close may have let this one get busy.
            if limit is None or episode.busy or episode.last_active >= clock - limit:
                continue
            logger.info("episode %s expired after %.0fs idle", episode.id, limit)
            await self._retire(episode)
            expired += 1
        return expired

    def _idle_limit(self, episode: Episode) -> float | None:
        if not episode.implicit:
            return self.idle_timeout
        return self.session_idle_timeout if episode.owner is not None else None

    async def _retire(self, episode: Episode) -> None:
        if self._episodes.get(episode.id) is episode:
            self._remove(episode.id)
        await self._close_one(episode)
        if not self._episodes and self._high_water >= _TRIM_AFTER:
            self._high_water = 0
            await release_memory()

    async def run_expiry(self) -> None:
        """Expire idle episodes until cancelled (run inside the server's task group)."""
        limits = [t for t in (self.idle_timeout, self.session_idle_timeout) if t is not None]
        if not limits:
            return
        period = max(0.05, min(min(limits) / 4, 30.0))
        while True:
            await anyio.sleep(period)
            await self.expire_idle()

    def _remove(self, episode_id: str) -> Episode | None:
        """Take `episode_id` out of the registry (and out of its owner's set); the caller closes it."""
        episode = self._episodes.pop(episode_id, None)
        if episode is not None and episode.owner is not None:
            owned = self._owned.get(episode.owner)
            if owned is not None:
                owned.discard(episode_id)
                if not owned:
                    del self._owned[episode.owner]
        return episode

    def _admit(
        self, episode_id: str, *, implicit: bool = False, owner: str | None = None, host: Host | None = None
    ) -> Episode:
        limit = math.inf if self.max_episodes is None else self.max_episodes
        if len(self._episodes) >= limit:
            raise MCPError(
                AT_CAPACITY,
                f"Server at capacity: {len(self._episodes)} live episodes (max_episodes={self.max_episodes}). "
                "Close finished episodes or retry later.",
                {"live_episodes": len(self._episodes), "max_episodes": self.max_episodes},
            )
        episode = Episode(
            build(self.factory),
            episode_id,
            recorder=self.recorder,
            implicit=implicit,
            call_timeout=self.call_timeout,
            time_async_tools=True,
            host=host or (self.hosts[-1] if self.hosts else None),
        )
        episode.owner = owner
        self._episodes[episode_id] = episode
        if owner is not None:
            self._owned.setdefault(owner, set()).add(episode_id)
        self._high_water = max(self._high_water, len(self._episodes))
        return episode

    async def _close_each(self, episodes: list[Episode | None]) -> None:
        for episode in episodes:
            if episode is not None:
                await self._close_one(episode)

    async def _close_one(self, episode: Episode) -> None:
        already = episode.closed  # closing is idempotent; counting it must be too
        await episode.close()
        if self.on_close is not None and not already:
            try:
                self.on_close(episode)
            except Exception:  # counting an outcome must never cost a close
                logger.exception("counting episode %s for the curriculum failed", episode.id)
