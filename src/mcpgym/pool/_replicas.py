"""Replica bookkeeping for a pool of environment servers: which replicas are live, how many
episodes each holds, and which one a new episode goes to.

Layer: pool core. Speaks only `GET /healthz` (httpx2); no MCP, no Ray. `_env.PoolEnv` drives
episodes on top of it; `ray.RayPool` and Kubernetes only supply the URLs.

Load figures come from each server's `/healthz` ("episodes": live episodes, every client's),
fetched at most once per `refresh_interval` and kept current in between by this process's own
bookkeeping (+1 when a reset is routed, -1 when an episode ends), so a reset does not cost an
extra request. The same refresh re-probes replicas marked down, which is how they rejoin.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

import anyio
import httpx2
from mcp_types import CONNECTION_CLOSED

from mcpgym._errors import MCPError

if TYPE_CHECKING:
    from mcpgym.pool._env import PoolEnv

Discover = Callable[[], Awaitable[Sequence[str]]]
"""Returns the pool's current replica URLs (a Ray pool's actors can move to new ports)."""

HEALTH_PATH = "/healthz"  # mcpgym._http.HEALTH_PATH, restated: this layer must not import the server


@dataclass(eq=False)
class Replica:
    """One environment server as the pool sees it (identity is the object, not the URL)."""

    url: str
    """The MCP endpoint, `http://host:port/mcp`."""
    episodes: int = 0
    """Live episodes: the last `/healthz` count plus our own resets since, minus our own closes."""
    max_episodes: int | None = None
    live: bool = True
    error: str | None = None
    """Why the replica was marked down (None while live)."""
    checked: float = -math.inf
    """`time.monotonic()` of the last probe (or of being marked down)."""

    @property
    def health_url(self) -> str:
        return urljoin(self.url, HEALTH_PATH)

    @property
    def full(self) -> bool:
        return self.max_episodes is not None and self.episodes >= self.max_episodes


@dataclass
class Pool:
    """A set of environment servers (the same environment on each) and where episodes go.

    ```python
    pool = mcpgym.pool.Pool(["http://10.0.0.5:8000/mcp", "http://10.0.0.6:8000/mcp"])
    async with pool.connect() as env:        # an AsyncEnv: the same Gym API as mcpgym.connect
        await env.reset()                    # on the replica with the fewest live episodes
        await env.call_tool("add", {"n": 1}) # straight to that replica
    ```

    One `Pool` is shared by any number of concurrent `pool.connect()` clients (a rollout's
    workers); its counts are what keeps them from piling onto one replica.
    """

    urls: Iterable[str] = ()
    refresh_interval: float = 5.0
    """Seconds a `/healthz` reading (and a "down" verdict) stays trusted."""
    health_timeout: float = 2.0
    discover: Discover | None = None
    """Called on each refresh for the current URL list, instead of the fixed `urls`."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra HTTP headers for every replica (e.g. `Authorization: Bearer …` for `--token`)."""
    mode: str = "auto"
    read_timeout: float | None = None
    replicas: list[Replica] = field(init=False)

    def __post_init__(self) -> None:
        self.replicas = [Replica(url) for url in dict.fromkeys(self.urls)]
        if not self.replicas and self.discover is None:
            raise ValueError("a Pool needs replica URLs (or a `discover` callable)")
        self._lock: anyio.Lock | None = None

    def connect(self, **options: Any) -> PoolEnv:
        """A new client of this pool: `async with pool.connect() as env:` (see `PoolEnv`)."""
        from mcpgym.pool._env import PoolEnv  # the door imports this module, not the other way

        return PoolEnv(self, **options)

    def __mcpgym_connect__(self, **options: Any) -> PoolEnv:
        """What `mcpgym.connect(pool)` (and so `harness.rollout(pool, ...)`) calls."""
        return self.connect(**options)

    # -- choosing ---------------------------------------------------------------------------

    async def choose(self, exclude: Iterable[Replica] = ()) -> Replica:
        """Reserve a slot on the live replica with the fewest episodes (refreshing if stale)."""
        await self.refresh()
        skip = set(map(id, exclude))
        candidates = self._candidates(skip)
        if not candidates:
            await self.refresh(force=True)  # every replica looked down or full: maybe one is back
            candidates = self._candidates(skip)
        if not candidates:
            raise MCPError(CONNECTION_CLOSED, f"No live replica can take a new episode: {self.describe()}")
        best = min(candidates, key=lambda r: r.episodes)
        best.episodes += 1  # counted now, so concurrent resets spread before any of them answers
        return best

    def any_live(self) -> Replica:
        """A live replica for requests that belong to no episode (`tools/list`)."""
        for replica in self.replicas:
            if replica.live:
                return replica
        raise MCPError(CONNECTION_CLOSED, f"No live replica in the pool: {self.describe()}")

    def _candidates(self, skip: set[int]) -> list[Replica]:
        return [r for r in self.replicas if r.live and not r.full and id(r) not in skip]

    def release(self, replica: Replica) -> None:
        """One of our episodes on `replica` ended (or its reset failed)."""
        replica.episodes = max(0, replica.episodes - 1)

    def mark_down(self, replica: Replica, reason: str) -> None:
        """Stop routing new episodes to `replica` until a later probe finds it answering."""
        replica.live, replica.error, replica.episodes = False, reason, 0
        replica.checked = time.monotonic()

    def mark_full(self, replica: Replica) -> None:
        """The replica refused a reset at capacity: treat it as full until the next probe."""
        replica.max_episodes = min(replica.max_episodes or replica.episodes, replica.episodes)
        replica.checked = time.monotonic()

    def describe(self) -> str:
        return (
            "; ".join(
                f"{r.url} {'live' if r.live else 'down'} ({r.episodes} episodes{', ' + r.error if r.error else ''})"
                for r in self.replicas
            )
            or "no replicas"
        )

    # -- probing ----------------------------------------------------------------------------

    async def refresh(self, *, force: bool = False) -> None:
        """Re-read `/healthz` of every replica whose reading is older than `refresh_interval`."""
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:  # one refresh at a time; the others then find fresh readings
            if self.discover is not None and (force or self._stale()):
                self._adopt(await self.discover())
            now = time.monotonic()
            stale = [r for r in self.replicas if force or now - r.checked >= self.refresh_interval]
            if not stale:
                return
            async with httpx2.AsyncClient(timeout=self.health_timeout) as http, anyio.create_task_group() as tg:
                for replica in stale:
                    tg.start_soon(self._probe, http, replica)

    def _stale(self) -> bool:
        now = time.monotonic()
        return not self.replicas or any(now - r.checked >= self.refresh_interval for r in self.replicas)

    def _adopt(self, urls: Sequence[str]) -> None:
        """Take a new URL list: keep the Replica (and its counts) of every URL still listed."""
        known = {r.url: r for r in self.replicas}
        self.replicas = [known.get(url) or Replica(url) for url in dict.fromkeys(urls)]

    async def _probe(self, http: httpx2.AsyncClient, replica: Replica) -> None:
        try:
            response = await http.get(replica.health_url, headers=self.headers)
            response.raise_for_status()
            body = response.json()
            episodes, limit = int(body["episodes"]), body.get("max_episodes")
            limit = int(limit) if limit is not None else None
        except (httpx2.HTTPError, OSError, ValueError, KeyError, TypeError) as exc:
            self.mark_down(replica, f"/healthz failed: {type(exc).__name__}: {exc}")
            return
        replica.episodes, replica.max_episodes = episodes, limit
        replica.live, replica.error, replica.checked = True, None, time.monotonic()
