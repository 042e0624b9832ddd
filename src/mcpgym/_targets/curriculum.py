"""`mcpgym.task_stats`: what a server's curriculum saw of each task (docs/curriculum.md).

Layer: client, beside `task_list`. Sends the `mcpgym/tasks/stats` control-plane request
(`mcpgym._core.tasks`) over an MCP door; mcpgym's clients advertise the Gym extension, which
is what the server requires of an operator.
"""

from __future__ import annotations

from typing import Any

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
    try:
        session = env.session
    except AttributeError:
        raise TypeError(
            f"task_stats: the curriculum runs in a server, and {type(env.door).__name__} reaches none: "
            "serve the environment (mcpgym serve ... --http) and connect to it"
        ) from None
    result: TaskStatsResult = await session.send_request(TaskStatsRequest(params=TaskStatsParams()), TaskStatsResult)
    return result
