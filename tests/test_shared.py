"""`mcpgym.SharedClient`: many episodes over one client, the lean HTTP path and its faults."""

from __future__ import annotations

import contextlib
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp
import pytest
from mcp_types import CONNECTION_CLOSED, INVALID_PARAMS, METHOD_NOT_FOUND, REQUEST_TIMEOUT
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

import mcpgym
from benchmarks.echo_servers import ServerSettings, bare_server, http_server, until_ready
from mcpgym._client.door import Borrowed
from mcpgym._client.http_door import HTTPDoor
from mcpgym._client.mcp_door import ClientDoor
from mcpgym.servers.echo import Echo
from tests.conftest import serve_app, serve_gym
from tests.envs import Counter, Mortal

pytestmark = pytest.mark.anyio


async def _play(env: mcpgym.AsyncEnv, seed: int) -> tuple[str, list[tuple[float, bool, int]]]:
    """Reset with `seed`, say a wrong word, then the target: returns the target and each step's stamp."""
    first = await env.reset(seed=seed)
    steps = []
    for message in ("wrong", first.observation["target"]):
        r = await env.call_tool("echo_message", {"message": message})
        steps.append((r.reward, r.done, r.info["step"]))
    return first.observation["target"], steps


async def test_concurrent_episodes_on_one_client_each_get_their_own_episode() -> None:
    expected = {}
    for seed in range(24):
        async with mcpgym.connect(Echo) as env:
            expected[seed] = await _play(env, seed)
    assert len({target for target, _ in expected.values()}) > 1  # the seeds do draw different words
    got: dict[int, Any] = {}
    async with serve_gym(Echo) as (gym, url), mcpgym.SharedClient(url) as shared:
        assert shared.lean

        async def one(seed: int) -> None:
            async with shared.connect() as env:
                got[seed] = await _play(env, seed)

        async with anyio.create_task_group() as tg:
            for seed in range(24):
                tg.start_soon(one, seed)
        assert len(gym.registry) == 0  # every episode env closed its episode
    assert got == expected


async def test_connect_on_a_shared_client_is_its_episode_env() -> None:
    async with serve_gym(Echo) as (_, url), mcpgym.SharedClient(url) as shared:
        env = mcpgym.connect(shared)
        assert isinstance(env.door, HTTPDoor)
        async with env:
            assert env.door.lean and env.door.session is shared.door.session  # type: ignore[union-attr]
            assert (await env.reset(seed=0)).observation["target"] == "orbit"
            assert (await env.state()).step_count == 0
    with pytest.raises(RuntimeError, match="async with"):
        shared.connect()


class _Recorder:
    """ASGI middleware that keeps each POST's episode header and body."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.seen: list[tuple[str | None, bytes]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(mcpgym.EPISODE_HEADER.lower().encode())
        chunks: list[bytes] = []

        async def replay() -> Any:
            message = await receive()
            chunks.append(message.get("body", b""))
            return message

        await self.app(scope, replay, send)
        self.seen.append((header.decode() if header else None, b"".join(chunks)))


async def test_each_request_names_its_own_episode_in_the_header() -> None:
    gym = mcpgym.GymServer(Echo)
    recorder = _Recorder(gym.http_app())
    async with serve_app(recorder) as base, mcpgym.SharedClient(f"{base}/mcp") as shared:
        envs = [shared.connect() for _ in range(3)]
        ids = []
        for env in envs:
            await env.__aenter__()
            await env.reset(seed=1)
            ids.append(env.episode_id)
        for env in reversed(envs):  # interleaved: a per-client header would name the last reset
            await env.call_tool("echo_message", {"message": "x"})
            await env.aclose()
    episode_requests = [(h, body) for h, body in recorder.seen if b"io.mcpgym/episode" in body]
    assert len(episode_requests) == 9  # 3 resets, 3 calls, 3 closes
    for header, body in episode_requests:
        assert header is not None and header.encode() in body
    assert {h for h, _ in episode_requests} == set(ids)


async def test_a_bare_sdk_server_works_over_the_lean_path_with_its_sse_answers() -> None:
    app = bare_server().streamable_http_app()  # the SDK's defaults: SSE responses
    async with serve_app(app) as base:
        url = f"{base}/mcp"
        async with mcp.Client(url) as client:
            assert (await client.call_tool("echo_message", {"message": "hi"})).structured_content == {"result": "hi"}
        async with mcpgym.connect(url) as today:  # the SDK client door, `_meta` stamps read off alike
            await today.reset()
            reference = (await today.call_tool("echo_message", {"message": "hi"})).observation
        async with mcpgym.SharedClient(url) as shared:
            assert shared.lean
            async with shared.connect() as env:
                first = await env.reset()
                assert first.info == {"plain_mcp_server": True}
                result = await env.call_tool("echo_message", {"message": "hi"})
                assert result.observation == reference and result.reward == 0.0
                assert [t.name for t in await env.list_tools()] == ["echo_message"]
                with pytest.raises(mcpgym.MCPError) as state_error:
                    await env.state()
                assert state_error.value.code == METHOD_NOT_FOUND


async def _refusals(env: mcpgym.AsyncEnv) -> list[Any]:
    """An unknown tool's step, the protocol error of a closed episode, and its final state."""
    seen: list[Any] = []
    await env.reset(seed=0)
    closed = env.episode_id
    unknown = await env.call_tool("no_such_tool", {})
    seen.append((unknown.observation.model_dump(), unknown.reward, unknown.terminated, unknown.info))
    final = await env.close_episode()
    assert final is not None
    seen.append(final.model_dump(exclude={"episode_id"}))
    env.episode_id = closed  # as a caller holding a stale id would
    try:
        await env.call_tool("echo_message", {"message": "hi"})
    except mcpgym.MCPError as exc:
        seen.append((exc.code, exc.message.replace(str(closed), "<id>"), exc.data))
    env.episode_id = None
    return seen


