"""Wrapping a third-party MCP server: reset latency with and without the warm pool, and what the
proxy adds per step over calling the wrapped server directly with the SDK client.

    python -m benchmarks.bench_wrap                 # ~1 minute on 2 cores
    python -m benchmarks.bench_wrap --steps 300 --resets 10

The wrapped server is tests/wrap_server.py (a plain SDK `MCPServer`), its `increment` tool the
step. In one run, interleaved round by round so that background load lands on all alike:

- direct: `mcp.Client` over stdio to the server, as any MCP client would call it;
- wrapped: `mcpgym.connect(mcpgym.wrap(server))` in-process: the episode core, then the same
  SDK client call to the episode's own instance (bubblewrap when available);
- wrapped over stdio: a client talking to `mcpgym wrap` over stdio (two stdio hops: for scale).

Resets: each reset starts a fresh server (no pool), or takes a started one (`warm=2`; the next
reset waits until the pool has refilled, as it would between episodes of a real rollout).
Prints medians and PASS when the in-process proxy adds under `TARGET` (10%) per step.

First burst (`--burst-only` for just this): 8 concurrent resets and a call each on one HTTP server,
with no pool and with `warm=4` (which the server fills as it starts): the burst arriving as the
server starts, and once the pool is full; the pool must not make it slower (#24).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

import mcpgym
from mcpgym._wrap._instance import WarmPool

TARGET = 0.10
SERVER = [sys.executable, str(Path(__file__).resolve().parent.parent / "tests" / "wrap_server.py")]


async def per_call(call: Callable[[], Awaitable[Any]], n: int) -> float:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


async def steps(n: int, rounds: int) -> dict[str, list[float]]:
    Env = mcpgym.wrap(SERVER, tools=["increment"], max_steps=None)
    wrap_cli = ["-m", "mcpgym", "wrap", "--max-steps", "1000000", "--tools", "increment", "--", *SERVER]
    stdio = StdioServerParameters(command=sys.executable, args=wrap_cli, env=dict(os.environ))
    out: dict[str, list[float]] = {"direct": [], "wrapped": [], "wrapped over stdio": []}
    direct_params = StdioServerParameters(command=SERVER[0], args=SERVER[1:])
    async with Client(direct_params) as direct, mcpgym.connect(Env) as env, mcpgym.connect(stdio) as far:
        await env.reset()
        await far.reset()
        doors: dict[str, Callable[[], Awaitable[Any]]] = {
            "direct": lambda: direct.call_tool("increment", {}),
            "wrapped": lambda: env.call_tool("increment"),
            "wrapped over stdio": lambda: far.call_tool("increment"),
        }
        for call in doors.values():
            await per_call(call, 20)  # warm-up
        for _ in range(rounds):
            for name, call in doors.items():
                out[name].append(await per_call(call, n))
    return out


async def resets(n: int) -> dict[str, float]:
    cold = mcpgym.wrap(SERVER, tools=["increment"])
    warm = mcpgym.wrap(SERVER, tools=["increment"], warm=2)
    timings: dict[str, list[float]] = {"reset, no pool": [], "reset, warm pool": []}
    async with mcpgym.connect(cold) as env:
        for _ in range(n):
            start = time.perf_counter()
            await env.reset()
            timings["reset, no pool"].append(time.perf_counter() - start)
    async with mcpgym.connect(warm) as env:
        await env.reset()  # starts the pool
        pool: WarmPool = env.door._host.state[("mcpgym.wrap.pool", id(warm.config))]  # type: ignore[attr-defined]
        for _ in range(n):
            while pool.ready < 1:
                await pool.changed()
            start = time.perf_counter()
            await env.reset()
            timings["reset, warm pool"].append(time.perf_counter() - start)
    return {name: statistics.median(values) * 1e3 for name, values in timings.items()}


async def burst(size: int, warm: int, rounds: int) -> dict[str, float]:
    """`size` concurrent resets on one server (`mcpgym wrap --http` as a trainer meets it), each
    followed by one call: with no pool; with `warm` instances, the burst coming as the server
    starts (the pool filling) and once the pool is full. Interleaved round by round."""
    from mcpgym.testing import serve_gym

    cold = mcpgym.wrap(SERVER, tools=["increment"])
    pooled = mcpgym.wrap(SERVER, tools=["increment"], warm=warm)
    await mcpgym.wrapping.prepare(cold)  # tools listed once per class, before any timing
    await mcpgym.wrapping.prepare(pooled)
    kinds = {"burst, no pool": (cold, False), f"burst at start-up, warm {warm}": (pooled, False)}
    kinds[f"burst, warm {warm} full"] = (pooled, True)
    timings: dict[str, list[float]] = {name: [] for name in kinds}

    async def one(url: str) -> None:
        async with mcpgym.connect(url) as env:
            await env.reset()
            await env.call_tool("increment")

    for _ in range(rounds):
        for name, (Env, full) in kinds.items():
            async with serve_gym(Env) as (gym, url):
                if full:
                    pool: WarmPool = gym.registry.hosts[0].state[("mcpgym.wrap.pool", id(Env.config))]
                    while pool.ready < warm:
                        await pool.changed()
                start = time.perf_counter()
                async with anyio.create_task_group() as tg:
                    for _ in range(size):
                        tg.start_soon(one, url)
                timings[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) * 1e3 for name, values in timings.items()}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200, help="timed calls per door per round (%(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (%(default)s)")
    parser.add_argument("--resets", type=int, default=10, help="timed resets each way (%(default)s)")
    parser.add_argument("--burst", type=int, default=8, help="concurrent resets in the first burst (%(default)s)")
    parser.add_argument("--burst-only", action="store_true", help="measure only the first burst")
    args = parser.parse_args()
    bursts = await burst(args.burst, 4, args.rounds)
    if args.burst_only:
        print("| what | median |\n|---|---:|")
        for name, millis in bursts.items():
            print(f"| {name} | {millis:,.0f} ms |")
        print("\n" + _burst_verdict(bursts))
        return
    step = {name: statistics.median(v) for name, v in (await steps(args.steps, args.rounds)).items()}
    reset = await resets(args.resets)
    overhead = step["wrapped"] / step["direct"] - 1
    print("| what | median |\n|---|---:|")
    for name, micros in step.items():
        print(f"| step: {name} | {micros:,.0f} µs |")
    for name, millis in reset.items():
        print(f"| {name} | {millis:,.1f} ms |")
    verdict = "PASS" if overhead < TARGET else "FAIL"
    print(f"\nproxy overhead in-process: {overhead:+.1%} per step (target < {TARGET:.0%}): {verdict}")
    print(f"warm pool: reset {reset['reset, no pool'] / reset['reset, warm pool']:.0f}x faster")
    for name, millis in bursts.items():
        print(f"| {name} | {millis:,.0f} ms |")
    print(_burst_verdict(bursts))


def _burst_verdict(bursts: dict[str, float]) -> str:
    cold, starting, full = bursts.values()
    return (
        f"first burst with the pool: {cold / starting:.2f}x the speed of no pool at start-up, "
        f"{cold / full:.2f}x once full (target >= 1)"
    )


if __name__ == "__main__":
    anyio.run(main)
