"""`AsyncEnv`: the Gym-style client API, shared by every door (in-process, in-memory, stdio, HTTP).

Layer: client core. Holds everything that is not I/O (episode handle, action dispatch); a door
implements the primitives at the bottom. That split is why the three targets behave identically.
"""

from __future__ import annotations

import abc
import contextlib
from types import TracebackType
from typing import Any, Self, overload

import anyio
import mcp_types as types

from mcpgym._core.errors import MCPError
from mcpgym._core.protocol import ResetResult, new_episode_id
from mcpgym._core.types import Action, CallToolAction, EpisodeState, ListToolsAction, StepResult, ToolStep
from mcpgym._episode.config import CLOSE_WAIT


class AsyncEnv(abc.ABC):
    """An environment as an RL loop sees it. Get one from `mcpgym.connect(target)`.

    ```python
    async with mcpgym.connect(Echo) as env:
        first = await env.reset(seed=0)
        result = await env.step(CallToolAction(tool_name="echo_message", arguments={"message": "hi"}))
        result.observation, result.reward, result.done
    ```
    """

    episode_id: str | None = None
    """The current episode's id (minted here, before the first request, so it is routable)."""

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> StepResult[Any]:
        """Start a new episode (closing the previous one) and return its first observation
        (whatever JSON-compatible value the environment's `reset` returned).

        The previous episode ends even when this reset fails (at capacity, the environment's
        `reset` raised, the server is gone): then `episode_id` is None and `step` refuses
        until a reset succeeds."""
        episode_id, previous = new_episode_id(), self.episode_id
        self.episode_id = None
        try:
            result = await self._reset(episode_id, seed, options, previous)
        except anyio.get_cancelled_exc_class():
            # The server may have admitted the episode before we gave up: close it by the id we
            # minted rather than leave it to the idle timeout. Bounded, and a failure is moot.
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_WAIT):
                with contextlib.suppress(MCPError):
                    await self._close(episode_id)
            raise
        self.episode_id = episode_id
        return StepResult[Any](observation=result.observation, info=dict(result.info))

    @overload
    async def step(self, action: CallToolAction) -> StepResult[types.CallToolResult]: ...
    @overload
    async def step(self, action: ListToolsAction) -> StepResult[list[types.Tool]]: ...
    async def step(self, action: Action) -> StepResult[types.CallToolResult] | StepResult[list[types.Tool]]:
        """Take one action. A tool call returns its MCP result with reward and done attached;
        one to a tool the environment lacks is an `is_error` step with `info["unknown_tool"]`."""
        if isinstance(action, ListToolsAction):
            return StepResult[list[types.Tool]](observation=await self.list_tools())
        # call_tool's body, not a call to it: one coroutine frame less per step.
        return await self._call(self._current(), action.tool_name, action.arguments)

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> StepResult[types.CallToolResult]:
        """`step(CallToolAction(tool_name=name, arguments=arguments))`, spelled shorter."""
        return await self._call(self._current(), name, arguments or {})

    async def list_tools(self) -> list[types.Tool]:
        """The environment's tools, exactly as `tools/list` shows them to any MCP client."""
        return await self._list_tools()

    async def state(self) -> EpisodeState:
        """Episode id, step count, cumulative reward, done flags of the current episode."""
        return await self._state(self._current())

    async def close_episode(self) -> EpisodeState | None:
        """End the current episode now (the server frees it; `reset()` starts another). Returns
        its final state: with a trajectory rubric, its return includes the score the episode got
        on closing (rfcs/0007-rewards.md); None when no episode was live (or an older server)."""
        if self.episode_id is None:
            return None
        episode_id, self.episode_id = self.episode_id, None
        return await self._close(episode_id)

    async def aclose(self) -> None:
        """Close the episode and the connection."""
        try:
            await self.close_episode()
        finally:
            await self._disconnect()

    async def __aenter__(self) -> Self:
        await self._connect()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def _current(self) -> str:
        if self.episode_id is None:
            raise RuntimeError("No episode is running: call reset() first")
        return self.episode_id

    # The primitives each door implements.
    @abc.abstractmethod
    async def _connect(self) -> None: ...
    @abc.abstractmethod
    async def _disconnect(self) -> None: ...
    @abc.abstractmethod
    async def _reset(
        self, episode_id: str, seed: int | None, options: dict[str, Any] | None, previous: str | None
    ) -> ResetResult: ...
    @abc.abstractmethod
    async def _call(self, episode_id: str, name: str, arguments: dict[str, Any]) -> ToolStep: ...

    @abc.abstractmethod
    async def _list_tools(self) -> list[types.Tool]: ...
    @abc.abstractmethod
    async def _state(self, episode_id: str) -> EpisodeState: ...
    @abc.abstractmethod
    async def _close(self, episode_id: str) -> EpisodeState | None: ...
