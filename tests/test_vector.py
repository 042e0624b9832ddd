"""Vector envs: batches over every door, Gymnasium's autoreset modes, failing slots, the sync twin."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

import mcpgym
from mcpgym import CallToolAction
from mcpgym.pool import Pool
from mcpgym.servers.echo import Echo
from tests.conftest import DOORS, door, serve_gym
from tests.test_pool import start_servers

pytestmark = pytest.mark.anyio

N = 4


def _say(message: str) -> CallToolAction:
    return CallToolAction(tool_name="echo_message", arguments={"message": message})


def _summary(batch: mcpgym.VectorStep) -> list[Any]:
    """Everything per slot a door could get wrong, without episode ids."""
    rows: list[Any] = []
    for i, result in enumerate(batch.results):
        error = batch.errors[i]
        observation = result.observation if result is not None else None
        if isinstance(observation, BaseModel):
            observation = observation.model_dump(mode="json")
        elif isinstance(observation, dict) and i == 0 and batch.final == [None] * len(batch.results):
            observation = sorted(observation)  # an auto-reset draws an unseeded target, as Gymnasium's does
        rows.append(
            (
                observation,
                batch.rewards[i],
                batch.terminated[i],
                batch.truncated[i],
                None if error is None else (type(error).__name__, getattr(error, "code", None)),
                result.info if result is not None else None,
            )
        )
    return rows


async def _episode(envs: mcpgym.AsyncVectorEnv) -> list[Any]:
    """Reset with seeds 0..3; slot 0 says its target (ends), slot 1 calls an unknown tool, the
    others say a wrong word; then one more step, where slot 0 is auto-reset (next_step)."""
    first = await envs.reset(seed=0)
    targets = [r.observation["target"] for r in first.results if r is not None]
    actions = [_say(targets[0]), CallToolAction(tool_name="nope"), _say("no"), _say("no")]
    second = await envs.step(actions)
    third = await envs.step([_say("x")] * N)
    return [_summary(b) for b in (first, second, third)]


async def test_every_door_gives_the_same_batches() -> None:
    results = {}
    for kind in DOORS:
        async with door(kind, Echo) as target, mcpgym.connect_vector(target, N) as envs:
            results[kind] = await _episode(envs)
    reference = results["inprocess"]
    _, second, third = reference
    assert second[0][1:] == (1.0, True, False, None, {"step": 1})
    # An unknown tool is a counted `is_error` step on every door, not a failed slot.
    assert second[1][0]["is_error"] and "Unknown tool" in second[1][0]["content"][0]["text"]
    assert second[1][1:] == (0.0, False, False, None, {"step": 1, "unknown_tool": True})
    assert second[2][1:] == (0.0, False, False, None, {"step": 1})
    assert third[0][0] == ["prompt", "target"]  # slot 0 was reset: its first observation
    assert third[0][1:4] == (0.0, False, False) and third[0][4] is None
    assert third[1][4] is None and third[1][5] == {"step": 2}
    assert third[2][0]["content"][0]["text"] == "x"
    for kind in DOORS[1:]:
        assert results[kind] == reference, f"{kind} differs from in-process"


async def test_same_step_autoreset_returns_the_new_episode_and_the_ended_one() -> None:
    async with mcpgym.connect_vector(Echo, 2, autoreset="same_step") as envs:
        assert envs.metadata == {"autoreset_mode": "same_step"}
        first = await envs.reset(seed=[0, 1])
        targets = [r.observation["target"] for r in first.results if r is not None]
        batch = await envs.step([_say(targets[0]), _say("no")])
    assert batch.terminated == [True, False] and batch.rewards == [1.0, 0.0]
    final = batch.final[0]
    assert final is not None and final.done and final.text == targets[0]
    new = batch.results[0]
    assert new is not None and "prompt" in new.observation  # already the next episode's first observation
    assert batch.final[1] is None


async def test_disabled_autoreset_leaves_ended_slots_to_a_masked_reset() -> None:
    async with mcpgym.connect_vector(Echo, 2, autoreset="disabled") as envs:
        first = await envs.reset(seed=0)
        ids = [env.episode_id for env in envs.envs]
        targets = [r.observation["target"] for r in first.results if r is not None]
        await envs.step([_say(targets[0]), _say("no")])
        after = await envs.step([_say("again"), _say("no")])
        assert after.results[0] is not None and after.results[0].is_error  # stepping an ended episode
        masked = await envs.reset(mask=[True, False])
        assert masked.results[1] is None and masked.errors == [None, None]
        assert envs.envs[0].episode_id != ids[0] and envs.envs[1].episode_id == ids[1]


async def test_a_truncated_episode_reports_truncated_not_terminated() -> None:
    async with mcpgym.connect_vector(Echo, 2) as envs:
        await envs.reset(seed=0)
        for _ in range(Echo.max_steps - 1):
            batch = await envs.step([_say("no")] * 2)
            assert batch.done == [False, False]
        batch = await envs.step([_say("no")] * 2)
    assert batch.truncated == [True, True] and batch.terminated == [False, False]


async def test_a_dead_slot_does_not_fail_the_batch() -> None:
    async with serve_gym(Echo) as (gym, url), mcpgym.connect_vector(url, 3) as envs:
        await envs.reset(seed=0)
        lost = envs.envs[1].episode_id
        assert lost is not None
        await gym.registry.close(lost)  # the server dropped that episode (e.g. it expired)
        batch = await envs.step([_say("no")] * 3)
        assert batch.errors[0] is None and batch.errors[2] is None
        assert isinstance(batch.errors[1], mcpgym.MCPError) and "Unknown episode" in batch.errors[1].message
        again = await envs.reset(mask=[False, True, False])  # its slot starts over
        assert again.errors == [None, None, None] and again.results[1] is not None


async def test_bad_batches_are_refused_before_anything_is_sent() -> None:
    with pytest.raises(ValueError, match="num_envs"):
        mcpgym.connect_vector(Echo, 0)
    with pytest.raises(ValueError, match="autoreset"):
        mcpgym.connect_vector(Echo, 1, autoreset="sometimes")  # type: ignore[arg-type]
    async with mcpgym.connect_vector(Echo, 2) as envs:
        with pytest.raises(RuntimeError, match="reset"):
            await envs.step([_say("a")] * 2)
        await envs.reset()
        with pytest.raises(ValueError, match="1 actions for 2"):
            await envs.step([_say("a")])
        with pytest.raises(ValueError, match="3 seeds"):
            await envs.reset(seed=[1, 2, 3])


async def test_many_episodes_share_one_client_over_http() -> None:
    async with serve_gym(Echo) as (gym, url), mcpgym.SharedClient(url, connections=8) as shared:
        async with mcpgym.connect_vector(shared, 64) as envs:
            first = await envs.reset(seed=0)
            assert len(gym.registry) == 64 and first.errors == [None] * 64
            targets = [r.observation["target"] for r in first.results if r is not None]
            batch = await envs.step([_say(t) for t in targets])
            assert batch.terminated == [True] * 64
        assert len(gym.registry) == 0  # closing the vector env closed its episodes, not the client
        async with shared.connect() as env:
            await env.reset()


def test_the_sync_twin_steps_a_batch() -> None:
    with mcpgym.connect_vector_sync(Echo, 3) as envs:
        assert envs.num_envs == 3 and envs.metadata["autoreset_mode"] == "next_step"
        first = envs.reset(seed=0)
        targets = [r.observation["target"] for r in first.results if r is not None]
        batch = envs.step([_say(t) for t in targets])
    assert batch.rewards == [1.0, 1.0, 1.0]


async def test_a_vector_env_over_a_pool_spreads_its_slots_over_the_replicas() -> None:
    servers = start_servers(2)
    try:
        async with mcpgym.connect_vector(Pool([s.url for s in servers]), 4) as envs:
            first = await envs.reset()
            assert first.errors == [None] * 4
            batch = await envs.step([CallToolAction(tool_name="pid")] * 4)
        answered = {r.observation.structured_content["result"] for r in batch.results if r is not None}
        assert answered == {s.pid for s in servers}
    finally:
        for server in servers:
            server.kill()
