"""`AsyncEnv`: the Gym-style client API, one class over every door.

Layer: client core. Holds everything that is not I/O: the episode handle (minted here, so it is
routable before the first request), action dispatch, and the one mapping of a door's transport
failures to `MCPError`. What reaches the environment is a `Door` (`mcpgym._client.door`): the
in-process door, an MCP session over any transport, a process's shared HTTP connection, a pool.
That split is why every target behaves identically (rfcs/0019-doors.md).
"""

from __future__ import annotations

import contextlib
from types import TracebackType
from typing import TYPE_CHECKING, Any, NoReturn, Self, overload

import anyio
import mcp_types as types
from mcp_types import CONNECTION_CLOSED

from mcpgym._client.door import Door
from mcpgym._core.errors import MCPError
from mcpgym._core.protocol import new_episode_id
from mcpgym._core.types import Action, CallToolAction, EpisodeState, ListToolsAction, StepResult
from mcpgym._episode.config import CLOSE_WAIT

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client.session import ClientSession

    from mcpgym._episode.catalog import Task

TRANSPORT_ERRORS = (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError)
"""What a transport raises when the server is gone (a door's own, unmapped): each becomes
`MCPError(CONNECTION_CLOSED)` naming the door's target."""
FAILURES = (MCPError, OSError, anyio.BrokenResourceError, anyio.ClosedResourceError)
"""What `AsyncEnv` maps: protocol errors and `TRANSPORT_ERRORS`."""


class AsyncEnv:
    """An environment as an RL loop sees it. Get one from `mcpgym.connect(target)`.

    ```python
    async with mcpgym.connect(Echo) as env:
        first = await env.reset(seed=0)
        result = await env.step(CallToolAction(tool_name="echo_message", arguments={"message": "hi"}))
        result.observation, result.reward, result.done
    ```

    `AsyncEnv(door)` drives any `mcpgym._client.door.Door`; `connect` picks the door from the
    target's form.
    """

    episode_id: str | None = None
    """The current episode's id (minted here, before the first request, so it is routable)."""

    def __init__(self, door: Door) -> None:
        self.door = door

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> StepResult[Any]:
        """Start a new episode (closing the previous one) and return its first observation
        (whatever JSON-compatible value the environment's `reset` returned).

        The previous episode ends even when this reset fails (at capacity, the environment's
        `reset` raised, the server is gone): then `episode_id` is None and `step` refuses
        until a reset succeeds."""
        episode_id, previous = new_episode_id(), self.episode_id
        self.episode_id = None
        try:
            result = await self.door.reset(episode_id, seed, options, previous)
        except anyio.get_cancelled_exc_class():
            # The server may have admitted the episode before we gave up: close it by the id we
            # minted rather than leave it to the idle timeout. Bounded, and a failure is moot.
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_WAIT):
                with contextlib.suppress(*FAILURES):
                    await self.door.close(episode_id)
            raise
        except FAILURES as exc:
            self._fail(exc)
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
        try:
            return await self.door.call(self._current(), action.tool_name, action.arguments)
        except FAILURES as exc:
            self._fail(exc)

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> StepResult[types.CallToolResult]:
        """`step(CallToolAction(tool_name=name, arguments=arguments))`, spelled shorter."""
        try:
            return await self.door.call(self._current(), name, arguments or {})
        except FAILURES as exc:
            self._fail(exc)

    async def list_tools(self) -> list[types.Tool]:
        """The environment's tools, exactly as `tools/list` shows them to any MCP client."""
        try:
            return await self.door.list_tools()
        except FAILURES as exc:
            self._fail(exc)

    async def state(self) -> EpisodeState:
        """Episode id, step count, cumulative reward, done flags of the current episode."""
        try:
            return await self.door.state(self._current())
        except FAILURES as exc:
            self._fail(exc)

    async def list_tasks(self, *, limit: int | None = None, prompts: bool = True) -> list[Task]:
        """The environment's task catalog, in its order (at most `limit`); see `mcpgym.list_tasks`."""
        try:
            return await self.door.list_tasks(limit, prompts)
        except FAILURES as exc:
            self._fail(exc)

    async def close_episode(self) -> EpisodeState | None:
        """End the current episode now (the server frees it; `reset()` starts another). Returns
        its final state: with a trajectory rubric, its return includes the score the episode got
        on closing (rfcs/0007-rewards.md); None when no episode was live (or an older server)."""
        if self.episode_id is None:
            return None
        episode_id, self.episode_id = self.episode_id, None
        try:
            return await self.door.close(episode_id)
        except FAILURES as exc:
            self._fail(exc)

    async def aclose(self) -> None:
        """Close the episode and the connection."""
        try:
            await self.close_episode()
        finally:
            try:
                await self.door.disconnect()
            except FAILURES as exc:
                self._fail(exc)

    async def __aenter__(self) -> Self:
        try:
            await self.door.connect()
        except MCPError as exc:  # (a door maps its own transport's faults on connecting)
            self._fail(exc, "Could not connect to")
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    @property
    def session(self) -> ClientSession:
        """The MCP `ClientSession` under an MCP door (for anything beyond the Gym API)."""
        session: ClientSession | None = getattr(self.door, "session", None)
        if session is None:
            raise AttributeError(f"{type(self.door).__name__} has no MCP session (it is not an MCP door)")
        return session

    @property
    def client(self) -> Client:
        """The `mcp.Client` under a door that has one (stdio, in-memory, a handshake-era HTTP
        server). `connect(url)` shares a lean session instead: use `session` there."""
        client: Client | None = getattr(self.door, "client", None)
        if client is None:
            raise AttributeError(
                f"{type(self.door).__name__} has no mcp.Client: use env.session (its ClientSession); "
                "connect(url) shares one lean session per server (rfcs/0019-doors.md)"
            )
        return client

    def _current(self) -> str:
        if self.episode_id is None:
            raise RuntimeError("No episode is running: call reset() first")
        return self.episode_id

    def _fail(self, exc: BaseException, what: str = "Lost the connection to") -> NoReturn:
        """The one mapping of door failures: a protocol error raised as it came; a transport
        failure (or a bare "Connection closed" that names no server) as CONNECTION_CLOSED naming it."""
        if isinstance(exc, MCPError) and (exc.code != CONNECTION_CLOSED or isinstance(exc.data, dict)):
            raise exc
        kind, where = self.door.describe()
        reason = exc.message if isinstance(exc, MCPError) else f"{type(exc).__name__}: {exc}"
        why = " (the server exited or closed its end)" if isinstance(exc, MCPError) else ""
        raise MCPError(
            CONNECTION_CLOSED,
            f"{what} the environment server {where}: {reason}{why}",
            {kind: where, "reason": reason},
        ) from exc
