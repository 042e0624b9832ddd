"""Client defects found in the #22 review (item 8, client side), each pinned by a test that
failed before its fix."""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Awaitable
from types import SimpleNamespace
from typing import Any, ClassVar, cast

import aiohttp
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp_types import CONNECTION_CLOSED, INVALID_PARAMS, REQUEST_TIMEOUT, JSONRPCRequest, JSONRPCResponse

import mcpgym
from mcpgym._client import dispatch, session_door
from mcpgym._core.protocol import ResetResult, new_episode_id
from mcpgym._core.types import EpisodeState, ToolStep
from mcpgym._episode.catalog import TASK_KEY
from mcpgym.pool import Pool
from mcpgym.servers.echo import Echo
from tests.conftest import serve_app, serve_gym
from tests.envs import Counter, Mortal

pytestmark = pytest.mark.anyio


def test_sync_env_closes_like_a_gymnasium_env() -> None:
    env = mcpgym.connect_sync(Counter)
    env.__enter__()
    env.reset(seed=0)
    env.close()  # ends the episode and the portal, as leaving `with` does
    env.close()  # twice is fine
    with pytest.raises(RuntimeError, match="with"):
        env.reset()
    env.__exit__(None, None, None)  # and leaving the block afterwards does nothing


def test_sync_vector_env_closes_too() -> None:
    envs = mcpgym.connect_vector_sync(Counter, 2)
    envs.__enter__()
    assert envs.reset(seed=0).errors == [None, None]
    envs.close()
    with pytest.raises(RuntimeError, match="with"):
        envs.reset()


def test_connect_sync_keeps_connects_keywords() -> None:
    ours = inspect.signature(mcpgym.connect_sync).parameters
    theirs = inspect.signature(mcpgym.connect).parameters
    assert list(ours) == list(theirs)
    assert all(ours[name].kind is inspect.Parameter.KEYWORD_ONLY for name in ("mode", "read_timeout", "headers"))


class RefusesAgain(mcpgym.Environment):
    """The first reset works; every later one (same_step's autoreset) raises."""

    resets: ClassVar[int] = 0

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> str:
        type(self).resets += 1
        if type(self).resets > 1:
            raise ValueError("no second episode")
        return "go"

    @mcpgym.tool
    async def stop(self) -> str:
        """End the episode with reward 1."""
        self.finish(reward=1.0)
        return "stopped"


async def test_same_step_autoreset_that_fails_leaves_only_the_error() -> None:
    RefusesAgain.resets = 0
    async with mcpgym.connect_vector(RefusesAgain, 1, autoreset="same_step") as envs:
        await envs.reset()
        batch = await envs.step([mcpgym.CallToolAction(tool_name="stop", arguments={})])
    assert batch.results == [None]  # the docstring's promise: a failed slot has no result
    assert isinstance(batch.errors[0], mcpgym.MCPError) and "no second episode" in batch.errors[0].message
    final = batch.final[0]
    assert final is not None and final.done  # the ended step still happened, and says so
    assert batch.rewards == [1.0] and batch.terminated == [True]


async def test_harness_shares_its_client_with_the_callers_headers() -> None:
    from mcpgym.harness.rollout import _shared

    async with serve_app(mcpgym.GymServer(Echo).http_app(token="s3cret")) as base:
        url = f"{base}/mcp"
        async with _shared(url, None, {"Authorization": "Bearer s3cret"}) as target:
            # Before: the shared client went without the token, got 401, and every worker connected alone.
            assert isinstance(target, mcpgym.SharedClient) and target.lean


async def test_options_given_to_a_shared_client_are_honoured() -> None:
    async with serve_gym(Mortal) as (_, url), mcpgym.SharedClient(url) as shared:
        async with mcpgym.connect(shared, read_timeout=0.1) as env:
            await env.reset()
            with pytest.raises(mcpgym.MCPError) as caught:
                await env.call_tool("hang")  # the server's own call timeout is 0.5 s
            assert caught.value.code == REQUEST_TIMEOUT
            env.episode_id = None  # (its close would wait for the hung call: the server ends it)


