"""The door contract (rfcs/0019-doors.md), run over every door: reset, step, close, state,
errors, the task catalog and rubric components behave the same whether the environment is
in-process, behind the SDK's in-memory transport, a stdio command, streamable HTTP (the lean
connection a process shares, a held-open `SharedClient`, a handshake-era session) or a pool of
servers."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
from mcp_types import INVALID_PARAMS

import mcpgym
from mcpgym._client.http_door import HTTPDoor
from mcpgym._client.inprocess import InProcessDoor
from mcpgym._client.mcp_door import ClientDoor
from mcpgym._core.protocol import RUBRIC_KEY
from mcpgym.pool import Pool
from mcpgym.pool._routing import PoolDoor
from tests.conftest import DOORS, door, serve_gym
from tests.envs import Catalogued

pytestmark = pytest.mark.anyio

KINDS = (*DOORS, "http-legacy", "http-own", "pool")
"""`mcpgym.testing.DOORS`, and three more: `mode="legacy"` (the lean HTTP connection on a
handshake-era session), an HTTP door with its own `mcp.Client` (what an event loop other than
asyncio gets, where aiohttp cannot run) and a `Pool` of one server."""


@contextlib.asynccontextmanager
async def opened(kind: str) -> AsyncIterator[mcpgym.AsyncEnv]:
    """A connected env for `Catalogued` behind door `kind`."""
    if kind == "pool":
        async with serve_gym(Catalogued) as (_, url), Pool([url]).connect() as env:
            yield env
    elif kind == "http-own":
        async with serve_gym(Catalogued) as (_, url), mcpgym.AsyncEnv(HTTPDoor(url, share=False)) as env:
            yield env
    elif kind == "http-legacy":
        async with serve_gym(Catalogued) as (_, url), mcpgym.connect(url, mode="legacy") as env:
            yield env
    else:
        async with door(kind, Catalogued) as target, mcpgym.connect(target) as env:
            yield env


@pytest.mark.parametrize("kind", KINDS)
async def test_reset_starts_an_episode_and_the_next_reset_ends_it(kind: str) -> None:
    async with opened(kind) as env:
        assert env.episode_id is None
        first = await env.reset(seed=0)
        assert first.observation == "find a 5-letter word" and not first.done and first.reward == 0
        assert first.info[RUBRIC_KEY] == {
            "components": ["correct", "brevity", "well_formed", "own", "solved"],
            "trajectory": ["solved"],
        }
        old = env.episode_id
        await env.reset(seed=1)
        assert env.episode_id not in (None, old)
        assert (await env.state()).step_count == 0
        env.episode_id = old  # the first episode is gone: the server's one word for it
        with pytest.raises(mcpgym.MCPError) as caught:
            await env.state()
        assert caught.value.code == INVALID_PARAMS and "Unknown episode" in caught.value.message
        env.episode_id = None


@pytest.mark.parametrize("kind", KINDS)
async def test_steps_carry_reward_flags_and_components(kind: str) -> None:
    async with opened(kind) as env:
        await env.reset(seed=0)
        step = await env.call_tool("guess", {"text": "o"})
        assert not step.is_error and step.text == "20%" and step.info == {"step": 1}
        assert step.reward == pytest.approx(0.445)
        assert step.components == pytest.approx({"correct": 0.2, "brevity": -0.01, "well_formed": 1.0, "own": 0.25})
        unknown = await env.step(mcpgym.CallToolAction(tool_name="nope", arguments={}))
        assert unknown.is_error and unknown.info == {"step": 2, "unknown_tool": True}  # counted, not raised
        bad = await env.call_tool("guess", {"text": 3})
        assert bad.is_error and bad.info == {"step": 3} and "valid string" in bad.text
        solved = await env.call_tool("guess", {"text": "orbit"})
        assert solved.done and solved.terminated and not solved.truncated and "solved" in solved.components
        after = await env.call_tool("guess", {"text": "again"})
        assert after.is_error and after.done and after.reward == 0  # the episode is over; nothing more to earn
        tools = await env.step(mcpgym.ListToolsAction())
        assert sorted(t.name for t in tools.observation) == ["broken", "guess"]


@pytest.mark.parametrize("kind", KINDS)
async def test_state_and_close_report_the_episode_and_close_ends_it(kind: str) -> None:
    async with opened(kind) as env:
        with pytest.raises(RuntimeError, match="reset"):
            await env.call_tool("guess", {"text": "o"})  # before any reset
        await env.reset(seed=0)
        await env.call_tool("guess", {"text": "o"})
        state = await env.state()
        assert (state.episode_id, state.environment, state.step_count, state.seed) == (
            env.episode_id,
            "Catalogued",
            1,
            0,
        )
        assert state.total_reward == pytest.approx(0.445) and not state.done
        episode_id = env.episode_id
        final = await env.close_episode()
        assert final is not None and final.episode_id == episode_id and final.step_count == 1
        assert "solved" in final.components  # the trajectory component, scored on closing
        assert env.episode_id is None and await env.close_episode() is None
        with pytest.raises(RuntimeError, match="reset"):
            await env.state()


@pytest.mark.parametrize("kind", KINDS)
async def test_the_catalog_reads_the_same_through_every_door(kind: str) -> None:
    async with opened(kind) as env:
        tasks = await env.list_tasks()
        assert [(t.id, t.prompt, t.seed, t.options) for t in tasks] == [
            (f"word-{i}", f"Find word {i}.", i, {"n": i}) for i in range(3)
        ]
        bare = await mcpgym.list_tasks(env, limit=2, prompts=False)
        assert [(t.id, t.prompt) for t in bare] == [("word-0", ""), ("word-1", "")]
        await env.reset(seed=0)
        await env.list_tasks()  # reading the catalog leaves the running episode alone
        assert (await env.state()).step_count == 0


@pytest.mark.parametrize("kind", KINDS)
async def test_each_kind_is_the_door_it_names(kind: str) -> None:
    """The premise of the tests above: no kind silently falls back to another's door."""
    async with opened(kind) as env:
        what = env.door
        if kind == "inprocess":
            assert isinstance(what, InProcessDoor)
        elif kind in ("http", "shared-http"):
            assert isinstance(what, HTTPDoor) and what.lean and env.session.protocol_version == "2026-07-28"
        elif kind == "http-legacy":
            # The same lean connection, on a handshake-era session (its id on every request).
            assert isinstance(what, HTTPDoor) and what.lean and (env.session.protocol_version or "") < "2026"
        elif kind == "http-own":
            assert isinstance(what, HTTPDoor) and not what.lean and env.client.protocol_version == "2026-07-28"
        elif kind == "pool":
            assert isinstance(what, PoolDoor)
        else:  # memory, stdio
            assert isinstance(what, ClientDoor)
