"""Server-side defects from the #22 review: each test fails on the code before the fix."""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, ClassVar

import anyio
import pytest
from mcp import Client
from mcp.server import runner
from mcp.server.session import ServerSession
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

import mcpgym
from mcpgym._episode.host import Host
from mcpgym._server import registry as registry_module
from mcpgym._server.gym_server import session_of
from mcpgym._server.http import security_settings
from mcpgym.testing import serve_app, serve_gym
from mcpgym.web._guard import BadRequest, Guard
from tests.envs import CLOSED, Counter, closed_event

pytestmark = pytest.mark.anyio


class _Watched(ServerSession):
    """The SDK's per-request session, noting every read of its private `_connection` from mcpgym."""

    reads: ClassVar[list[str]] = []

    @property
    def _connection(self) -> Any:
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller.startswith("mcpgym"):
            _Watched.reads.append(caller)
        return self.__dict__["_watched_connection"]

    @_connection.setter
    def _connection(self, value: Any) -> None:
        self.__dict__["_watched_connection"] = value


async def test_the_server_reads_no_private_sdk_attribute_on_any_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "ServerSession", _Watched)
    _Watched.reads.clear()
    CLOSED.clear()
    async with serve_gym(Counter) as (_gym, url):
        async with mcpgym.connect(url, mode="legacy") as env:  # an HTTP session: owned episodes
            await env.reset(options={"label": "owned"})
            await env.call_tool("add", {"n": 1})
            await env.state()
        async with mcpgym.connect(url) as env:  # the 2026-07-28 wire
            await env.reset(options={"label": "stateless"})
            await env.call_tool("add", {"n": 1})
        async with Client(url, mode="legacy") as agent:  # a plain agent: the implicit episode
            await agent.call_tool("add", {"n": 1})
    async with Client(mcpgym.GymServer(Counter).mcp, mode="legacy") as agent:  # in memory
        await agent.call_tool("add", {"n": 1})
    assert _Watched.reads == []


def _ctx(protocol_version: str, headers: dict[str, str] | None) -> Any:
    request = None if headers is None else SimpleNamespace(headers=headers)
    return SimpleNamespace(request=request, protocol_version=protocol_version, meta=None)


def test_a_session_id_counts_only_where_the_sdk_routed_the_request_by_it() -> None:
    forged = {"mcp-session-id": "someone-elses"}
    assert session_of(_ctx("2025-11-25", forged)) == "someone-elses"  # the SDK checked it exists
    assert session_of(_ctx("2026-07-28", forged)) is None  # routes nothing on that wire
    assert session_of(_ctx("2025-11-25", None)) is None  # stdio, in memory


async def test_a_deleted_http_session_closes_its_implicit_episode() -> None:
    CLOSED.clear()
    async with serve_gym(Counter) as (gym, url):
        closed = closed_event("")
        async with Client(url, mode="legacy") as agent:  # never resets: plays the implicit episode
            await agent.call_tool("add", {"n": 1})
            await agent.call_tool("add", {"n": 1})
            assert len(gym.registry) == 1
        with anyio.fail_after(10):
            await closed.wait()
        assert len(gym.registry) == 0 and gym._sessions == {}


async def test_an_implicit_episode_of_a_vanished_session_expires_with_the_session() -> None:
    gym = mcpgym.GymServer(Counter, idle_timeout=None)
    registry = gym.registry
    registry.session_idle_timeout = 60.0
    async with anyio.create_task_group() as tg:
        registry.hosts.append(Host(tg))
        bound = await registry.open_implicit(owner="session-a")
        stdio = await registry.open_implicit()  # no session: lives as long as its process
        now = bound.last_active
        assert await registry.expire_idle(now + 59) == 0
        assert await registry.expire_idle(now + 61) == 1 and bound.closed and not stdio.closed
        await registry.close_all()
        tg.cancel_scope.cancel()


class _Plain:
    """An ASGI middleware that knows nothing of mcpgym (no `state` attribute copied)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


async def test_shutdown_hooks_are_found_behind_any_middleware() -> None:
    from mcpgym._server.http import before_shutdown  # new with the fix

    called: list[str] = []
    app = Starlette()
    before_shutdown(app, lambda: called.append("first"))
    before_shutdown(app, lambda: called.append("second"))
    async with serve_app(_Plain(_Plain(app))):
        assert called == []
    assert called == ["first", "second"]


async def test_the_web_pages_stream_hook_survives_a_wrapping_middleware(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpgym.web import _live

    stopped: list[bool] = []
    monkeypatch.setattr(_live.Hub, "stop", lambda self: stopped.append(True))
    async with serve_app(_Plain(mcpgym.GymServer(Counter).http_app(web=True))):
        assert stopped == []
    assert stopped == [True]  # uvicorn's shutdown found it although the middleware has no `state`


async def test_a_refused_body_closes_its_stream_at_once() -> None:
    closed: list[bool] = []

    class Streaming(Request):
        async def stream(self) -> AsyncIterator[bytes]:  # type: ignore[override]
            try:
                while True:
                    yield b"x" * 1024
            finally:
                closed.append(True)

    request = Streaming({"type": "http", "method": "POST", "headers": [], "path": "/"})
    with pytest.raises(BadRequest):
        await Guard(security_settings("127.0.0.1"), max_body_bytes=4096).json_body(request)
    assert closed == [True]


async def test_the_memory_release_collects_on_the_loop_and_trims_off_it(monkeypatch: pytest.MonkeyPatch) -> None:
    where: dict[str, str] = {}
    monkeypatch.setattr(gc, "collect", lambda: where.setdefault("collect", _thread()))
    monkeypatch.setattr(registry_module, "_trim_heap", lambda: where.setdefault("trim", _thread()))
    await registry_module.release_memory()
    # A collection holds the GIL wherever it runs: a thread would only hide that it pauses the loop.
    assert where["collect"] == _thread() and where["trim"] != _thread()


def _thread() -> str:
    return threading.current_thread().name
