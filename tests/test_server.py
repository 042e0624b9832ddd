"""MCP-level behaviour of a served environment: what plain agents see, episodes, lifecycle."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

import mcpgym
from mcpgym._core.protocol import (
    CLOSE_METHOD,
    EXTENSION_ID,
    RESET_METHOD,
    STEP_KEY,
    ResetParams,
    ResetRequest,
    ResetResult,
    episode_meta,
    new_episode_id,
)
from mcpgym.servers.echo import Echo
from tests.conftest import serve_app, serve_gym, stdio
from tests.envs import CLOSED, Counter, closed_event

pytestmark = pytest.mark.anyio


def _step_meta(result: types.CallToolResult) -> dict[str, Any]:
    assert result.meta is not None
    meta: dict[str, Any] = result.meta[STEP_KEY]
    return meta


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_agents_see_only_tools_and_cannot_reach_the_control_plane(mode: str) -> None:
    server = mcpgym.GymServer(Echo)
    async with Client(server.mcp, mode=mode) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert names == ["echo_message", "repeat"]
        for name in ("reset", RESET_METHOD, "state", CLOSE_METHOD):
            with pytest.raises(mcpgym.MCPError) as err:
                await client.call_tool(name, {})
            assert err.value.code == types.INVALID_PARAMS and "Unknown tool" in err.value.message


async def test_the_control_plane_is_advertised_as_an_extension() -> None:
    async with Client(mcpgym.GymServer(Echo).mcp, mode="auto") as client:
        settings = (client.server_capabilities.extensions or {})[EXTENSION_ID]
        assert settings["methods"] == [
            "mcpgym/reset",
            "mcpgym/state",
            "mcpgym/close",
            "mcpgym/steps",
            "mcpgym/tasks/stats",
        ]
        assert settings["sampler"] == "uniform"


async def test_plain_agent_without_reset_gets_an_implicit_episode_with_rewards() -> None:
    """A legacy session (Claude Desktop/Code style) never resets: its session is its episode."""
    CLOSED.clear()
    server = mcpgym.GymServer(Counter)
    async with Client(server.mcp, mode="legacy") as client:
        first = await client.call_tool("add", {"n": 10})
        second = await client.call_tool("add", {"n": 5})
        stamp = {"v": 2, "reward": 1.0, "done": False, "terminated": False, "truncated": False, "step": 1}
        assert _step_meta(first) == stamp
        assert _step_meta(second)["step"] == 2  # the same episode across calls
        assert first.structured_content is not None
        assert second.structured_content == {"result": first.structured_content["result"] + 5}
        assert len(server.registry) == 1
    assert len(server.registry) == 0 and CLOSED[""] == 1  # closing the session closed the episode once


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_over_stdio_the_process_is_the_episode_in_either_protocol(mode: str) -> None:
    command = stdio("tests.envs:Counter")
    async with Client(command, mode=mode) as agent:
        steps = [_step_meta(await agent.call_tool("add", {"n": 1}))["step"] for _ in range(3)]
    assert steps == [1, 2, 3]


async def test_stateless_agent_call_runs_in_a_one_call_episode() -> None:
    CLOSED.clear()
    server = mcpgym.GymServer(Counter)
    async with Client(server.mcp, mode="2026-07-28") as client:
        for _ in range(2):
            assert _step_meta(await client.call_tool("add", {"n": 1}))["step"] == 1
    assert len(server.registry) == 0 and CLOSED[""] == 2


async def test_explicit_episodes_are_isolated_and_closed_exactly_once() -> None:
    CLOSED.clear()
    server = mcpgym.GymServer(Counter)
    async with mcpgym.connect(server) as a, mcpgym.connect(server) as b:
        await a.reset(seed=1, options={"label": "a"})
        await b.reset(seed=1, options={"label": "b"})
        await a.call_tool("add", {"n": 3})
        assert (await a.state()).step_count == 1 and (await b.state()).step_count == 0
        await a.reset(seed=2, options={"label": "a2"})  # replaces (and closes) a's first episode
        assert CLOSED == {"a": 1}
        assert len(server.registry) == 2
    assert CLOSED == {"a": 1, "a2": 1, "b": 1} and len(server.registry) == 0


async def test_unknown_or_malformed_episode_ids_are_protocol_errors() -> None:
    server = mcpgym.GymServer(Echo)
    async with Client(server.mcp) as client:
        with pytest.raises(mcpgym.MCPError, match="Unknown episode"):
            await client.call_tool("echo_message", {"message": "x"}, meta=episode_meta(new_episode_id()))
        for malformed in ("short", new_episode_id() + "\n"):  # "$" would let the trailing newline through
            with pytest.raises(mcpgym.MCPError, match="Malformed episode id"):
                await client.call_tool("echo_message", {"message": "x"}, meta=episode_meta(malformed))
            with pytest.raises(mcpgym.MCPError, match="Malformed episode id"):
                await client.session.send_request(
                    ResetRequest(params=ResetParams(_meta=episode_meta(malformed))), ResetResult
                )
    async with mcpgym.connect(server) as env:
        with pytest.raises(RuntimeError, match="reset"):
            await env.call_tool("echo_message", {"message": "x"})


async def test_idle_episodes_expire_and_free_capacity() -> None:
    CLOSED.clear()
    server = mcpgym.GymServer(Counter, max_episodes=1, idle_timeout=60)
    async with mcpgym.connect(server) as a, mcpgym.connect(server) as b:
        await a.reset(options={"label": "idle"})
        with pytest.raises(mcpgym.MCPError, match="capacity"):
            await b.reset()
        # Expiry is driven by the clock; ask for it at a time past the timeout instead of waiting.
        assert await server.registry.expire_idle(now=anyio.current_time() + 10**6) == 1
        assert CLOSED["idle"] == 1
        await b.reset()  # capacity freed
        with pytest.raises(mcpgym.MCPError, match="Unknown episode"):
            await a.call_tool("add", {"n": 1})


async def test_expiry_task_runs_inside_the_server_lifespan() -> None:
    CLOSED.clear()
    server = mcpgym.GymServer(Counter, idle_timeout=0.05)
    async with mcpgym.connect(server) as env:
        closed = closed_event("reaped")
        await env.reset(options={"label": "reaped"})
        with anyio.fail_after(10):
            await closed.wait()  # closed by the lifespan's expiry loop, not by us
        assert CLOSED["reaped"] == 1


async def test_http_session_delete_closes_the_implicit_episode() -> None:
    CLOSED.clear()
    async with serve_gym(Counter) as (server, url):
        closed = closed_event("")
        async with (
            httpx2.AsyncClient() as http,
            Client(streamable_http_client(url, http_client=http), mode="legacy") as c,
        ):
            await c.call_tool("add", {"n": 1})
            assert len(server.registry) == 1
        # Leaving the client sent DELETE for the session; the server tears the session down.
        with anyio.fail_after(10):
            await closed.wait()
        assert CLOSED[""] == 1 and len(server.registry) == 0


async def test_http_episode_header_and_meta_route_the_same_episode() -> None:
    async with serve_gym(Counter) as (_server, url), mcpgym.connect(url) as env:
        await env.reset(seed=3)
        assert env.episode_id is not None
        async with (
            httpx2.AsyncClient(headers={mcpgym.EPISODE_HEADER: env.episode_id}) as http,
            Client(streamable_http_client(url, http_client=http)) as plain,
        ):
            # A client that can only set headers (no _meta) reaches the same episode.
            result = await plain.call_tool("add", {"n": 2})
            assert _step_meta(result)["step"] == 1
        assert (await env.state()).step_count == 1


async def test_sixty_four_concurrent_http_episodes_see_only_their_own_state() -> None:
    async with serve_gym(Counter) as (server, url):

        async def episode(i: int) -> None:
            async with mcpgym.connect(url) as env:
                first = await env.reset(seed=i, options={"label": f"c{i}"})
                total = int(first.observation["start"])
                for n in range(1, 4):
                    r = await env.call_tool("add", {"n": n * i})
                    total += n * i
                    assert r.observation.structured_content == {"result": total}
                    await anyio.lowlevel.checkpoint()  # interleave with the other episodes
                state = await env.state()
                assert state.step_count == 3 and state.total_reward == pytest.approx(0.6 * i)
                assert state.seed == i

        async with anyio.create_task_group() as tg:
            for i in range(64):
                tg.start_soon(episode, i)
        assert len(server.registry) == 0


@pytest.mark.parametrize(
    ("path", "headers", "status", "words"),
    [
        ("/mcp", {}, 401, ["Authorization: Bearer", "--token"]),
        ("", {"Authorization": "Bearer s3cret"}, 404, ["this server's MCP endpoint is /mcp", "try http"]),
        ("/mcp", {"Authorization": "Bearer s3cret", "Host": "evil.example"}, 421, ["Host", "--allowed-host"]),
        ("/mcp", {"Authorization": "Bearer s3cret", "Origin": "http://evil.test"}, 403, ["Origin", "--allowed-host"]),
    ],
)
async def test_http_refusals_say_the_status_and_what_to_do(
    path: str, headers: dict[str, str], status: int, words: list[str]
) -> None:
    gym = mcpgym.GymServer(Counter)
    async with serve_app(gym.http_app(token="s3cret")) as base:
        with pytest.raises(mcpgym.MCPError) as err:
            async with mcpgym.connect(base + path, headers=headers):
                pass
    assert err.value.code == mcpgym.HTTP_ERROR and err.value.data["status"] == status
    assert err.value.message.startswith(f"HTTP {status} ") and base + path in err.value.message
    for word in words:
        assert word in err.value.message


async def test_healthz_tells_load_only_to_clients_that_may_use_the_server() -> None:
    gym = mcpgym.GymServer(Counter)
    async with serve_app(gym.http_app(token="s3cret")) as base, httpx2.AsyncClient() as http:
        token = {"Authorization": "Bearer s3cret"}
        for headers in ({}, {"Host": "attacker.example", **token}, {"Origin": "http://attacker.example", **token}):
            probe = await http.get(f"{base}/healthz", headers=headers)  # a probe: alive, and nothing more
            assert probe.status_code == 200 and probe.json() == {"status": "ok"}
        full = (await http.get(f"{base}/healthz", headers=token)).json()
        assert full["environment"] == "Counter" and full["episodes"] == 0 and full["max_episodes"] == 10_000


def test_served_connections_send_small_answers_at_once() -> None:
    import socket

    from mcpgym._server.http import listen

    # Without TCP_NODELAY (asyncio only sets it for IPPROTO_TCP sockets, which create_server's
    # are not), every small HTTP answer waited ~40 ms for the client's delayed ACK.
    with listen("127.0.0.1", 0) as sock:
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        with socket.create_connection(sock.getsockname()) as client, sock.accept()[0] as accepted:
            assert client and accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
