"""Replica bookkeeping for a pool of environment servers: which replicas are live, how many
episodes each holds, and which one a new episode goes to.

Layer: pool core. Speaks only `GET /healthz` (httpx2); no MCP, no Ray. `_routing.PoolEnv` drives
episodes on top of it; `ray.RayPool` and Kubernetes only supply the URLs.

Load figures come from each server's `/healthz` ("episodes": live episodes, every client's),
fetched at most once per `refresh_interval` and kept current in between by this process's own
bookkeeping (+1 when a reset is routed, -1 when an episode ends), so a reset does not cost an
extra request.

Replicas marked down are re-probed (that is how they rejoin) with backoff, and apart from
placement: a reset's refresh hands their probes to the resetting client's task group instead of
waiting for them, because a hung replica (accepting connections, never answering) makes each
probe last the whole `health_timeout`. Only a reset that finds no live replica waits for them.
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
from anyio.abc import TaskGroup
from mcp_types import CONNECTION_CLOSED

from mcpgym._core.errors import AT_CAPACITY, MCPError

if TYPE_CHECKING:
    from mcpgym.pool._routing import PoolEnv

Discover = Callable[[], Awaitable[Sequence[str]]]
"""Returns the pool's current replica URLs (a Ray pool's actors can move to new ports)."""

HEALTH_PATH = "/healthz"  # mcpgym._server.http.HEALTH_PATH, restated: this layer must not import the server


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
    """`Pool.clock()` at the last probe (or at being marked down, or found full)."""
    down_since: float | None = None
    """`Pool.clock()` when it was marked down (None while live): how long its backoff is."""
    probing: bool = False
    """A background probe of it is in flight (so no refresh starts a second one)."""

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
    max_backoff: float = 30.0
    """Cap on the re-probe interval of a replica that stays down (it doubles from `refresh_interval`)."""
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)
    """Seconds, for reading ages and backoff (tests pass a controllable one)."""
    replicas: list[Replica] = field(init=False)

    def __post_init__(self) -> None:
        self.replicas = [Replica(url) for url in dict.fromkeys(self.urls)]
        if not self.replicas and self.discover is None:
            raise ValueError("a Pool needs replica URLs (or a `discover` callable)")
        self._lock: anyio.Lock | None = None
        self._discovered = -math.inf  # clock() of the last `discover` call

    def connect(self, **options: Any) -> PoolEnv:
        """A new client of this pool: `async with pool.connect() as env:` (see `PoolEnv`)."""
        from mcpgym.pool._routing import PoolEnv  # the door imports this module, not the other way

        return PoolEnv(self, **options)

    def __mcpgym_connect__(self, **options: Any) -> PoolEnv:
        """What `mcpgym.connect(pool)` (and so `harness.rollout(pool, ...)`) calls."""
        return self.connect(**options)

    # -- choosing ---------------------------------------------------------------------------

    async def choose(self, exclude: Iterable[Replica] = (), *, background: TaskGroup | None = None) -> Replica:
        """Reserve a slot on the live replica with the fewest episodes (refreshing if stale).

        Down replicas due for a re-probe are probed in `background` (see `refresh`), or inline
        when no live replica can take the episode.
        """
        await self.refresh(background=background)
        skip = set(map(id, exclude))
        candidates = self._candidates(skip)
        if not candidates:
            await self.refresh(force=True)  # every replica looked down or full: maybe one is back
            candidates = self._candidates(skip)
        if not candidates:
            # Live but full is the servers' own AT_CAPACITY (a caller may retry later); none live is a lost connection.
            full = any(r.live and r.full for r in self.replicas)
            code = AT_CAPACITY if full else CONNECTION_CLOSED
            raise MCPError(code, f"No live replica can take a new episode: {self.describe()}")
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
        replica.checked = self.clock()
        if replica.down_since is None:
            replica.down_since = replica.checked

    def mark_full(self, replica: Replica) -> None:
        """The replica refused a reset at capacity: treat it as full until the next probe."""
        replica.max_episodes = min(replica.max_episodes or replica.episodes, replica.episodes)
        replica.checked = self.clock()

    def describe(self) -> str:
        return (
            "; ".join(
                f"{r.url} {'live' if r.live else 'down'} ({r.episodes} episodes{', ' + r.error if r.error else ''})"
                for r in self.replicas
            )
            or "no replicas"
        )

    # -- probing ----------------------------------------------------------------------------

    async def refresh(self, *, force: bool = False, background: TaskGroup | None = None) -> None:
        """Re-read `/healthz` of every replica that is due (of all of them if `force`).

        A live replica is due once its reading is `refresh_interval` old, and is probed before
        this returns: placement needs its count. A down one is due with backoff (`_due`) and is
        probed in `background`, so the caller does not wait up to `health_timeout` for a replica
        that may be hung; without `background` it is left for a refresh that has one. `force`
        probes everything now and waits (what to do when no live replica is left).
        """
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:  # one refresh at a time; the others then find fresh readings
            now = self.clock()
            if self.discover is not None and (force or now - self._discovered >= self.refresh_interval):
                self._adopt(await self.discover())
                self._discovered = now = self.clock()
            due = [r for r in self.replicas if force or (not r.probing and self._due(r, now))]
            if not force and background is not None:
                for replica in due:
                    if not replica.live:
                        replica.probing = True  # set now: the next refresh must not start another
                        background.start_soon(self._probe_apart, replica)
            waited = [r for r in due if force or r.live]
            if not waited:
                return
            async with httpx2.AsyncClient(timeout=self.health_timeout) as http, anyio.create_task_group() as tg:
                for replica in waited:
                    tg.start_soon(self._probe, http, replica)

    def _due(self, replica: Replica, now: float) -> bool:
        """Whether `replica`'s reading is old enough to probe it again.

        A down replica waits as long again as it has been down (`refresh_interval`, then 1, 2,
        4… times that, up to `max_backoff`): one that stays dead or hung costs ever fewer
        probes, and one back after a blip rejoins quickly.
        """
        wait = self.refresh_interval
        if replica.down_since is not None:
            wait = min(max(wait, replica.checked - replica.down_since), max(self.max_backoff, wait))
        return now - replica.checked >= wait

    def _adopt(self, urls: Sequence[str]) -> None:
        """Take a new URL list: keep the Replica (and its counts) of every URL still listed."""
        known = {r.url: r for r in self.replicas}
        self.replicas = [known.get(url) or Replica(url) for url in dict.fromkeys(urls)]

    async def _probe_apart(self, replica: Replica) -> None:
        """Probe a down replica in a background task (cancelled with its owner: the replica then
        stays down, with its old reading, so the next refresh probes it again)."""
        try:
            async with httpx2.AsyncClient(timeout=self.health_timeout) as http:
                await self._probe(http, replica)
        finally:
            replica.probing = False

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
        replica.live, replica.error, replica.down_since, replica.checked = True, None, None, self.clock()
