"""`mcpgym.task_stats`: what a server's curriculum saw of each task (docs/curriculum.md).

Layer: client, beside `task_list`. Sends the `mcpgym/tasks/stats` control-plane request
(`mcpgym._core.tasks`) over an MCP door; mcpgym's clients advertise the Gym extension, which
is what the server requires of an operator.
"""

from __future__ import annotations

from typing import Any

from mcp.client.session import ClientSession

from mcpgym._client.api import AsyncEnv
from mcpgym._core.tasks import TaskStatsParams, TaskStatsRequest, TaskStatsResult
from mcpgym._targets.connect import Target, connect


async def task_stats(target: Target | AsyncEnv, **connect_options: Any) -> TaskStatsResult:
    """The server's sampler configuration and per-task statistics (episodes, successes, the
    decayed success rate and learnability p(1-p), times drawn). `target` is a server (URL,
    command, GymServer) or an open env connected to one; the curriculum lives in the server,
    so an in-process class has none."""
    if isinstance(target, AsyncEnv):
        return await _stats(target)
    async with connect(target, **connect_options) as env:
        return await _stats(env)


async def _stats(env: AsyncEnv) -> TaskStatsResult:
    session = _session(env.door)
    if session is None:
        raise TypeError(
            f"task_stats: the curriculum runs in a server, and {env.door.describe()[1]} is not one: "
            "serve the environment (mcpgym serve ... --http) and connect to it"
        )
    result: TaskStatsResult = await session.send_request(TaskStatsRequest(params=TaskStatsParams()), TaskStatsResult)
    return result


def _session(door: object) -> ClientSession | None:
    """The MCP session a door sends on (a door forwarding to another: the one it forwards to)."""
    try:
        for _ in range(8):  # doors nest a level or two (HTTP -> session); never a cycle
            session = getattr(door, "session", None)
            if isinstance(session, ClientSession):
                return session
            door = getattr(door, "inner", None)
            if door is None:
                return None
    except RuntimeError:  # a door that is not connected
        return None
    return None
