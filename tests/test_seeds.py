"""Seeds name episodes (#27): every shipped environment and every bridge environment echoes its
episode's seed and catalog task in the step stamp on the wire and in its recording, and a
seeded reset replays. (`mcpgym check`, which resets two instances with one seed, is run over
them by the command line in test_envs.py and test_check.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

import mcpgym
from mcpgym._core.protocol import episode_meta
from mcpgym._core.tasks import TASK_INFO_KEY
from mcpgym.testing import serve_gym

pytestmark = pytest.mark.anyio

# (target, a cheap first call): the five shipped environments, then one target per bridge.
PLAYED: dict[str, tuple[str, dict[str, Any]]] = {
    "echo": ("echo_message", {"message": "orbit"}),
    "blackjack": ("stand", {}),
    "coding": ("get_task", {}),
    "maze": ("look", {}),
    "reasoning": ("get_task", {}),
    "gym:FrozenLake-v1": ("step", {"action": 1}),
    "textarena:GuessTheNumber-v0": ("move", {"action": "[10]"}),
}


async def _stamped(env: mcpgym.AsyncEnv, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One call sent as mcpgym's client sends it, read back raw: the step stamp on the wire."""
    assert env.episode_id is not None
    params = types.CallToolRequestParams(name=name, arguments=arguments, _meta=episode_meta(env.episode_id))
    result = await env.session.send_request(types.CallToolRequest(params=params), types.CallToolResult)
    assert result.meta is not None and not result.is_error, result
    stamp: dict[str, Any] = result.meta[mcpgym.STEP_KEY]
    return stamp


@pytest.mark.parametrize("target", list(PLAYED))
async def test_the_stamp_and_the_recording_echo_seed_and_task_id(target: str, tmp_path: Path) -> None:
    """A reset to a catalog task's own seed and options is that task (the harness and `mcpgym
    eval` list the tasks, then reset so); an environment without a catalog echoes the seed alone."""
    tool, arguments = PLAYED[target]
    async with serve_gym(mcpgym.load_environment(target), record=tmp_path) as (_, url), mcpgym.connect(url) as env:
        tasks = await env.list_tasks(limit=1)
        task = tasks[0] if tasks else None
        seed = 5 if task is None else task.seed  # a task's own seed (None for coding's and reasoning's)
        first = await env.reset(seed=seed, options=dict(task.options) if task else None)
        stamp = await _stamped(env, tool, arguments)
    task_id = task.id if task is not None else None
    assert (stamp.get("seed"), stamp.get("task")) == (seed, task_id)
    assert first.info.get(TASK_INFO_KEY, {}).get("id") == task_id
    [recording] = mcpgym.read_recordings(tmp_path)
    assert (recording.seed, recording.task_id) == (seed, task_id)


@pytest.mark.parametrize("target", ["gym:Blackjack-v1", "gym:CartPole-v1", "textarena:TicTacToe-v0?seat=1"])
async def test_a_bridge_environments_seed_alone_decides_its_episode(target: str) -> None:
    """The same seed twice, with other episodes between, deals the same start (the seed is the
    episode's own randomness, not a global generator's)."""

    async def start(seed: int) -> Any:
        async with mcpgym.connect(target) as env:
            return (await env.reset(seed=seed)).observation

    first = await start(3)
    others = [await start(seed) for seed in range(4, 8)]
    assert await start(3) == first
    assert any(other != first for other in others)  # the seed does decide something
