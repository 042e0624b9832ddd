"""mcpgym.pool.ray on a real local Ray instance, loopback only: 2 actors, 27 episodes, every step
answered by the actor holding its episode, one actor killed mid-run and rejoining after Ray
restarts it. Ray's temp dir, sockets and auth token stay under the test's tmp dir."""

from __future__ import annotations

import importlib
from collections import Counter as Tally
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
import pytest

import mcpgym
from mcpgym.pool import Pool

if TYPE_CHECKING:
    from mcpgym.pool.ray import RayPool

pytestmark = [pytest.mark.anyio, pytest.mark.ray]

RAY_ENV = {
    # Linux Ray otherwise re-resolves 127.0.0.1 to the machine's network address
    # (services.get_node_ip_address); "0" makes it use the loopback address throughout.
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
}


@pytest.fixture(scope="module")
def ray_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayPool]:
    tmp = tmp_path_factory.mktemp("ray")
    with pytest.MonkeyPatch.context() as env:
        # HOME: Ray 2.60 writes its auth token to ~/.ray/auth_token. Set before `import ray`:
        # Ray reads these when its modules load.
        for name, value in {**RAY_ENV, "HOME": str(tmp), "RAY_TMPDIR": str(tmp)}.items():
            env.setenv(name, value)
        ray: Any = importlib.import_module("ray")
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            _temp_dir=str(tmp / "t"),
            _node_ip_address="127.0.0.1",
            log_to_driver=False,
        )
        assert (tmp / ".ray" / "auth_token").exists()  # not in the real home
        try:
            from mcpgym.pool.ray import RayPool

            with RayPool("tests.envs:Mortal", replicas=2, host="127.0.0.1", num_cpus=1) as pool:
                yield pool
        finally:
            ray.shutdown()


async def answered_by(env: mcpgym.AsyncEnv) -> int:
    result = await env.call_tool("pid")
    assert not result.is_error and result.observation.structured_content is not None, result
    return int(result.observation.structured_content["result"])


async def play(pool: Pool, owner: dict[str, int], placed: Tally[str], episodes: int) -> None:
    """One worker: `episodes` episodes of 3 steps, each step checked against its replica."""
    async with pool.connect() as env:
        for _ in range(episodes):
            await env.reset()
            assert env.handle is not None
            placed[env.handle.url] += 1
            for _ in range(3):
                assert await answered_by(env) == owner[env.handle.url]


async def live_episodes(url: str) -> int:
    async with httpx2.AsyncClient() as http:
        return int((await http.get(url.replace("/mcp", "/healthz"))).json()["episodes"])


async def test_actors_serve_routed_episodes_and_survive_a_killed_actor(ray_pool: RayPool) -> None:
    assert all(url.startswith("http://127.0.0.1:") for url in ray_pool.urls)  # loopback only
    owner = dict(zip(ray_pool.urls, ray_pool.pids(), strict=True))
    pool, placed = ray_pool.pool(refresh_interval=3600), Tally[str]()

    with anyio.fail_after(50):
        async with anyio.create_task_group() as tg:  # 12 episodes, 4 at a time
            for _ in range(4):
                tg.start_soon(play, pool, owner, placed, 3)
        assert set(placed) == set(owner) and sum(placed.values()) == 12

        async with pool.connect() as doomed, pool.connect() as survivor:
            await doomed.reset()
            await survivor.reset()
            assert doomed.handle is not None and survivor.handle is not None
            assert doomed.handle.url != survivor.handle.url  # fewest episodes: one on each actor
            killed = ray_pool.urls.index(doomed.handle.url)
            await anyio.to_thread.run_sync(ray_pool.crash, killed)  # Ray restarts it, on a new port

            with pytest.raises(mcpgym.MCPError, match="truncated: its replica"):
                await doomed.call_tool("pid")
            assert await answered_by(survivor) == owner[survivor.handle.url]
            for _ in range(5):  # new episodes go to the live actor
                await doomed.reset()
                assert doomed.handle.url == survivor.handle.url
                assert await answered_by(doomed) == owner[survivor.handle.url]

        # Wait for the restart itself (a call to a restarting actor waits for it), then let the
        # pool rediscover: the restarted actor rejoins under its new URL and new pid.
        restarted_url = await ray_pool.actors[killed].url.remote()
        await pool.refresh(force=True)
        assert restarted_url in [r.url for r in pool.replicas] and all(r.live for r in pool.replicas)
        owner = dict(zip(ray_pool.urls, ray_pool.pids(), strict=True))
        placed.clear()
        async with anyio.create_task_group() as tg:  # 8 more episodes over both actors
            for _ in range(4):
                tg.start_soon(play, pool, owner, placed, 2)
        assert placed[restarted_url] > 0 and sum(placed.values()) == 8

        for url in ray_pool.urls:  # every episode this test started was closed on its actor
            assert await live_episodes(url) == 0
