"""In-process door: the trainer calls the episode core directly.

Layer: client door. Imports only the episode core: no JSON-RPC, no streams, no serialisation
round trip. `reset`/`call` run the same `Episode` code the MCP server handlers run, so
validation, errors and result shapes are the server's own (rfcs/0002-in-process-mode.md).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Coroutine
from typing import Any

import anyio
import mcp_types as types

from mcpgym._core.protocol import ResetResult
from mcpgym._core.types import EpisodeState, ToolStep
from mcpgym._episode.catalog import Task
from mcpgym._episode.environment import Environment, resolve_factory
from mcpgym._episode.episode import Episode, _run_user, build, unknown_episode
from mcpgym._episode.host import Host
from mcpgym._episode.tools import tools_ready

_CLIENT = "_mcpgym_client"
"""Attribute naming the door an instance target belongs to (None once it was closed)."""


class InProcessDoor:
    """An environment class or `partial(Class, ...)` (a fresh instance per episode), or an
    instance (reused by every episode), driven directly. One episode at a time."""

    def __init__(self, env: type[Environment] | Environment | functools.partial[Any]) -> None:
        self._shared: Environment | None = env if isinstance(env, Environment) else None
        if self._shared is not None:
            self.env_cls: type[Environment] = type(self._shared)
        else:
            self.env_cls, self._factory = resolve_factory(env)
        self._tools: list[types.Tool] | None = (
            None  # read when first needed: a wrapped server's are learnt by starting it
        )
        self._episode: Episode | None = None
        self._host: Host | None = None
        self._host_scope: contextlib.AsyncExitStack | None = None
        # The shared instance is closed once, when the client closes (however often that is asked).
        self._closer = Episode(self._shared, "-") if self._shared is not None else None

    def describe(self) -> tuple[str, str]:
        return "environment", self.env_cls.__qualname__

    async def connect(self) -> None:
        await self._read_tools()
        # `async with connect(Env)` hosts what episodes `hold()` (in this task's own task group).
        stack = contextlib.AsyncExitStack()
        self._host = Host(await stack.enter_async_context(anyio.create_task_group()))
        self._host_scope = stack
        if self._shared is None:
            return
        # One client per instance: a second one would reset the first one's episode under it,
        # and each would close() the instance (close runs exactly once, when its client leaves).
        claimed = getattr(self._shared, _CLIENT, self)
        if claimed is not self:
            await self._release_host()
            why = "is connected to another client" if claimed is not None else "was closed when its client left"
            raise RuntimeError(
                f"This {self.env_cls.__name__} instance {why}: an instance serves one client. Pass the class "
                "(or functools.partial(Class, ...)) to get a fresh instance per episode."
            )
        object.__setattr__(self._shared, _CLIENT, self)

    async def disconnect(self) -> None:
        try:
            await self._drop_episode()
            if self._closer is not None and getattr(self._shared, _CLIENT, None) is self:
                await self._closer.close()
                object.__setattr__(self._shared, _CLIENT, None)
        finally:
            await self._release_host()

    async def _release_host(self) -> None:
        stack, self._host_scope = self._host_scope, None
        if stack is not None:
            assert self._host is not None
            await self._host.aclose()  # what episodes held is stopped before the client returns
            await stack.aclose()
        self._host = None

    async def reset(
        self, episode_id: str, seed: int | None, options: dict[str, Any] | None, previous: str | None
    ) -> ResetResult:
        await self._drop_episode()
        env = self._shared if self._shared is not None else build(self._factory)
        episode = Episode(env, episode_id, owns_env=self._shared is None, host=self._host)
        self._episode = episode
        try:
            return await episode.start(seed, options, self._task_list)
        except BaseException:
            await self._drop_episode()  # as the server does: a failed reset leaves nothing open
            raise

    def call(self, episode_id: str, name: str, arguments: dict[str, Any]) -> Coroutine[Any, Any, ToolStep]:
        # The episode's own coroutine, handed back rather than awaited: one frame less per step.
        return self._get(episode_id).step(name, arguments)

    async def _read_tools(self) -> list[types.Tool]:
        if self._tools is None:
            await tools_ready(self.env_cls)  # (in a worker thread when they are not known yet)
            self._tools = [spec.definition for spec in self.env_cls.__mcpgym_tools__.values()]
        return self._tools

    async def list_tools(self) -> list[types.Tool]:
        # Also before connect(), as a client used without `async with` may ask.
        return list(await self._read_tools())

    async def state(self, episode_id: str) -> EpisodeState:
        return self._get(episode_id).state()

    async def close(self, episode_id: str) -> EpisodeState | None:
        episode = self._episode
        if episode is None or episode.id != episode_id:
            return None
        await self._drop_episode()
        return episode.final

    async def list_tasks(self, limit: int | None, prompts: bool) -> list[Task]:
        # The catalog of an instance built for the purpose (never the live episode's), or the
        # shared instance's own (read, never closed here).
        instance = self._shared if self._shared is not None else build(self._factory)
        try:
            tasks = list(await anyio.to_thread.run_sync(instance.catalog))[:limit]
        finally:
            if self._shared is None:
                await _run_user(instance.close)
        # As over MCP, where each prompt's text costs a `prompts/get` that `prompts=False` skips.
        return tasks if prompts else [task.model_copy(update={"prompt": ""}) for task in tasks]

    async def _task_list(self) -> list[Task]:
        return await self.list_tasks(None, prompts=False)

    async def _drop_episode(self) -> None:
        episode, self._episode = self._episode, None
        if episode is not None:
            await episode.close()

    def _get(self, episode_id: str) -> Episode:
        if self._episode is None or self._episode.id != episode_id:
            raise unknown_episode()
        return self._episode
