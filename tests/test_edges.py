"""Edge cases of the episode lifecycle: races, abandoned threads, odd rewards, failing hooks."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client

import mcpgym
from mcpgym._core.protocol import new_episode_id
from tests.conftest import DOORS, door, serve_app
from tests.envs import CLOSED, Counter, closed_event

pytestmark = pytest.mark.anyio


class Edgy(mcpgym.Environment):
    """Tools that misbehave in ways the core must contain."""

    call_timeout = 0.3
    closed = 0
    release = threading.Event()

    @mcpgym.tool
    def stuck(self) -> str:
        """Blocks its worker thread past the call timeout, then tries to reward."""
        Edgy.release.wait(5)
        self.reward(100.0)  # too late: its step was accounted long ago
        return "late"

    @mcpgym.tool
    async def nan(self) -> str:
        """Rewards NaN, which JSON cannot carry."""
        self.reward(float("nan"))
        return "nan"

    @mcpgym.tool
    async def gate(self, wait: bool = True) -> str:
        """Waits until the test opens the gate."""
        if wait:
            await Edgy.gate_open.wait()
        return "through"

    gate_open: anyio.Event

    def state_info(self) -> dict[str, Any]:
        raise KeyError("missing")

    async def close(self) -> None:
        Edgy.closed += 1


async def test_two_in_memory_clients_do_not_close_each_others_episodes() -> None:
    server = mcpgym.GymServer(Counter)
    async with mcpgym.connect(server) as a:
        await a.reset()
        async with mcpgym.connect(server) as b:
            await b.reset()
        assert (await a.call_tool("add", {"n": 1})).reward == 0.1  # b leaving closed only b's


async def test_a_timed_out_sync_tool_ends_the_episode_and_cannot_touch_the_next_one() -> None:
    Edgy.release.clear()
    async with mcpgym.connect(Edgy) as env:
        await env.reset()
        stuck = await env.call_tool("stuck")
        assert stuck.is_error and "cannot be stopped" in stuck.text
        assert (stuck.done, stuck.truncated, stuck.reward) == (True, True, 0.0)
        Edgy.release.set()  # the abandoned thread now rewards its own, long-accounted step
        after = await env.call_tool("nan")
        assert after.is_error and "over" in after.text
        assert (await env.call_tool("gate", {"wait": False})).reward == 0.0


@pytest.mark.parametrize("kind", DOORS)
async def test_a_nan_reward_is_the_same_tool_error_on_every_door(kind: str) -> None:
    async with door(kind, Edgy) as target, mcpgym.connect(target) as env:
        await env.reset()
        result = await env.call_tool("nan")
        assert result.is_error and "finite" in result.text and result.reward == 0.0
        with pytest.raises(mcpgym.MCPError, match=r"Edgy\.state_info raised KeyError"):
            await env.state()


async def test_close_waits_for_the_running_step_and_queued_steps_are_refused() -> None:
    Edgy.gate_open = anyio.Event()
    Edgy.closed = 0
    server = mcpgym.GymServer(Edgy)
    async with mcpgym.connect(server) as env:
        await env.reset()
        episode = server.registry.get(env.episode_id or "")
        results: list[Any] = []

        async def call(wait: bool) -> None:
            try:
                results.append((await env.call_tool("gate", {"wait": wait})).text)
            except mcpgym.MCPError as exc:
                results.append(exc.message[:15])

        async with anyio.create_task_group() as tg:
            tg.start_soon(call, True)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(call, False)  # queued behind the running one
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(episode.close)
            await anyio.wait_all_tasks_blocked()
            assert Edgy.closed == 0  # close waits for the running step
            Edgy.gate_open.set()
        assert sorted(results) == ["Unknown episode", "through"] and Edgy.closed == 1


async def test_concurrent_resets_of_one_id_close_every_instance() -> None:
    CLOSED.clear()
    server = mcpgym.GymServer(Counter)
    episode_id = new_episode_id()
    async with anyio.create_task_group() as tg:
        for label in "abc":
            tg.start_soon(server.registry.reset, episode_id, None, {"label": label})
    await server.registry.close_all()
    assert sum(CLOSED.values()) == 3 and len(server.registry) == 0


async def test_implicit_episodes_do_not_expire_under_their_agent() -> None:
    server = mcpgym.GymServer(Counter, idle_timeout=1)
    async with Client(server.mcp, mode="legacy") as agent:
        await agent.call_tool("add", {"n": 1})
        assert await server.registry.expire_idle(now=anyio.current_time() + 10**6) == 0
        second = await agent.call_tool("add", {"n": 1})
        assert second.meta is not None and second.meta[mcpgym.STEP_KEY]["step"] == 2


async def test_an_unknown_tool_opens_no_episode() -> None:
    server = mcpgym.GymServer(Counter, max_episodes=0)
    async with Client(server.mcp, mode="legacy") as agent:
        with pytest.raises(mcpgym.MCPError, match="Unknown tool"):  # not "Server at capacity"
            await agent.call_tool("nope", {})


async def test_session_bound_episodes_close_with_their_session() -> None:
    CLOSED.clear()
    gym = mcpgym.GymServer(Counter)
    async with serve_app(gym.http_app()) as base:
        closed = closed_event("bound")
        async with mcpgym.connect(f"{base}/mcp", mode="legacy") as env:  # a session-based client
            await env.reset(options={"label": "bound"})
            await env.call_tool("add", {"n": 1})
            env.episode_id = None  # forget it: the client leaves without closing the episode
        with anyio.fail_after(10):
            await closed.wait()  # the session's end (DELETE) closed it
        assert len(gym.registry) == 0


async def test_cancelling_serve_http_shuts_down_and_closes_episodes() -> None:
    CLOSED.clear()
    gym = mcpgym.GymServer(Counter)
    urls: list[str] = []
    ready = anyio.Event()

    def on_ready(url: str) -> None:
        urls.append(url)
        ready.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: gym.serve_http("127.0.0.1", 0, on_ready=on_ready))
        await ready.wait()
        env = mcpgym.connect(f"{urls[0]}/mcp")
        async with env:
            await env.reset(options={"label": "served"})
            env.episode_id = None  # leave it open
        tg.cancel_scope.cancel()
    assert CLOSED["served"] == 1 and len(gym.registry) == 0


async def test_dns_rebinding_protection_holds_when_binding_all_interfaces() -> None:
    gym = mcpgym.GymServer(Counter)
    async with serve_app(gym.http_app(host="0.0.0.0")) as base, httpx2.AsyncClient() as http:
        headers = {"Host": "evil.example", "Content-Type": "application/json", "Accept": "application/json"}
        response = await http.post(f"{base}/mcp", content=b"{}", headers=headers)
        assert response.status_code == 421


async def test_a_reset_that_reuses_an_id_is_recorded_as_its_own_episode(tmp_path: Path) -> None:
    server = mcpgym.GymServer(Counter, record=tmp_path)
    episode_id = new_episode_id()
    for seed in (1, 2):
        await server.registry.reset(episode_id, seed, None)
        await server.registry.get(episode_id).call("add", {"n": 10})
    await server.registry.close_all()
    assert sorted(t.seed or 0 for t in mcpgym.read_recordings(tmp_path)) == [1, 2]


async def test_a_dead_stdio_command_is_one_clear_error() -> None:
    with pytest.raises(mcpgym.MCPError, match="Could not connect"):
        async with mcpgym.connect("python -c 'import sys; sys.exit(3)'"):
            pass


def test_a_shared_instance_is_closed_once_however_often_the_client_closes() -> None:
    async def run() -> None:
        CLOSED.clear()
        env = mcpgym.connect(Counter())
        async with env:
            await env.reset(options={"label": "shared"})
        await env.aclose()
        assert CLOSED["shared"] == 1

    anyio.run(run)


class NotJSON(mcpgym.Environment):
    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        return object()

    @mcpgym.tool
    async def act(self) -> None:
        """Act."""

    async def close(self) -> None:
        raise OSError("cannot close")


def test_the_checker_sees_unjsonable_observations_and_failing_close() -> None:
    problems = mcpgym.check_environment(NotJSON, raise_on_error=False)
    assert any("reset raised" in p for p in problems) and any("close() raised OSError" in p for p in problems)
