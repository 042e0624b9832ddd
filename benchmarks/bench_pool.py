"""Per-step cost through `mcpgym.pool` vs. direct to one server; 1 vs 2 replicas; Ray actor start.

    python -m benchmarks.bench_pool [--episodes 40] [--steps 10] [--concurrency 8] [--ray]

Servers are `mcpgym serve tests.envs:Counter --http` subprocesses on 127.0.0.1 (the same data
path as Ray actors: the pool client talks HTTP straight to the replica). Rows:

- direct:   `concurrency` clients, each `mcpgym.connect(url)` to one server;
- pool x1:  the same clients as `Pool([url]).connect()` (the pool's own cost per step);
- pool x2:  two replicas (no speed-up is expected on a 2-core box: the clients and both
            servers share the same 2 cores, and the client side alone uses about one);
- with --ray: `ray.init` and `RayPool.start` (2 actors) wall time, then pool x2 over the actors.

Each client plays `episodes / concurrency` episodes of `steps` `add` calls; steps/s counts
tool calls only (resets excluded), latency is per `add` call.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import anyio

import mcpgym
from mcpgym.pool import Pool

Connect = Callable[[], mcpgym.AsyncEnv]


def start_servers(count: int) -> list[mcpgym.ServerProcess]:
    argv = "python -m mcpgym serve tests.envs:Counter --http --port 0"
    return [mcpgym.ServerProcess(argv).start() for _ in range(count)]


def stop(servers: list[mcpgym.ServerProcess]) -> None:
    for server in servers:
        server.stop()


async def run(connect: Connect, episodes: int, steps: int, concurrency: int) -> dict[str, float]:
    latencies: list[float] = []

    async def client(count: int) -> None:
        async with connect() as env:
            for _ in range(count):
                await env.reset()
                for _ in range(steps):
                    t0 = time.perf_counter()
                    result = await env.call_tool("add", {"n": 1})
                    latencies.append(time.perf_counter() - t0)
                    if result.is_error or result.done:  # Counter truncates after max_steps
                        break

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(concurrency):
            tg.start_soon(client, episodes // concurrency + (i < episodes % concurrency))
    wall = time.perf_counter() - start
    quantiles = statistics.quantiles(latencies, n=100)
    return {"steps": len(latencies), "steps/s": len(latencies) / wall, "p50": quantiles[49], "p99": quantiles[98]}


def row(name: str, stats: dict[str, Any]) -> str:
    return (
        f"| {name} | {stats['steps']} | {stats['steps/s']:,.0f} | {stats['p50'] * 1e3:.2f} | {stats['p99'] * 1e3:.2f} |"
    )


async def bench(args: argparse.Namespace) -> list[str]:
    rows: list[str] = []
    servers = start_servers(2)
    try:
        urls = [server.url for server in servers]
        shape = (args.episodes, args.steps, args.concurrency)
        await run(lambda: mcpgym.connect(urls[0]), 4, 2, 2)  # warm both paths (imports, first connections)
        rows.append(row("direct, 1 server", await run(lambda: mcpgym.connect(urls[0]), *shape)))
        one = Pool(urls[:1])
        rows.append(row("pool, 1 replica", await run(one.connect, *shape)))
        two = Pool(urls)
        rows.append(row("pool, 2 replicas", await run(two.connect, *shape)))
    finally:
        stop(servers)
    return rows


def bench_ray(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    os.environ.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0")
    with tempfile.TemporaryDirectory(prefix="ray") as tmp:
        os.environ.update(HOME=tmp, RAY_TMPDIR=tmp)  # Ray's auth token and session files
        t0 = time.perf_counter()
        import ray

        from mcpgym.pool.ray import RayPool

        ray.init(num_cpus=2, include_dashboard=False, _temp_dir=f"{tmp}/t", _node_ip_address="127.0.0.1")
        t1 = time.perf_counter()
        ray_pool = RayPool("tests.envs:Counter", replicas=2, host="127.0.0.1", num_cpus=1)
        ray_pool.start()
        t2 = time.perf_counter()
        try:
            shape = (args.episodes, args.steps, args.concurrency)
            stats = anyio.run(run, ray_pool.pool().connect, *shape)
        finally:
            ray_pool.shutdown()
            ray.shutdown()
        timing = [f"| import ray + ray.init | {t1 - t0:.1f} s |"]
        timing.append(f"| RayPool.start (2 actors, serving) | {t2 - t1:.1f} s |")
        return [row("Ray actors, 2 replicas", stats)], timing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--ray", action="store_true", help="also time Ray start-up and a pool over 2 actors")
    args = parser.parse_args()
    rows = anyio.run(bench, args)
    timing: list[str] = []
    if args.ray:
        ray_rows, timing = bench_ray(args)
        rows += ray_rows
    print(f"episodes={args.episodes} steps/episode<={args.steps} concurrency={args.concurrency} cores={os.cpu_count()}")
    print("| path | steps | steps/s | p50 ms | p99 ms |\n|---|---|---|---|---|")
    print("\n".join(rows))
    if timing:
        print("\n| start-up | wall |\n|---|---|")
        print("\n".join(timing))


if __name__ == "__main__":
    main()
