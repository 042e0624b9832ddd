"""Running a gateway: `serve(config)` until cancelled or signalled (what `mcpgym gateway` does),
or `running(config)` around a block (what `mcpgym.trl.rollout_func` does per batch).

Layer: top of the gateway package; uvicorn through mcpgym's own `serve_http` (the same
listening socket, Nagle off, slow-client guards and signal handling as `mcpgym serve`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Callable

import anyio

from mcpgym._server.http import serve_http
from mcpgym.gateway.app import Gateway, GatewayConfig


async def serve(
    config: GatewayConfig,
    host: str = "127.0.0.1",
    port: int = 8100,
    *,
    on_ready: Callable[[str], None] | None = None,
) -> int | None:
    """Serve a gateway in front of `config.upstream`; returns the signal that stopped it, if one did."""
    return await serve_http(Gateway(config).app(), host, port, on_ready=on_ready)


@contextlib.asynccontextmanager
async def running(config: GatewayConfig, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """A gateway serving for the duration of the block (on a free port by default); yields its base URL."""
    ready, url = anyio.Event(), []

    def on_ready(base: str) -> None:
        url.append(base)
        ready.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(serve, config, host, port, on_ready=on_ready))
        await ready.wait()
        try:
            yield url[0]
        finally:
            tg.cancel_scope.cancel()
