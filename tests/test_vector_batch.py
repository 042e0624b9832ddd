"""`mcpgym/steps`: a vector env whose slots share one session steps them in one request, with
the results, stamps and per-slot errors of one request per slot (rfcs/0019-doors.md)."""

from __future__ import annotations

import collections
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND
from starlette.types import ASGIApp, Receive, Scope, Send

import mcpgym
from mcpgym import CallToolAction
from mcpgym._core.batch import STEPS_METHOD
from mcpgym._core.protocol import new_episode_id
from tests.conftest import serve_app
from tests.envs import Graded

pytestmark = pytest.mark.anyio

N = 4


class Counting:
    """ASGI middleware counting requests by their `Mcp-Method` header."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.methods: collections.Counter[str] = collections.Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            headers = dict(scope["headers"])
            self.methods[headers.get(b"mcp-method", b"?").decode()] += 1
        await self.app(scope, receive, send)


@contextlib.asynccontextmanager
async def counted(env: Any) -> AsyncIterator[tuple[Counting, str]]:
    app = Counting(mcpgym.GymServer(env).http_app())
    async with serve_app(app) as base:
        yield app, f"{base}/mcp"


ACTIONS = [
    CallToolAction(tool_name="guess", arguments={"text": "o"}),
    CallToolAction(tool_name="nope", arguments={}),  # unknown tool: its counted step
    CallToolAction(tool_name="guess", arguments={"text": 3}),  # bad arguments: an is_error step
    CallToolAction(tool_name="guess", arguments={"text": "orbit"}),  # solved: done, trajectory score
]


def _rows(batch: mcpgym.VectorStep) -> list[Any]:
    return [
        (r.text, r.reward, r.done, r.terminated, r.truncated, r.components, r.info) if r is not None else None
        for r in batch.results
    ]


async def _play(url: str, batch: bool) -> tuple[list[Any], list[Any]]:
    async with mcpgym.connect_vector(url, N, batch=batch, autoreset="disabled") as envs:
        await envs.reset(seed=0)
        first = await envs.step(ACTIONS)
        second = await envs.step(ACTIONS)  # slot 3's episode is over now
    assert first.errors == [None] * N and second.errors == [None] * N
    return _rows(first), _rows(second)


async def test_one_request_steps_every_slot_with_the_results_of_one_request_each() -> None:
    async with counted(Graded) as (app, url):
        together = await _play(url, batch=True)
        assert app.methods[STEPS_METHOD] == 2 and app.methods["tools/call"] == 0
        apart = await _play(url, batch=False)
        assert app.methods["tools/call"] == 2 * N
    assert together == apart
    first, _ = together
    assert first[1] is not None and first[1][-1] == {"step": 1, "unknown_tool": True}  # counted, not raised


async def test_each_slots_error_is_its_own() -> None:
    async with counted(Graded) as (app, url), mcpgym.connect_vector(url, N, autoreset="disabled") as envs:
        await envs.reset(seed=0)
        envs.envs[1].episode_id = new_episode_id()  # an episode the server never had
        batch = await envs.step([CallToolAction(tool_name="guess", arguments={"text": "o"})] * N)
        assert app.methods[STEPS_METHOD] == 1
        error = batch.errors[1]
        assert (
            isinstance(error, mcpgym.MCPError) and error.code == INVALID_PARAMS and "Unknown episode" in error.message
        )
        assert batch.results[1] is None and batch.rewards[1] == 0
        others = [batch.results[i] for i in (0, 2, 3)]
        assert all(r is not None and r.info == {"step": 1} for r in others)
        envs.envs[1].episode_id = None


async def test_autoreset_resets_the_ended_slot_after_a_batch() -> None:
    async with counted(Graded) as (_, url), mcpgym.connect_vector(url, 2, autoreset="same_step") as envs:
        await envs.reset(seed=0)
        batch = await envs.step([CallToolAction(tool_name="guess", arguments={"text": t}) for t in ("o", "orbit")])
        final = batch.final[1]
        assert final is not None and final.done and batch.terminated == [False, True]
        assert batch.results[1] is not None and batch.results[1].observation == "find a 5-letter word"


async def test_a_server_without_the_method_gets_one_request_per_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpgym._server import gym_server

    async def refuse(*args: Any) -> Any:
        raise mcpgym.MCPError(METHOD_NOT_FOUND, "Method not found")

    monkeypatch.setattr(gym_server, "run_steps", refuse)  # what an older server answers
    async with counted(Graded) as (app, url):
        together = await _play(url, batch=True)
        assert app.methods[STEPS_METHOD] == 1 and app.methods["tools/call"] == 2 * N  # asked once, then per slot
        monkeypatch.undo()
        assert together == await _play(url, batch=False)
