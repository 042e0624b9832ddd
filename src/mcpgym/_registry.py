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

from mcpgym._environment import Environment
from mcpgym._episode import Episode, logger
from mcpgym._errors import INVALID_PARAMS, INVALID_REQUEST, MCPError
from mcpgym._protocol import ResetResult, new_episode_id
from mcpgym._recording import Recorder

EnvFactory = Callable[[], Environment]

_TRIM_AFTER = 64
"""Hand memory back to the OS when a burst of at least this many episodes has fully closed."""


def release_memory() -> None:
    """Collect cycles and return freed heap to the OS (glibc `malloc_trim`), so a server's RSS
    falls back after a burst of episodes instead of staying at its peak."""
    gc.collect()
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
        call_timeout: float | None = None,
    ) -> None:
        self.call_timeout = call_timeout
        self.factory = factory
        self.recorder = recorder
        self.max_episodes = max_episodes
        self.idle_timeout = idle_timeout
        self._episodes: dict[str, Episode] = {}
        self._high_water = 0

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
    ) -> ResetResult:
        """Start `episode_id` (replacing it if live) and close `previous`; `owner` binds the
        episode to a transport session so no other session can drive it."""
        for old in (previous, episode_id):
            if old is not None and self.get(old, owner, missing_ok=True) is not None:
                await self.close(old)
        episode = self._admit(episode_id)
        episode.owner = owner
        try:
            return await episode.start(seed, options)
        except BaseException:
            await self.close(episode_id)
            raise

    @overload
    def get(self, episode_id: str, owner: str | None = None) -> Episode: ...
    @overload
    def get(self, episode_id: str, owner: str | None = None, *, missing_ok: bool) -> Episode | None: ...
    def get(self, episode_id: str, owner: str | None = None, *, missing_ok: bool = False) -> Episode | None:
        """The live episode `episode_id`. One bound to another session is reported exactly like a
        missing one, so a guess learns nothing."""
        episode = self._episodes.get(episode_id)
        if episode is not None and episode.owner is not None and episode.owner != owner:
            episode = None
            missing_ok = False
        if episode is None and missing_ok and episode_id not in self._episodes:
            return None
        if episode is None:
            raise MCPError(
                INVALID_PARAMS,
                "Unknown episode: it was closed, expired after the idle timeout, or never reset on this "
                "server. Call reset() to start a new episode.",
            )
        return episode

    async def open_implicit(self) -> Episode:
        """An episode for a client that never called reset (a plain MCP agent)."""
        episode_id = new_episode_id()
        episode = self._admit(episode_id, implicit=True)
        try:
            await episode.start(None, None)
        except BaseException:
            await self.close(episode_id)
            raise
        return episode

    async def close(self, episode_id: str) -> None:
        episode = self._episodes.pop(episode_id, None)
        if episode is not None:
            await episode.close()
            if not self._episodes and self._high_water >= _TRIM_AFTER:
                self._high_water = 0
                release_memory()

    async def close_all(self) -> None:
        for episode_id in list(self._episodes):
            await self.close(episode_id)

    async def expire_idle(self, now: float | None = None) -> int:
        """Close every episode idle for longer than `idle_timeout`; returns how many."""
        if self.idle_timeout is None:
            return 0
        cutoff = (time.monotonic() if now is None else now) - self.idle_timeout
        stale = [eid for eid, ep in self._episodes.items() if ep.last_active < cutoff and not ep.busy]
        for episode_id in stale:
            logger.info("episode %s expired after %.0fs idle", episode_id, self.idle_timeout)
            await self.close(episode_id)
        return len(stale)

    async def run_expiry(self) -> None:
        """Expire idle episodes until cancelled (run inside the server's task group)."""
        if self.idle_timeout is None:
            return
        period = max(0.05, min(self.idle_timeout / 4, 30.0))
        while True:
            await anyio.sleep(period)
            await self.expire_idle()

    def _admit(self, episode_id: str, *, implicit: bool = False) -> Episode:
        limit = math.inf if self.max_episodes is None else self.max_episodes
        if len(self._episodes) >= limit:
            raise MCPError(
                INVALID_REQUEST,
                f"Server at capacity: {len(self._episodes)} live episodes (max_episodes={self.max_episodes}). "
                "Close finished episodes or retry later.",
            )
        episode = Episode(
            self.factory(), episode_id, recorder=self.recorder, implicit=implicit, call_timeout=self.call_timeout
        )
        self._episodes[episode_id] = episode
        self._high_water = max(self._high_water, len(self._episodes))
        return episode
