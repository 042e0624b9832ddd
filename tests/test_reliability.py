"""Faults and limits: hung tools, vanished clients, dead servers, capacity, session binding."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CONNECTION_CLOSED

import mcpgym
from mcpgym import harness
from mcpgym._core.errors import AT_CAPACITY
from mcpgym._core.protocol import episode_meta
from mcpgym.harness.policy import Policy, tool_call
from mcpgym.harness.types import AssistantTurn, ChatTool, Message
from mcpgym.pool import Pool
from tests.conftest import serve_gym, stdio
from tests.envs import CLOSED, Counter, Mortal, closed_event

pytestmark = pytest.mark.anyio


async def test_a_hung_tool_times_out_and_the_server_keeps_serving() -> None:
    server = mcpgym.GymServer(Mortal)
    async with mcpgym.connect(server) as stuck, mcpgym.connect(server) as other:
        await stuck.reset()
        await other.reset()
        async with anyio.create_task_group() as tg:
            results: dict[str, mcpgym.StepResult[object]] = {}

            async def hang(tool: str) -> None:
                results[tool] = await stuck.call_tool(tool)  # type: ignore[assignment]

            tg.start_soon(hang, "hang")
            # While that call hangs, another episode on the same server is served at once.
            assert (await other.call_tool("pid")).observation.structured_content == {"result": os.getpid()}
        assert results["hang"].is_error and "timed out after 0.5s" in results["hang"].text
        thread = await stuck.call_tool("hang_in_thread")  # a blocked worker thread is abandoned, too
        assert thread.is_error and "timed out" in thread.text
        assert (await stuck.state()).step_count == 2  # the episode goes on


async def test_a_client_that_vanishes_mid_call_leaves_nothing_behind() -> None:
    CLOSED.clear()
    async with serve_gym(Counter, idle_timeout=60) as (server, url):
        env = mcpgym.connect(url)
        with anyio.move_on_after(5):
            async with env:
                await env.reset(options={"label": "vanished"})
                async with anyio.create_task_group() as tg:
                    tg.start_soon(env.call_tool, "add", {"n": 1})
                    tg.cancel_scope.cancel()  # the client gives up mid-call and disappears
        assert len(server.registry) <= 1
        # Whatever state the abandoned call left, the idle timeout frees the episode exactly once.
        await server.registry.expire_idle(now=anyio.current_time() + 10**6)
        assert len(server.registry) == 0 and CLOSED["vanished"] == 1
        async with mcpgym.connect(url) as fresh:  # and the server still serves
            await fresh.reset()
            assert (await fresh.call_tool("add", {"n": 1})).reward == 0.1


async def test_a_session_that_is_never_closed_expires() -> None:
    CLOSED.clear()
    gym = mcpgym.GymServer(Counter)
    from tests.conftest import serve_app

    async with serve_app(gym.http_app(session_idle_timeout=0.2)) as base:
        closed = closed_event("")
        http = httpx2.AsyncClient()
        client = Client(
            streamable_http_client(f"{base}/mcp", http_client=http, terminate_on_close=False), mode="legacy"
        )
        async with http, client:
            await client.call_tool("add", {"n": 1})
        # No DELETE was sent; the SDK's session idle timeout ends the session and its episode.
        with anyio.fail_after(10):
            await closed.wait()
        assert CLOSED[""] == 1 and len(gym.registry) == 0


MORTAL = "python -m mcpgym serve tests.envs:Mortal"


async def _kill_mid_episode(target: mcpgym.Target, names: str) -> None:
    """Start an episode, SIGKILL the server under it: the step in flight and every later call
    raise `MCPError` naming the server, the caller's own cancel scope is untouched, and leaving
    the `async with` afterwards is quiet (the error was already reported)."""
    with anyio.fail_after(20) as deadline, anyio.CancelScope() as own:
        async with mcpgym.connect(target) as env:
            await env.reset()
            result = await env.call_tool("pid")
            assert result.observation.structured_content is not None
            os.kill(result.observation.structured_content["result"], signal.SIGKILL)
            with pytest.raises(mcpgym.MCPError) as in_flight:
                await env.call_tool("pid")
            assert not own.cancel_called and not deadline.cancel_called  # an error, never a cancellation
            for later in (env.call_tool("pid"), env.state(), env.list_tools(), env.reset()):
                with pytest.raises(mcpgym.MCPError) as err:
                    await later
                assert err.value.code == CONNECTION_CLOSED and names in err.value.message
    assert in_flight.value.code == CONNECTION_CLOSED
    assert names in in_flight.value.message and "environment server" in in_flight.value.message
    assert not own.cancel_called


async def _serves_new_episodes(target: mcpgym.Target) -> None:
    async with mcpgym.connect(target) as env:
        await env.reset()
        assert not (await env.call_tool("pid")).is_error


async def test_a_killed_stdio_server_is_a_clear_error_and_a_new_one_serves() -> None:
    await _kill_mid_episode(stdio("tests.envs:Mortal"), "-m mcpgym serve tests.envs:Mortal")
    await _serves_new_episodes(stdio("tests.envs:Mortal"))


async def test_a_killed_http_server_is_a_clear_error_and_a_restarted_one_serves() -> None:
    with mcpgym.ServerProcess(f"{MORTAL} --http --port 0") as server:
        await _kill_mid_episode(server.url, server.url)
        server.process.wait(timeout=10)
    with mcpgym.ServerProcess(f"{MORTAL} --http --port 0") as restarted:
        await _serves_new_episodes(restarted.url)


async def test_episodes_are_bound_to_their_http_session() -> None:
    async with serve_gym(Counter) as (_server, url):
        async with httpx2.AsyncClient() as h1, Client(streamable_http_client(url, http_client=h1), mode="legacy") as a:
            async with mcpgym.connect(url) as probe:
                await probe.reset()
            # An RL client over a legacy session: its episode belongs to that session.
            from mcpgym._core.protocol import ResetParams, ResetRequest, ResetResult, new_episode_id

            episode_id = new_episode_id()
            params = ResetParams(_meta=episode_meta(episode_id))
            await a.session.send_request(ResetRequest(params=params), ResetResult)
            assert (await a.call_tool("add", {"n": 1}, meta=episode_meta(episode_id))).is_error is False
            async with (
                httpx2.AsyncClient() as h2,
                Client(streamable_http_client(url, http_client=h2), mode="legacy") as b,
            ):
                with pytest.raises(mcpgym.MCPError, match="Unknown episode"):  # same words as a wrong guess
                    await b.call_tool("add", {"n": 1}, meta=episode_meta(episode_id))


async def test_capacity_is_a_clear_error_and_existing_episodes_carry_on() -> None:
    async with serve_gym(Counter, max_episodes=2) as (_server, url):
        async with mcpgym.connect(url) as a, mcpgym.connect(url) as b, mcpgym.connect(url) as c:
            await a.reset()
            await b.reset()
            with pytest.raises(mcpgym.MCPError, match="capacity") as err:
                await c.reset()
            assert err.value.code == AT_CAPACITY == -32050  # our own code, not JSON-RPC's invalid request
            assert err.value.data == {"live_episodes": 2, "max_episodes": 2}
            assert (await a.call_tool("add", {"n": 1})).reward == 0.1
            await b.close_episode()
            await c.reset()  # capacity freed as an episode ended


@pytest.mark.parametrize("kind", ["memory", "stdio", "http"])
async def test_replacing_your_own_episode_at_capacity_never_counts_twice(kind: str) -> None:
    async with contextlib.AsyncExitStack() as stack:
        target: mcpgym.Target = mcpgym.GymServer(Counter, max_episodes=1)
        if kind == "stdio":
            target = stdio("tests.envs:Counter", "--max-episodes", "1")
        elif kind == "http":
            _, target = await stack.enter_async_context(serve_gym(Counter, max_episodes=1))
        env = await stack.enter_async_context(mcpgym.connect(target))
        for seed in range(6):  # each reset replaces the last episode: never "at capacity"
            await env.reset(seed=seed)
            assert (await env.call_tool("add", {"n": 1})).reward == 0.1
        if kind == "stdio":
            return  # a second stdio client starts a server of its own
        other = await stack.enter_async_context(mcpgym.connect(target))
        with pytest.raises(mcpgym.MCPError) as err:  # a second client is refused, and nothing else changes
            await other.reset()
        assert err.value.code == AT_CAPACITY and other.episode_id is None
        assert (await env.call_tool("add", {"n": 1})).reward == 0.1


async def test_a_shared_instance_serves_one_client_and_is_closed_exactly_once() -> None:
    CLOSED.clear()
    shared = Counter()
    async with mcpgym.connect(shared) as first:
        await first.reset(options={"label": "one"})
        with pytest.raises(RuntimeError, match="connected to another client"):
            async with mcpgym.connect(shared):
                pass
        assert (await first.call_tool("add", {"n": 1})).reward == 0.1  # untouched by the refused one
    assert CLOSED["one"] == 1
    with pytest.raises(RuntimeError, match="was closed"):
        async with mcpgym.connect(shared):
            pass
    assert CLOSED["one"] == 1


async def test_hidden_rewards_stay_out_of_plain_agents_results_but_are_recorded(tmp_path: object) -> None:
    server = mcpgym.GymServer(Counter, reveal_rewards=False, record=str(tmp_path))
    async with Client(server.mcp, mode="legacy") as agent:
        result = await agent.call_tool("add", {"n": 30})
        assert not (result.meta or {}).keys() & {mcpgym.STEP_KEY}
    (recorded,) = mcpgym.read_recordings(str(tmp_path))
    assert recorded.total_reward == 3.0


def _killing_policy(kill_in_episode: int) -> Policy:
    """Calls `pid`; in episode `kill_in_episode` (1-based) it then SIGKILLs the server that
    answered and calls `pid` again, so that call is in flight on a dead server."""
    episodes = 0

    async def policy(messages: list[Message], tools: list[ChatTool]) -> AssistantTurn:
        nonlocal episodes
        answers = [m["content"] for m in messages if m["role"] == "tool"]
        if not answers:
            episodes += 1
            return AssistantTurn(tool_calls=[tool_call("c1", "pid", {})])
        if episodes == kill_in_episode and len(answers) == 1:
            os.kill(int(answers[0]), signal.SIGKILL)
            return AssistantTurn(tool_calls=[tool_call("c2", "pid", {})])
        return AssistantTurn(content="done")

    return policy


@pytest.mark.parametrize("kind", ["stdio", "http", "pool"])
async def test_a_rollout_keeps_every_trajectory_when_the_server_dies(kind: str, tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        target: mcpgym.Target = stdio("tests.envs:Mortal")
        if kind != "stdio":
            servers = [stack.enter_context(mcpgym.ServerProcess(f"{MORTAL} --http --port 0")) for _ in range(2)]
            target = Pool([s.url for s in servers]) if kind == "pool" else servers[0].url
        out = tmp_path / "rollout.jsonl"
        with anyio.fail_after(60):
            trajectories = await harness.rollout(target, _killing_policy(2), episodes=3, concurrency=1, out=out)
    assert [t.index for t in trajectories] == [0, 1, 2] and len(harness.read_rollout(out)) == 3
    assert trajectories[0].status == "ok"
    killed = trajectories[1]
    assert killed.status == "failed" and killed.error is not None and "MCPError" in killed.error
    assert "environment server" in killed.error and len(killed.turns) == 2  # the turn before the kill is kept
    # Over stdio the worker relaunches the server; a pool routes to the live replica; a lone
    # dead URL fails the episode with the same clear error, never a cancellation.
    assert trajectories[2].status == ("failed" if kind == "http" else "ok")


def _trl_episode(env: Any) -> int:
    env.reset(seed=0)
    return int(env.pid())


@pytest.mark.parametrize("kind", ["stdio", "http"])
def test_a_trl_instance_reconnects_on_the_next_reset_after_its_server_died(kind: str) -> None:
    import mcpgym.trl

    with contextlib.ExitStack() as stack:
        server = stack.enter_context(mcpgym.ServerProcess(f"{MORTAL} --http --port 0")) if kind == "http" else None
        target: mcpgym.Target = server.url if server is not None else stdio("tests.envs:Mortal")
        Env = mcpgym.trl.environment_class(target)
        env: Any = Env()
        try:
            first = _trl_episode(env)
            assert env.get_reward() == 0.0
            os.kill(first, signal.SIGKILL)
            with pytest.raises(mcpgym.MCPError, match="environment server"):
                env.pid()  # the episode in flight fails ...
            assert env.failed and env.get_reward() is None  # ... and stays unscored
            if server is not None:  # the same URL comes back (a restarted pod)
                server.process.wait(timeout=10)
                port = server.url.rsplit(":", 1)[1].split("/")[0]
                back = stack.enter_context(mcpgym.ServerProcess(f"{MORTAL} --http --port {port}"))
            second = _trl_episode(env)  # the next reset reconnects: relaunched (stdio) or a new session (HTTP)
            assert second != first and not env.failed and env.get_reward() == 0.0
            if server is not None:  # restarted between episodes, with no failed call to notice it:
                os.kill(second, signal.SIGKILL)  # the old HTTP session is unknown to the new process
                back.process.wait(timeout=10)
                restarted = stack.enter_context(mcpgym.ServerProcess(f"{MORTAL} --http --port {port}"))
                assert _trl_episode(env) == restarted.pid
        finally:
            env._close()


async def test_resets_on_one_http_session_keep_no_state_per_reset_and_its_end_closes_them() -> None:
    CLOSED.clear()
    async with serve_gym(Counter) as (gym, url), mcpgym.connect(url, mode="legacy") as env:
        await env.reset(options={"label": "first"})
        for _ in range(50):
            await env.reset(options={"label": "again"})
        assert len(gym.registry) == 1 and len(gym.registry._owned) == 1  # O(1) per session
        closed = closed_event("again")
        env.episode_id = None  # leave it open: the session's end (not mcpgym/close) must close it
    with anyio.fail_after(10):
        await closed.wait()  # and the session's end still closes the episode it held
    assert CLOSED == {"first": 1, "again": 50} and len(gym.registry) == 0
