"""`mcpgym.list_tasks`: read an environment's task catalog, whatever door it is behind.

Layer: client facade. The catalog is a door primitive (`Door.list_tasks`): over MCP it is walked
page by page through `prompts/list` (deterministic order, opaque cursors; rfcs/0010) with each
task's prompt text from `prompts/get`; in-process, the environment's `catalog()` is called on an
instance built for the purpose. This module only finds the door.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from mcpgym._client.api import AsyncEnv
from mcpgym._episode.catalog import Task
from mcpgym._episode.environment import Environment
from mcpgym._targets.connect import Target, connect

if TYPE_CHECKING:
    from mcpgym._client.vector import AsyncVectorEnv


async def list_tasks(
    target: Target | AsyncEnv | AsyncVectorEnv,
    *,
    limit: int | None = None,
    prompts: bool = True,
    **connect_options: Any,
) -> list[Task]:
    """The tasks `target` offers, in the environment's order (at most `limit`); empty if none.

    `target` is anything `mcpgym.connect` takes (a `SharedClient` and a `Pool` too), or an open
    env or vector env from one. Over MCP each task's prompt text costs one `prompts/get`;
    `prompts=False` skips them (ids, titles, seeds and options only; `Task.prompt` is then
    empty), which is all a trainer needs to reset.
    """
    if isinstance(target, AsyncEnv):
        return await target.list_tasks(limit=limit, prompts=prompts)
    envs = getattr(target, "envs", None)  # an open vector env: its slots share one door
    if isinstance(envs, list) and envs and isinstance(envs[0], AsyncEnv):
        return await envs[0].list_tasks(limit=limit, prompts=prompts)
    if isinstance(target, Environment):  # someone's live instance: read it, never close it
        return list(await anyio.to_thread.run_sync(target.catalog))[:limit]
    async with connect(target, **connect_options) as env:  # type: ignore[arg-type]
        return await env.list_tasks(limit=limit, prompts=prompts)