async def test_headers_for_a_target_without_http_are_refused() -> None:
    for target in (Counter, mcpgym.GymServer(Counter), "python -m mcpgym.servers.echo"):
        with pytest.raises(ValueError, match="headers go with an HTTP URL"):
            mcpgym.connect(target, headers={"Authorization": "Bearer t"})
        with pytest.raises(ValueError, match="headers go with an HTTP URL"):
            mcpgym.connect_sync(target, headers={"Authorization": "Bearer t"})


class Severed:
    """A door whose transport is gone: every primitive raises the transport's own error."""

    def describe(self) -> tuple[str, str]:
        return "command", "severed-server"

    async def connect(self) -> None:
        pass

    async def disconnect(self) -> None:
        pass

    async def reset(
        self, episode_id: str, seed: int | None, options: dict[str, Any] | None, previous: str | None
    ) -> ResetResult:
        return ResetResult(observation=None)

    def call(self, episode_id: str, name: str, arguments: dict[str, Any]) -> Awaitable[ToolStep]:
        raise BrokenPipeError("pipe")

    async def list_tools(self) -> list[types.Tool]:
        raise BrokenPipeError("pipe")

    async def state(self, episode_id: str) -> EpisodeState:
        raise BrokenPipeError("pipe")

    async def close(self, episode_id: str) -> EpisodeState | None:
        raise BrokenPipeError("pipe")

    async def list_tasks(self, limit: int | None, prompts: bool) -> list[mcpgym.Task]:
        raise BrokenPipeError("pipe")


async def test_every_primitive_close_included_maps_a_transport_failure_to_mcp_error() -> None:
    async with mcpgym.AsyncEnv(Severed()) as env:
        await env.reset()
        calls = [env.call_tool("x"), env.list_tools(), env.state(), env.list_tasks(), env.close_episode()]
        for call in calls:
            with pytest.raises(mcpgym.MCPError) as caught:
                await call
            assert caught.value.code == CONNECTION_CLOSED
            assert caught.value.data == {"command": "severed-server", "reason": "BrokenPipeError: pipe"}


async def test_a_pool_names_an_id_it_never_held_as_the_server_does() -> None:
    async with serve_gym(Echo) as (_, url):
        pool = Pool([url])
        async with pool.connect() as env:
            await env.reset(seed=0)
            env.episode_id = new_episode_id()  # never this client's
            with pytest.raises(mcpgym.MCPError) as caught:
                await env.state()
    assert caught.value.code == INVALID_PARAMS and "Unknown episode" in caught.value.message


async def test_an_event_stream_left_at_its_answer_is_closed_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[str] = []

    async def events(lines: object) -> AsyncGenerator[bytes, None]:
        try:
            yield b'{"jsonrpc": "2.0", "id": 1, "result": {}}'
            yield b'{"jsonrpc": "2.0", "method": "notifications/message"}'
        finally:
            closed.append("events")

    monkeypatch.setattr(dispatch, "_sse_data", events)
    request = JSONRPCRequest(jsonrpc="2.0", id=1, method="ping")
    response = cast(aiohttp.ClientResponse, SimpleNamespace(content=None))
    reply = await dispatch.HTTPDispatcher("http://127.0.0.1:9/mcp")._read_events(response, request, {})
    # Before: the generator was left suspended, closed later by the loop's finaliser hook.
    assert isinstance(reply, JSONRPCResponse) and closed == ["events"]


async def test_a_listing_left_at_its_limit_is_closed_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[str] = []

    async def pages(listing: object) -> AsyncGenerator[Any, None]:
        try:
            prompts = [types.Prompt(name=name, _meta={TASK_KEY: {"seed": 0, "options": {}}}) for name in ("a", "b")]
            yield types.ListPromptsResult(prompts=prompts, next_cursor="more")
            yield types.ListPromptsResult(prompts=[])
        finally:
            closed.append("pages")

    monkeypatch.setattr(session_door, "_pages", pages)
    door = session_door.SessionDoor(cast(ClientSession, SimpleNamespace(list_prompts=None)), ("server", "fake"))
    tasks = await door.list_tasks(1, prompts=False)
    assert [task.id for task in tasks] == ["a"] and closed == ["pages"]
