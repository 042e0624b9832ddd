"""`mcpgym.list_tasks`: read an environment's task catalog, whatever door it is behind.

Layer: client, beside `_connect`. Over MCP the catalog is walked page by page through
`prompts/list` (the listing trainers use: deterministic order, opaque cursors; rfcs/0010) and
each task's prompt text is fetched with `prompts/get`, naming a fresh episode id so the server
does not restart the caller's own episode on it. In-process, the environment's `catalog()` is
called directly on an instance built for the purpose.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types

from mcpgym._client.api import AsyncEnv
from mcpgym._client.inprocess import InProcessEnv
from mcpgym._client.mcp_door import MCPEnv
from mcpgym._core.protocol import episode_meta, new_episode_id
from mcpgym._episode.catalog import Task, task_of
from mcpgym._episode.environment import Environment
from mcpgym._episode.episode import _run_user, build
from mcpgym._targets.connect import Target, connect


async def list_tasks(
    target: Target | AsyncEnv, *, limit: int | None = None, prompts: bool = True, **connect_options: Any
) -> list[Task]:
    """The tasks `target` offers, in the environment's order (at most `limit`); empty if none.

    `target` is anything `mcpgym.connect` takes, or an open env from it. Over MCP each task's
    prompt text costs one `prompts/get`; `prompts=False` skips them (ids, titles, seeds and
    options only; `Task.prompt` is then empty), which is all a trainer needs to reset.
    """
    if isinstance(target, AsyncEnv):
        return await _list(target, limit, prompts)
    if isinstance(target, Environment):  # someone's live instance: read it, never close it
        return list(await anyio.to_thread.run_sync(target.catalog))[:limit]
    async with connect(target, **connect_options) as env:
        return await _list(env, limit, prompts)


async def _list(env: AsyncEnv, limit: int | None, prompts: bool) -> list[Task]:
    if isinstance(env, InProcessEnv):
        tasks = await _in_process(env)
        return tasks if limit is None else tasks[:limit]
    if isinstance(env, MCPEnv):
        return await _over_mcp(env, limit, prompts)
    raise TypeError(f"list_tasks: cannot read the catalog through {type(env).__name__}; connect to one server")


async def _in_process(env: InProcessEnv) -> list[Task]:
    instance = env._shared if env._shared is not None else build(env._factory)
    try:
        return list(await anyio.to_thread.run_sync(instance.catalog))
    finally:
        if env._shared is None:
            await _run_user(instance.close)


async def _over_mcp(env: MCPEnv, limit: int | None, prompts: bool) -> list[Task]:
    client = env.client
    tasks: list[Task] = []
    cursor: str | None = None
    while limit is None or len(tasks) < limit:
        page = await client.list_prompts(cursor=cursor)
        for prompt in page.prompts:
            if limit is not None and len(tasks) >= limit:
                break
            task = task_of(prompt)
            if prompts:
                got = await client.get_prompt(prompt.name, meta=episode_meta(new_episode_id()))
                text = "\n".join(m.content.text for m in got.messages if isinstance(m.content, types.TextContent))
                task = task.model_copy(update={"prompt": text})
            tasks.append(task)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tasks
