"""Shared fixtures: every door to an environment, and a real HTTP server on a free loopback port."""

from __future__ import annotations

import contextlib
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest
import uvicorn
from starlette.types import ASGIApp

import mcpgym
from mcpgym._http import UvicornServer
from servers.echo import Echo

DOORS = ("inprocess", "memory", "stdio", "http", "shared-http")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@contextlib.asynccontextmanager
async def serve_app(app: ASGIApp) -> AsyncIterator[str]:
    """Serve an ASGI app on 127.0.0.1:<free port> in this event loop; yields the base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = UvicornServer(uvicorn.Config(app, log_level="warning", lifespan="on"))
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            with anyio.fail_after(10):
                await server.ready.wait()
            try:
                yield f"http://127.0.0.1:{port}"
            finally:
                server.should_exit = True
    finally:
        sock.close()


@contextlib.asynccontextmanager
async def serve_gym(env: Any, **options: Any) -> AsyncIterator[tuple[mcpgym.GymServer, str]]:
    """A GymServer for `env` over streamable HTTP; yields (server, mcp_url)."""
    gym = mcpgym.GymServer(env, **options)
    async with serve_app(gym.http_app()) as base:
        yield gym, f"{base}/mcp"


@contextlib.asynccontextmanager
async def door(kind: str, env: type[mcpgym.Environment] = Echo) -> AsyncIterator[mcpgym.Target]:
    """The same environment behind each door: in-process, in-memory MCP, stdio, HTTP, HTTP shared."""
    if kind == "inprocess":
        yield env
    elif kind == "memory":
        yield mcpgym.GymServer(env)
    elif kind == "stdio":
        yield [sys.executable, "-m", "mcpgym", "serve", f"{env.__module__}:{env.__qualname__}"]
    elif kind == "shared-http":  # the lean path: episodes multiplexed over one SharedClient
        async with serve_gym(env) as (_, url), mcpgym.SharedClient(url) as shared:
            assert shared.lean
            yield shared
    else:
        async with serve_gym(env) as (_, url):
            yield url


@pytest.fixture(params=DOORS)
def door_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def repo_root() -> Iterator[str]:
    import pathlib

    yield str(pathlib.Path(__file__).resolve().parent.parent)
