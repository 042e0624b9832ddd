"""HumanEval through the Coding environment: every canonical solution earns 1.0, a wrong one 0.0."""

from __future__ import annotations

import os

import anyio
import pytest

import mcpgym
from mcpgym.servers.coding._environment import humaneval_tasks
from tests.coding.helpers import coding


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


TASKS = humaneval_tasks()
# A wrong answer of the right shape for every task: it returns nothing.
WRONG = "def {entry_point}(*args, **kwargs):\n    return None\n"


async def grade_all(solutions: dict[str, str]) -> dict[str, float]:
    rewards: dict[str, float] = {}
    limiter = anyio.CapacityLimiter(os.cpu_count() or 2)
    factory = coding()

    async def one(task_id: str) -> None:
        async with limiter, mcpgym.connect(factory) as env:
            await env.reset(options={"task_id": task_id})
            result = await env.call_tool("submit", {"code": solutions[task_id]})
            assert result.done
            rewards[task_id] = result.reward

    async with anyio.create_task_group() as tg:
        for task_id in solutions:
            tg.start_soon(one, task_id)
    return rewards


@pytest.mark.anyio
async def test_all_164_canonical_solutions_earn_full_reward() -> None:
    assert len(TASKS) == 164
    solutions = {t.task_id: t.prompt + (t.canonical_solution or "") for t in TASKS.values()}
    rewards = await grade_all(solutions)
    assert {k for k, v in rewards.items() if v != 1.0} == set()


@pytest.mark.anyio
async def test_wrong_solutions_to_all_164_earn_nothing() -> None:
    sample = sorted(TASKS)
    rewards = await grade_all({k: WRONG.format(entry_point=TASKS[k].entry_point) for k in sample})
    assert rewards == {k: 0.0 for k in sample}
