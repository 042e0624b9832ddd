"""`RayPool`: N environment servers as Ray actors, addressed by an episode-routed `Pool`.

Layer: placement only (needs `mcpgym[ray]`). Each actor runs the unchanged MCP server
(`GymServer.serve_http`, uvicorn on the actor's own event loop, its own port); Ray starts,
places and restarts them. Ray is not on the data path: clients talk HTTP straight to the
actor that holds their episode (`RayPool.pool()` → `mcpgym.pool.Pool`), so a step costs what
it costs against a plain server. See rfcs/0006-scale-out.md.

```python
with RayPool("mcpgym.servers.echo:Echo", replicas=4, address="auto") as ray_pool:
    async with ray_pool.pool().connect() as env:
        await env.reset()
```

A killed actor takes its episodes with it (their next request raises `MCPError`, "truncated");
Ray restarts it (`max_restarts`), it serves again on a new port, and the pool picks the new
URL up on its next refresh (`discover`), so it rejoins.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Self

import anyio

from mcpgym._core.extras import needs

with needs("ray", "mcpgym.pool.ray"):
    import ray
    import ray.exceptions
    import ray.util

from mcpgym._server.gym_server import GymServer
from mcpgym._targets.target import load_environment
from mcpgym.pool._replicas import Pool


class EnvServer:
    """The actor: serves one environment over streamable HTTP, started on first `url()`.

    Started lazily (not in `__init__`) because Ray re-runs `__init__` on a restart and an async
    actor's constructor cannot await: whoever asks for the URL next (the pool's `discover`)
    brings the restarted server up.
    """

    def __init__(self, target: str, host: str | None, options: dict[str, Any]) -> None:
        self.target, self.options = target, options
        # On a cluster the driver reaches the actor at its node's address; tests pass 127.0.0.1.
        self.host: str = host or ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        self._url: str | None = None
        self._server: asyncio.Task[int | None] | None = None
        self._starting = asyncio.Lock()

    async def url(self) -> str:
        async with self._starting:
            if self._url is None:
                self._url = await self._start()
            return self._url

    async def _start(self) -> str:
        gym = GymServer(load_environment(self.target), **self.options.get("server", {}))
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        options = {"allowed_hosts": [f"{self.host}:*"], **self.options.get("http", {})}
        # Ray owns this process's event loop and no task scope spans an actor's life, so the
        # server is a task held here: `stop()` ends it, and it dies with the process otherwise.
        self._server = asyncio.create_task(
            gym.serve_http(self.host, 0, on_ready=lambda base: ready.set_result(f"{base}/mcp"), **options)
        )
        waiting: set[asyncio.Future[Any]] = {self._server, ready}
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if self._server.done():  # it ended before listening: raise why (port in use, import, …)
            self._server.result()
            raise RuntimeError(f"the {self.target} server exited before listening")
        return ready.result()

    def pid(self) -> int:
        return os.getpid()

    def crash(self) -> None:
        """Die at once, as a crash or an OOM kill would (the process exits; Ray may restart it)."""
        os._exit(1)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.cancel()
            with contextlib.suppress(asyncio.CancelledError):  # the cancellation we just asked for
                await self._server


class RayPool:
    """Start `replicas` `EnvServer` actors for `target` (`"package.module:Class"`, `"package.module"` or
    `"path/to/env.py[:Class]"`: text each actor loads; see `mcpgym.connect`).

    `address`: `ray.init(address=…)` when Ray is not initialised yet (`"auto"` joins an
    existing cluster; None starts a local instance); an initialised Ray is used as is.
    `num_cpus` per actor reserves room for the environment's work. `max_restarts` lets Ray
    bring dead actors back (-1: always). `host`: the address actors bind (default: their
    node's IP, so other nodes reach them; "127.0.0.1" for a single machine).
    `server_options` go to `GymServer` (e.g. `max_episodes`), `http_options` to `http_app`.
    """

    def __init__(
        self,
        target: str,
        replicas: int = 2,
        *,
        address: str | None = None,
        num_cpus: float = 1.0,
        max_restarts: int = -1,
        host: str | None = None,
        server_options: dict[str, Any] | None = None,
        http_options: dict[str, Any] | None = None,
        start_timeout: float = 120.0,
        url_timeout: float = 5.0,
    ) -> None:
        self.target, self.replicas, self.address = target, replicas, address
        self.num_cpus, self.max_restarts, self.host = num_cpus, max_restarts, host
        self.options = {"server": server_options or {}, "http": http_options or {}}
        self.start_timeout, self.url_timeout = start_timeout, url_timeout
        self.actors: list[Any] = []
        self.urls: list[str] = []

    def start(self) -> list[str]:
        """Start the actors (in parallel) and wait until each serves; returns their URLs."""
        if not ray.is_initialized():
            ray.init(address=self.address)
        # max_task_retries: a control call (`url`, `pid`) to a restarting actor waits for the
        # restart instead of failing; they are idempotent, so retrying them is safe.
        actor_cls = ray.remote(EnvServer).options(
            num_cpus=self.num_cpus, max_restarts=self.max_restarts, max_task_retries=-1, max_concurrency=1000
        )
        self.actors = [actor_cls.remote(self.target, self.host, self.options) for _ in range(self.replicas)]
        self.urls = list(ray.get([a.url.remote() for a in self.actors], timeout=self.start_timeout))
        return self.urls

    def pool(self, **options: Any) -> Pool:
        """An episode-routed client pool over the actors; it re-asks them for URLs on refresh."""
        return Pool(self.urls, discover=self.discover, **options)

    async def discover(self) -> Sequence[str]:
        """The URLs of the actors that answer now (restarted ones serve on a new port)."""
        found: list[str | None] = [None] * len(self.actors)

        async def ask(index: int, actor: Any) -> None:
            with anyio.move_on_after(self.url_timeout):  # a restarting actor: ask again next refresh
                try:
                    found[index] = await actor.url.remote()
                except ray.exceptions.RayActorError:
                    return  # dead (and not restarting) or unavailable: not in the pool for now

        async with anyio.create_task_group() as tg:
            for index, actor in enumerate(self.actors):
                tg.start_soon(ask, index, actor)
        self.urls = [url for url in found if url is not None]
        return self.urls

    def crash(self, index: int) -> None:
        """Crash actor `index` and return once Ray has seen its process die (it then restarts it,
        within `max_restarts`). `ray.kill` returns before the process is gone; this does not."""
        try:
            ray.get(self.actors[index].crash.options(max_task_retries=0).remote(), timeout=self.start_timeout)
        except ray.exceptions.RayActorError:
            return  # the death we caused, reported once Ray saw the worker exit
        raise RuntimeError(f"actor {index} survived crash()")

    def pids(self) -> list[int]:
        return list(ray.get([a.pid.remote() for a in self.actors], timeout=self.start_timeout))

    def shutdown(self) -> None:
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        self.actors, self.urls = [], []

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()
