"""`SyncEnv`: the blocking twin of `AsyncEnv`, for trainers without an event loop.

Layer: one thin layer over the async client. Every call is forwarded through an anyio
blocking portal (an event loop in a helper thread that lives exactly as long as the
`with` block); there is no second implementation of anything.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager, AbstractContextManager, ExitStack
from types import TracebackType
from typing import Any, Generic, Self, TypeVar, overload

import mcp_types as types
from anyio.from_thread import BlockingPortal, start_blocking_portal

from mcpgym._client.api import AsyncEnv
from mcpgym._core.types import CallToolAction, EpisodeState, ListToolsAction, StepResult
from mcpgym._targets.connect import Target, connect

AsyncT = TypeVar("AsyncT", bound=AbstractAsyncContextManager[Any])


class PortalTwin(AbstractContextManager[Any], Generic[AsyncT]):
    """A blocking twin of an async context manager: `with` runs it in a blocking portal (an event
    loop in a helper thread that lives exactly as long as the block); calls go through `portal`."""

    def __init__(self, env: AsyncT) -> None:
        self.env = env
        self._stack = ExitStack()
        self._portal: BlockingPortal | None = None

    def __enter__(self) -> Self:
        with ExitStack() as stack:
            self._portal = stack.enter_context(start_blocking_portal())
            stack.enter_context(self._portal.wrap_async_context_manager(self.env))
            self._stack = stack.pop_all()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        stack, self._stack = self._stack, ExitStack()
        self._portal = None
        stack.__exit__(exc_type, exc, tb)

    def close(self) -> None:
        """End the episode and the connection now, as leaving the `with` block does (Gymnasium's
        `Env.close()`); closing again, or leaving the block afterwards, does nothing."""
        self.__exit__(None, None, None)

    @property
    def portal(self) -> BlockingPortal:
        if self._portal is None:
            raise RuntimeError(f"use {type(self).__name__} inside a `with` block")
        return self._portal


class SyncEnv(PortalTwin[AsyncEnv]):
    """Blocking environment client: `with mcpgym.connect_sync(target) as env: env.reset()`."""

    @property
    def episode_id(self) -> str | None:
        return self.env.episode_id

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> StepResult[Any]:
        return self.portal.call(self.env.reset, seed, options)

    @overload
    def step(self, action: CallToolAction) -> StepResult[types.CallToolResult]: ...
    @overload
    def step(self, action: ListToolsAction) -> StepResult[list[types.Tool]]: ...
    def step(
        self, action: CallToolAction | ListToolsAction
    ) -> StepResult[types.CallToolResult] | StepResult[list[types.Tool]]:
        return self.portal.call(self.env.step, action)

    def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> StepResult[types.CallToolResult]:
        return self.portal.call(self.env.call_tool, name, arguments)

    def list_tools(self) -> list[types.Tool]:
        return self.portal.call(self.env.list_tools)

    def state(self) -> EpisodeState:
        return self.portal.call(self.env.state)

    def close_episode(self) -> EpisodeState | None:
        return self.portal.call(self.env.close_episode)


def connect_sync(
    target: Target,
    *,
    mode: str = "auto",
    read_timeout: float | None = None,
    headers: dict[str, str] | None = None,
) -> SyncEnv:
    """The blocking twin of `connect` (same keywords): `with mcpgym.connect_sync(target) as env: ...`."""
    return SyncEnv(connect(target, mode=mode, read_timeout=read_timeout, headers=headers))
