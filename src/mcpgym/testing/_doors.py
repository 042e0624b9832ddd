"""The same environment behind each door: in-process, in-memory MCP, stdio, streamable HTTP, and
streamable HTTP through a `SharedClient` (the lean path, episodes multiplexed on one client).

Layer: testing tools over the public API. Servers started here bind 127.0.0.1 on a free port,
in the caller's event loop, and stop when the `async with` block ends.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator
from typing import Any, Literal

import anyio
import uvicorn
from mcp import StdioServerParameters
from starlette.types import ASGIApp

from mcpgym._episode.environment import Environment
from mcpgym._server.gym_server import GymServer
from mcpgym._server.http import UvicornServer, listen
from mcpgym._targets.connect import Target

Door = Literal["inprocess", "memory", "stdio", "http", "shared-http"]
DOORS: tuple[Door, ...] = ("inprocess", "memory", "stdio", "http", "shared-http")


@contextlib.asynccontextmanager
async def serve_app(app: ASGIApp) -> AsyncIterator[str]:
    """Serve an ASGI app on 127.0.0.1:<free port> in this event loop; yields the base URL."""
    sock = listen("127.0.0.1", 0)  # TCP_NODELAY set, as `mcpgym serve` has it
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
async def serve_gym(env: Any, **options: Any) -> AsyncIterator[tuple[GymServer, str]]:
    """A `GymServer(env, **options)` over streamable HTTP on loopback; yields (server, MCP URL)."""
    gym = GymServer(env, **options)
    async with serve_app(gym.http_app()) as base:
        yield gym, f"{base}/mcp"


@contextlib.asynccontextmanager
async def door(kind: Door | str, env: type[Environment]) -> AsyncIterator[Target]:
    """A target for `mcpgym.connect` that reaches `env` through door `kind`.

    `"stdio"` launches `python -m mcpgym serve module:Class` with this interpreter, so the class
    must be importable by name from the working directory or an installed package (or, built by
    a bridge, name itself as a target text in `__mcpgym_target__`, e.g. `gym:FrozenLake-v1`).
    """
    if kind == "inprocess":
        yield env
    elif kind == "memory":
        yield GymServer(env)
    elif kind == "stdio":
        # The SDK gives a child only a few safe variables; PYTHONPATH goes too, so the child
        # imports the same code as the test (a src/ layout run without installing, say).
        path = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else None
        named = getattr(env, "__mcpgym_target__", None)  # a class a bridge built names itself (gym:ID)
        argv = ["-m", "mcpgym", "serve", named or f"{env.__module__}:{env.__qualname__}"]
        yield StdioServerParameters(command=sys.executable, args=argv, env=path)
    elif kind == "http":
        async with serve_gym(env) as (_, url):
            yield url
    elif kind == "shared-http":  # the lean path: episodes multiplexed over one SharedClient
        from mcpgym._client.shared import SharedClient

        async with serve_gym(env) as (_, url), SharedClient(url) as shared:
            if not shared.lean:  # a silent fallback to one client per episode would test the "http" door twice
                raise RuntimeError(f"SharedClient({url!r}) did not take the lean path")
            yield shared
    else:
        raise ValueError(f"unknown door {kind!r}: one of {', '.join(DOORS)}")
