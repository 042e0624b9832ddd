"""Capacity at CI scale: 128 concurrent HTTP episodes, no failed or lost step, nothing left over.
(The 2,048-episode measurement is benchmarks/bench_load.py.)"""

from __future__ import annotations

import anyio
import httpx2
import pytest

import mcpgym
from tests.conftest import serve_gym
from tests.envs import Sleepy

pytestmark = pytest.mark.anyio

EPISODES, STEPS = 128, 4


async def test_128_concurrent_episodes_lose_nothing() -> None:
    async with serve_gym(Sleepy, max_episodes=EPISODES) as (server, url):
        held = anyio.Event()
        live = 0
        completed: list[int] = []

        async def episode(i: int) -> None:
            nonlocal live
            async with mcpgym.connect(url) as env:
                await env.reset(seed=i)
                live += 1
                if live == EPISODES:
                    held.set()
                await held.wait()  # every episode is open at once before any steps
                assert len(server.registry) == EPISODES
                for step in range(1, STEPS + 1):
                    result = await env.call_tool("wait", {"ms": 2})
                    assert not result.is_error and result.observation.structured_content == {"result": step}
                completed.append((await env.state()).step_count)

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for i in range(EPISODES):
                    tg.start_soon(episode, i)
        assert completed == [STEPS] * EPISODES
        assert len(server.registry) == 0
        async with httpx2.AsyncClient() as http:
            health = (await http.get(url.replace("/mcp", "/healthz"))).json()
        assert isinstance(health.pop("allocated_blocks"), int)  # reported (its value is the reader's to compare)
        assert health == {"status": "ok", "environment": "Sleepy", "episodes": 0, "max_episodes": EPISODES}