async def test_the_same_results_and_protocol_errors_as_the_sdk_client() -> None:
    async with serve_gym(Echo) as (_, url):
        async with mcpgym.connect(url) as env:
            reference = await _refusals(env)
        async with mcpgym.SharedClient(url) as shared, shared.connect() as env:
            assert shared.lean
            assert await _refusals(env) == reference
    assert len(reference) == 3
    unknown, final, stale = reference
    assert unknown[0]["is_error"] and "Unknown tool" in unknown[0]["content"][0]["text"]
    assert unknown[3] == {"step": 1, "unknown_tool": True}  # counted, as in-process
    assert final["step_count"] == 1
    assert stale[0] == INVALID_PARAMS and "Unknown episode" in stale[1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_no_server_is_the_sdk_doors_mcp_error_naming_the_url() -> None:
    url = f"http://127.0.0.1:{_free_port()}/mcp"
    with pytest.raises(mcpgym.MCPError) as reference:
        async with mcpgym.connect(url):
            pass
    with pytest.raises(mcpgym.MCPError) as caught:
        async with mcpgym.SharedClient(url):
            pass
    for error in (reference.value, caught.value):
        assert error.code == CONNECTION_CLOSED and error.data["url"] == url
        assert error.message.startswith(f"Cannot reach the environment server {url}")
    assert "server/discover" in caught.value.message  # the lean path also names the request


async def test_a_server_that_dies_mid_episode_is_an_mcp_error_not_a_cancellation() -> None:
    with http_server("ours", ServerSettings()) as (url, proc):
        async with mcpgym.SharedClient(url) as shared, shared.connect() as env:
            await env.reset(seed=0)
            await env.call_tool("echo_message", {"message": "hi"})
            proc.kill()
            await anyio.to_thread.run_sync(proc.wait)
            with pytest.raises(mcpgym.MCPError) as caught:
                await env.call_tool("echo_message", {"message": "hi"})
            assert caught.value.code == CONNECTION_CLOSED
            assert url in caught.value.message and "tools/call" in caught.value.message
            assert caught.value.data == {"url": url, "reason": caught.value.data["reason"]}
            # As on the SDK client's door: the episode ended with its server, which the call
            # above reported; closing it has nothing left to do (and does not hang).
            assert await env.close_episode() is None


@asynccontextmanager
async def _answering(status: int, body: str, content_type: str = "text/plain") -> AsyncIterator[str]:
    async def answer(request: Request) -> PlainTextResponse:
        return PlainTextResponse(body, status_code=status, media_type=content_type)

    async with serve_app(Starlette(routes=[Route("/mcp", answer, methods=["POST"])])) as base:
        yield f"{base}/mcp"


@pytest.mark.parametrize("status", [500, 404, 503])
async def test_an_http_error_status_is_the_sdk_doors_http_error(status: int) -> None:
    errors = []
    async with _answering(status, "nope") as url:
        with pytest.raises(mcpgym.MCPError) as reference:
            async with mcpgym.connect(url, mode="2026-07-28") as env:
                await env.list_tools()
        errors.append(reference.value)
        with pytest.raises(mcpgym.MCPError) as caught:
            async with mcpgym.SharedClient(url, mode="2026-07-28") as shared, shared.connect() as env:
                await env.list_tools()
        errors.append(caught.value)
    for error in errors:
        assert error.code == mcpgym.HTTP_ERROR and error.data["status"] == status
        assert f"HTTP {status}" in error.message and url in error.message and "nope" in error.message
    assert [(e.code, e.message, e.data) for e in errors[1:]] == [(e.code, e.message, e.data) for e in errors[:1]]


async def test_a_non_json_rpc_body_is_a_parse_error_naming_it() -> None:
    async with _answering(200, "<html>proxy login</html>", "application/json") as url:
        with pytest.raises(mcpgym.MCPError) as caught:
            async with mcpgym.SharedClient(url, mode="2026-07-28") as shared, shared.connect() as env:
                await env.reset()
    assert "Not a JSON-RPC message" in caught.value.message and "proxy login" in caught.value.message


async def test_a_request_slower_than_read_timeout_is_a_timeout_error() -> None:
    async with serve_gym(Mortal) as (_, url), mcpgym.SharedClient(url, read_timeout=0.2) as shared:
        async with shared.connect() as env:
            await env.reset()
            with pytest.raises(mcpgym.MCPError) as caught:
                await env.call_tool("hang")
            assert caught.value.code == REQUEST_TIMEOUT and url in caught.value.message
            assert (await env.state()).episode_id == env.episode_id  # the client still works
            env.episode_id = None  # (its close would wait for the hung call: the server ends it)


async def test_a_handshake_era_session_is_shared_too_and_in_process_targets_share_nothing() -> None:
    async with serve_gym(Echo) as (gym, url), mcpgym.SharedClient(url, mode="legacy") as shared:
        assert shared.lean  # one session (its id on every request) for every episode, as on 2026-07-28
        async with shared.connect() as a, shared.connect() as b:
            assert a.session is b.session and (a.session.protocol_version or "") < "2026"
            assert (await a.reset(seed=0)).observation["target"] == "orbit"
            assert (await b.reset(seed=1)).observation["target"] != "orbit"
            assert len(gym.registry) == 2
    async with mcpgym.SharedClient(Counter) as shared:
        assert shared.door is None
        async with shared.connect() as a, shared.connect() as b:
            assert (await a.reset(seed=3)).observation == (await b.reset(seed=3)).observation


async def test_stdio_episodes_share_one_server_process() -> None:
    command = [sys.executable, "-m", "mcpgym.servers.echo"]
    async with mcpgym.SharedClient(command) as shared:
        assert isinstance(shared.door, ClientDoor)
        async with shared.connect() as a, shared.connect() as b:
            assert isinstance(a.door, Borrowed) and a.door.door is shared.door
            await a.reset(seed=0)
            await b.reset(seed=1)
            steps = [(await e.call_tool("echo_message", {"message": "x"})).info["step"] for e in (a, b)]
            assert steps == [1, 1]  # each episode counted its own first step
            assert (await a.state()).seed == 0 and (await b.state()).seed == 1


async def test_harness_rollout_shares_one_client_for_an_http_target() -> None:
    from mcpgym.harness.rollout import _shared

    async with serve_gym(Echo) as (_, url), _shared(url) as target:
        assert isinstance(target, mcpgym.SharedClient) and target.lean
    async with _shared(Echo) as target:
        assert target is Echo  # nothing to share in-process
    down = f"http://127.0.0.1:{_free_port()}/mcp"
    async with _shared(down) as target:
        assert target == down  # unreachable now: each episode connects (and fails, recorded) itself


def test_trl_instances_of_one_server_share_a_client_closed_with_the_last() -> None:
    import mcpgym.trl
    from mcpgym.trl._runtime import runtime

    with http_server("ours", ServerSettings()) as (url, _):
        anyio.run(until_ready, url)
        Env = mcpgym.trl.environment_class(url)
        first, second = Env(), Env()
        first.reset(seed=0)
        second.reset(seed=1)
        assert len(runtime._shared) == 1
        first._close()
        assert len(runtime._shared) == 1  # the other instance still rides on it
        second._close()
        assert len(runtime._shared) == 0


async def test_headers_reach_the_server_and_a_401_says_what_to_send() -> None:
    gym = mcpgym.GymServer(Echo)
    async with serve_app(gym.http_app(token="s3cret")) as base:
        url = f"{base}/mcp"
        async with mcpgym.SharedClient(url, headers={"Authorization": "Bearer s3cret"}) as shared:
            async with shared.connect() as env:
                assert (await env.reset(seed=0)).observation["target"] == "orbit"
        with pytest.raises(mcpgym.MCPError) as caught:
            async with mcpgym.SharedClient(url):
                pass
    assert "HTTP 401" in caught.value.message and url in caught.value.message


async def test_episodes_opened_each_with_connect_share_one_connection_and_one_discovery() -> None:
    from tests.test_vector_batch import counted

    async with counted(Echo) as (app, url):
        async with contextlib.AsyncExitStack() as stack:
            envs = [await stack.enter_async_context(mcpgym.connect(url)) for _ in range(32)]
            assert len({id(env.session) for env in envs}) == 1  # one ClientSession for all of them
            async with anyio.create_task_group() as tg:
                for seed, env in enumerate(envs):
                    tg.start_soon(env.reset, seed)
        assert app.methods["server/discover"] == 1 and app.methods["mcpgym/reset"] == 32
        async with mcpgym.connect(url) as env:  # the last one out closed it: the next opens a new one
            await env.reset()
        assert app.methods["server/discover"] == 2
