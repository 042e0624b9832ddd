"""mcpgym.pool against plain `mcpgym serve … --http` subprocesses (the same data path as Ray's
actors and Kubernetes pods): routing by episode, load spreading, dead and returning replicas."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter as Tally
from collections.abc import Iterator
from dataclasses import dataclass

import anyio
import httpx2
import pytest

import mcpgym
from mcpgym._core.errors import AT_CAPACITY
from mcpgym.harness.rollout import rollout, run_episode
from mcpgym.harness.types import AssistantTurn, ChatTool, Message, ToolCall
from mcpgym.pool import Pool, Replica

pytestmark = pytest.mark.anyio


@dataclass
class Server:
    """One `mcpgym serve tests.envs:Mortal --http` process (its `pid` tool tells who answered)."""

    process: mcpgym.ServerProcess

    @property
    def url(self) -> str:
        return self.process.url

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].split("/")[0])

    def kill(self) -> None:
        self.process.kill()
        self.process.stop()


def start_servers(count: int, *extra: str, port: int = 0) -> list[Server]:
    argv = ["python", "-m", "mcpgym", "serve", "tests.envs:Mortal", "--http", "--port", str(port), *extra]
    return [Server(mcpgym.ServerProcess(argv).start()) for _ in range(count)]


def _two_servers() -> Iterator[list[Server]]:
    servers = start_servers(2)
    try:
        yield servers
    finally:
        for server in servers:
            server.kill()


@pytest.fixture
def two() -> Iterator[list[Server]]:
    """Two servers of this test's own (it may kill them)."""
    yield from _two_servers()


@pytest.fixture(scope="module")
def shared() -> Iterator[list[Server]]:
    """Two servers for the tests that leave them as they found them (every episode closed)."""
    yield from _two_servers()


def pids(servers: list[Server]) -> dict[str, int]:
    return {s.url: s.pid for s in servers}


async def answered_by(env: mcpgym.AsyncEnv) -> int:
    result = await env.call_tool("pid")
    assert not result.is_error, result
    assert result.observation.structured_content is not None
    return int(result.observation.structured_content["result"])


async def test_every_step_goes_to_the_replica_holding_its_episode(shared: list[Server]) -> None:
    pool, owner = Pool([s.url for s in shared]), pids(shared)
    placed: Tally[str] = Tally()

    async def worker() -> None:
        async with pool.connect() as env:
            for _ in range(4):
                await env.reset()
                assert env.handle is not None and env.handle.episode_id == env.episode_id
                placed[env.handle.url] += 1
                for _ in range(3):
                    assert await answered_by(env) == owner[env.handle.url]

    async with anyio.create_task_group() as tg:
        for _ in range(6):
            tg.start_soon(worker)
    assert sum(placed.values()) == 24 and set(placed) == set(owner)  # both replicas served episodes


async def test_reset_picks_the_replica_with_the_fewest_live_episodes(shared: list[Server]) -> None:
    busy, idle = shared
    async with mcpgym.connect(busy.url) as a, mcpgym.connect(busy.url) as b:
        await a.reset()
        await b.reset()  # busy now holds 2 episodes of another client; /healthz says so
        pool = Pool([busy.url, idle.url])
        async with pool.connect() as e1, pool.connect() as e2, pool.connect() as e3:
            for env in (e1, e2):
                await env.reset()
                assert env.handle is not None and env.handle.url == idle.url
            assert [r.episodes for r in pool.replicas] == [2, 2]
            await e3.reset()  # a tie: either replica
            await e1.close_episode()  # our own bookkeeping: idle is back to 1 of ours
            assert pool.replicas[1].episodes == 1 + (e3.handle is not None and e3.handle.url == idle.url)


class CountingPool(Pool):
    probes: int = 0

    async def _probe(self, http: httpx2.AsyncClient, replica: Replica) -> None:
        self.probes += 1
        await super()._probe(http, replica)


async def test_resets_use_cached_health_not_a_request_each(shared: list[Server]) -> None:
    pool = CountingPool([s.url for s in shared], refresh_interval=3600)
    async with pool.connect() as env:
        for _ in range(10):
            await env.reset()
    assert pool.probes == 2  # one /healthz per replica, at the first refresh
    assert [r.episodes for r in pool.replicas] == [0, 0]  # every episode we started was closed


