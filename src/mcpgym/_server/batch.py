"""The `mcpgym/steps` handler: many episodes' tool calls in one request (`mcpgym._core.batch`).

Layer: transport, beside the control plane in `gym_server`. Each entry is driven exactly as
`tools/call` drives its episode (`Episode.call`, the same stamp); the entries run concurrently
(one episode's entries in turn, as its steps always are), and an entry's protocol error is
that entry's answer, never the request's.
"""

from __future__ import annotations

import anyio
import mcp_types as types

from mcpgym._core.batch import BatchOutcome, BatchStep, StepsParams, StepsResult
from mcpgym._core.errors import INVALID_PARAMS, MCPError
from mcpgym._core.protocol import is_valid_episode_id
from mcpgym._server.registry import EpisodeRegistry


async def run_steps(registry: EpisodeRegistry, params: StepsParams, owner: str | None) -> StepsResult:
    outcomes = [BatchOutcome() for _ in params.steps]
    async with anyio.create_task_group() as tg:
        for entry, outcome in zip(params.steps, outcomes, strict=True):
            tg.start_soon(_run_one, registry, entry, outcome, owner)
    return StepsResult(results=outcomes)


async def _run_one(registry: EpisodeRegistry, entry: BatchStep, outcome: BatchOutcome, owner: str | None) -> None:
    try:
        if not is_valid_episode_id(entry.episode):
            raise MCPError(INVALID_PARAMS, "Malformed episode id: expected 22-128 URL-safe characters")
        outcome.result = await registry.get(entry.episode, owner).call(entry.name, entry.arguments)
    except MCPError as exc:  # this entry's answer (unknown episode, unknown tool and its step, ...)
        outcome.error = types.ErrorData(code=exc.code, message=exc.message, data=exc.data)
