"""What a wrapped environment's rubric sees, and how a rubric is called.

Layer: plain data plus one dispatch function. A rubric is any callable taking a `WrapContext`
and returning a number in [0, 1] or a `Score` (sync or async): the task's declarative checks
(`verify`) are the default one. It runs on the final state after every step.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client

from mcpgym._wrap._tasks import TaskSpec
from mcpgym._wrap._verify import Check, Score, verify


@dataclass(frozen=True)
class CallRecord:
    """One proxied tool call of the episode, as the agent made it."""

    tool: str
    arguments: dict[str, Any]
    result: types.CallToolResult


@dataclass
class WrapContext:
    """The episode as a rubric sees it."""

    task: TaskSpec
    workspace: Path
    """The episode's workspace on the host (the wrapped server sees the same path)."""
    calls: list[CallRecord] = field(default_factory=list)
    client: Client | None = None
    call_timeout: float | None = None
    """Seconds `call_tool` waits for the wrapped server (then TimeoutError)."""

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        """Call a tool of the wrapped server directly (for a read-only check of its final state);
        never counted as a step, never seen by the agent. A server that does not answer within
        the call timeout raises TimeoutError (the episode then ends)."""
        if self.client is None:
            raise RuntimeError("the wrapped server is not running")
        with anyio.fail_after(self.call_timeout):
            return await self.client.call_tool(name, arguments or {}, read_timeout_seconds=self.call_timeout)


Rubric = Callable[[WrapContext], "float | Score | Awaitable[float | Score]"]


async def default_rubric(ctx: WrapContext) -> Score:
    """The task's declarative checks over the final workspace (in a worker thread: reading the
    files must not stall the other episodes this process serves)."""
    return await anyio.to_thread.run_sync(verify, ctx.task, ctx.workspace)


async def evaluate(rubric: Rubric, ctx: WrapContext) -> Score:
    """Run `rubric`; a plain number becomes a `Score`, checked to be a finite value in [0, 1]."""
    value: Any = rubric(ctx)
    if inspect.isawaitable(value):
        value = await value
    if isinstance(value, Score):
        score = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        score = Score(float(value), [Check("rubric", float(value) >= 1.0)])
    else:
        raise TypeError(f"a rubric returns a number or a Score, not {type(value).__name__}")
    if not math.isfinite(score.value) or not 0.0 <= score.value <= 1.0:
        raise ValueError(f"a rubric's score must be in [0, 1], not {score.value}")
    return score