async def test_a_dead_replica_truncates_its_episodes_and_a_returning_one_rejoins(two: list[Server]) -> None:
    pool, owner = Pool([s.url for s in two], refresh_interval=3600), pids(two)
    by_url = {s.url: s for s in two}
    async with pool.connect() as doomed, pool.connect() as survivor:
        await doomed.reset()
        await survivor.reset()
        assert doomed.handle is not None and survivor.handle is not None
        assert doomed.handle.url != survivor.handle.url  # spread: one episode each
        dead = by_url[doomed.handle.url]
        dead.kill()

        with pytest.raises(mcpgym.MCPError, match=r"truncated: its replica .* is unreachable") as lost:
            await doomed.call_tool("pid")
        assert lost.value.code == -32000
        with pytest.raises(mcpgym.MCPError, match="truncated"):  # the same verdict, not a new one
            await doomed.state()
        assert await answered_by(survivor) == owner[survivor.handle.url]  # the other replica carries on

        for _ in range(3):  # new episodes only go to the live replica
            await doomed.reset()
            assert doomed.handle.url == survivor.handle.url
            assert await answered_by(doomed) == owner[survivor.handle.url]
        assert "down" in pool.describe() and dead.url in pool.describe()

        (back,) = start_servers(1, port=dead.port)  # restarted on the same address
        try:
            await pool.refresh(force=True)  # what the next stale refresh does on its own
            assert all(r.live for r in pool.replicas)
            await doomed.reset()  # the returning replica holds 0 episodes, the other 1
            assert doomed.handle.url == back.url
            assert await answered_by(doomed) == back.pid
        finally:
            back.kill()


async def test_a_reset_on_a_replica_found_dead_moves_to_a_live_one(two: list[Server]) -> None:
    pool = Pool([s.url for s in two], refresh_interval=3600)
    async with pool.connect() as env:
        two[0].kill()  # the cached reading still calls it live, with the fewest episodes
        for _ in range(3):
            await env.reset()
            assert env.handle is not None and env.handle.url == two[1].url
    assert not pool.replicas[0].live and pool.replicas[1].live


async def test_a_full_pool_is_a_clear_error() -> None:
    servers = start_servers(2, "--max-episodes", "1")
    try:
        pool = Pool([s.url for s in servers])
        async with pool.connect() as a, pool.connect() as b, pool.connect() as c:
            await a.reset()
            await b.reset()
            with pytest.raises(mcpgym.MCPError, match="No live replica can take a new episode") as err:
                await c.reset()
            assert err.value.code == AT_CAPACITY  # every replica refused on the code, so the pool says so too
            await a.close_episode()
            await c.reset()  # capacity freed as an episode ended
    finally:
        for server in servers:
            server.kill()


async def test_a_pool_with_no_live_replica_says_so() -> None:
    (server,) = start_servers(1)
    server.kill()
    async with Pool([server.url]).connect() as env:
        with pytest.raises(mcpgym.MCPError, match="No live replica") as err:
            await env.reset()
        assert "/healthz failed" in str(err.value)


# -- the harness's rollout API over a pool ---------------------------------------------------


async def pid_policy(messages: list[Message], tools: list[ChatTool], /) -> AssistantTurn:
    """Ask for the server's pid twice, then stop (no model: the harness loop is what is tested)."""
    turn = sum(m["role"] == "assistant" for m in messages)
    if turn >= 2:
        return AssistantTurn(content="done")
    return AssistantTurn(tool_calls=[ToolCall(id=f"c{turn}", name="pid", arguments_json="{}", arguments={})])


async def test_concurrent_harness_episodes_over_a_pool(shared: list[Server]) -> None:
    pool, owner = Pool([s.url for s in shared]), pids(shared)
    routed: list[bool] = []

    async def worker() -> None:
        async with pool.connect() as env:  # a harness worker: one connection, many episodes
            for _ in range(3):
                trajectory = await run_episode(env, pid_policy, max_turns=4)
                assert trajectory.status == "ok" and len(trajectory.turns) == 3, trajectory.error
                assert env.handle is not None
                routed.extend(int(s.output) == owner[env.handle.url] for t in trajectory.turns for s in t.steps)

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(worker)
    assert len(routed) == 24 and all(routed)


async def test_harness_rollout_takes_a_pool_as_its_target(shared: list[Server]) -> None:
    pool = Pool([s.url for s in shared])
    trajectories = await rollout(pool, pid_policy, episodes=8, concurrency=4)
    assert [t.status for t in trajectories] == ["ok"] * 8


def test_importing_mcpgym_and_its_pool_never_imports_ray() -> None:
    code = "import sys, mcpgym, mcpgym.pool; assert 'ray' not in sys.modules, 'ray was imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
