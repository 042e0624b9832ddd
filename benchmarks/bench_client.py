"""Client CPU per step and steps/s over HTTP, by client, server and concurrent episodes.

    python -m benchmarks.bench_client [--episodes 1,8,64,512] [--seconds 2] [--quick]

One process drives the echo step (`echo_message`) against a server in a child process
(`benchmarks.echo_servers`: ours, JSON responses; the bare SDK `MCPServer`, SSE responses;
the same uvicorn settings), co-located on this machine's cores. Clients, each at every
episode count:

- `mcp.Client`: one SDK client per episode (ours: reset through `send_request`, the episode
  id in `_meta`, as any SDK user would drive it);
- `connect`: `mcpgym.connect(url)` per episode (the default door since #22: every episode of the
  process leases the one lean connection to the server, however it was opened);
- `connect-own`: the door `connect(url)` was before #22, one `mcp.Client` per episode through
  our code (`HTTPDoor(url, share=False)`, also what a handshake-era server still gets);
- `shared`: one `mcpgym.SharedClient`, one episode env per episode (the lean path, held open);
- `vector`: `mcpgym.connect_vector(url, n)`, one batch `step()` per round: one `mcpgym/steps`
  request for all n slots (rfcs/0019-doors.md);
- `vector-slots`: the same with `batch=False`, one `tools/call` per slot.

Client CPU is this process's CPU time over the measured window divided by the steps taken
(the server's CPU is its own process's). A final check drives 2,048 concurrent episodes
each opened with its own `mcpgym.connect(url)` and counts errors. Ratios are computed within this one run
(rfcs/0014-lean-client.md states the targets); `--quick` is a short smoke run.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import anyio
import mcp
import mcp_types as types

import mcpgym
from benchmarks.echo_servers import ServerSettings, cpu_seconds, http_server, until_ready
from mcpgym._client.http_door import HTTPDoor
from mcpgym._core.protocol import ResetParams, ResetRequest, ResetResult, episode_meta, new_episode_id

Step = Callable[[], Awaitable[int]]
"""Take one round; return how many steps it took (1, or n for a vector batch)."""

CLIENTS = ("mcp.Client", "connect", "connect-own", "shared", "vector", "vector-slots")
ACTION = mcpgym.CallToolAction(tool_name="echo_message", arguments={"message": "hi"})


@dataclass(frozen=True)
class Row:
    server: str
    client: str
    episodes: int
    steps_per_s: float
    client_us: float
    server_us: float
    latency_us: float
    errors: int


@asynccontextmanager
async def _sdk_clients(url: str, n: int, ours: bool) -> AsyncIterator[list[Step]]:
    async with AsyncExitStack() as stack:
        steps: list[Step] = []
        for _ in range(n):
            client = await stack.enter_async_context(mcp.Client(url))
            meta = None
            if ours:
                meta = episode_meta(new_episode_id())
                await client.session.send_request(ResetRequest(params=ResetParams(_meta=meta)), ResetResult)
            steps.append(_sdk_step(client, meta))
        yield steps


def _sdk_step(client: mcp.Client, meta: types.RequestParamsMeta | None) -> Step:
    async def step() -> int:
        result = await client.call_tool("echo_message", {"message": "hi"}, meta=meta)
        if result.is_error:
            raise RuntimeError(f"step failed: {result}")
        return 1

    return step


def _env_step(env: mcpgym.AsyncEnv) -> Step:
    async def step() -> int:
        result = await env.step(ACTION)
        if result.is_error:
            raise RuntimeError(f"step failed: {result}")
        return 1

    return step


@asynccontextmanager
async def _envs(url: str, n: int, kind: str) -> AsyncIterator[list[Step]]:
    async with AsyncExitStack() as stack:
        link = await stack.enter_async_context(mcpgym.SharedClient(url)) if kind == "shared" else None

        def open_one() -> mcpgym.AsyncEnv:
            if link is not None:
                return link.connect()
            if kind == "connect-own":
                return mcpgym.AsyncEnv(HTTPDoor(url, share=False))
            return mcpgym.connect(url)

        steps: list[Step] = []
        for _ in range(n):
            env = await stack.enter_async_context(open_one())
            await env.reset()
            steps.append(_env_step(env))
        yield steps


@asynccontextmanager
async def _vector(url: str, n: int, batch: bool) -> AsyncIterator[list[Step]]:
    async with mcpgym.connect_vector(url, n, batch=batch) as envs:
        await envs.reset()
        actions = [ACTION] * n

        async def step() -> int:
            batch = await envs.step(actions)
            if any(e is not None for e in batch.errors) or any(r is None or r.is_error for r in batch.results):
                raise RuntimeError(f"batch failed: {batch.errors}")
            return n

        yield [step]


def _clients(kind: str, url: str, n: int, ours: bool) -> AbstractAsyncContextManager[list[Step]]:
    if kind == "mcp.Client":
        return _sdk_clients(url, n, ours)
    if kind in ("vector", "vector-slots"):
        return _vector(url, n, batch=kind == "vector")
    return _envs(url, n, kind)


async def _drive(steps: list[Step], seconds: float) -> tuple[int, int, float]:
    """Run every episode's loop until the deadline; returns (steps, errors, wall seconds)."""
    done = errors = 0
    deadline = time.perf_counter() + seconds

    async def loop(step: Step) -> None:
        nonlocal done, errors
        while time.perf_counter() < deadline:
            try:
                taken = await step()  # (`done += await step()` would read `done` before awaiting)
            except Exception as exc:  # counted and reported, never hidden
                errors += 1
                print(f"    error: {type(exc).__name__}: {exc}", file=sys.stderr)
                return
            done += taken

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for step in steps:
            tg.start_soon(loop, step)
    return done, errors, time.perf_counter() - start


async def measure(kind: str, server: str, url: str, pid: int, n: int, seconds: float) -> Row:
    async with _clients(kind, url, n, ours=server == "ours") as steps:
        await _drive(steps, min(0.3, seconds / 4))  # warm: connections open, caches filled
        cpu0, server0 = time.process_time(), cpu_seconds(pid)
        done, errors, wall = await _drive(steps, seconds)
        cpu, server_cpu = time.process_time() - cpu0, cpu_seconds(pid) - server0
    per = max(done, 1)
    return Row(server, kind, n, done / wall, cpu / per * 1e6, server_cpu / per * 1e6, wall * n / per * 1e6, errors)


async def many_episodes(url: str, n: int, steps: int) -> tuple[int, int, float]:
    """n concurrent episodes, each its own `mcpgym.connect(url)`, `steps` steps each: (steps done, errors, s)."""
    done = errors = 0

    async def episode() -> None:
        nonlocal done, errors
        try:
            async with mcpgym.connect(url) as env:
                await env.reset()
                for _ in range(steps):
                    if (await env.step(ACTION)).is_error:
                        raise RuntimeError("isError step")
                    done += 1
        except Exception as exc:
            errors += 1
            if errors <= 3:
                print(f"    error: {type(exc).__name__}: {exc}", file=sys.stderr)

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(episode)
    return done, errors, time.perf_counter() - start


def _cell(kind: str, server: str, url: str, pid: int, n: int, seconds: float) -> Row:
    """One measurement; a client that fails (e.g. while closing 512 SDK clients) is a row
    marked failed, not the end of the run."""
    try:
        return anyio.run(measure, kind, server, url, pid, n, seconds)
    except Exception as exc:
        leaf: BaseException = exc
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        print(f"    {server} {kind} x{n} failed: {type(leaf).__name__}: {leaf}", file=sys.stderr)
        return Row(server, kind, n, float("nan"), float("nan"), float("nan"), float("nan"), -1)


def _table(rows: list[Row]) -> None:
    print("| server | client | episodes | steps/s | client CPU µs/step | server CPU µs/step | latency µs |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        flag = " (failed)" if r.errors < 0 else f" ({r.errors} errors)" if r.errors else ""
        print(
            f"| {r.server} | {r.client} | {r.episodes} | {r.steps_per_s:,.0f}{flag} | {r.client_us:,.0f} "
            f"| {r.server_us:,.0f} | {r.latency_us:,.0f} |"
        )


def _ratios(rows: list[Row], counts: list[int]) -> None:
    by = {(r.server, r.client, r.episodes): r for r in rows}
    print("\nRatios (this run):")
    for n in counts:
        sdk, lean, own = by[("ours", "mcp.Client", n)], by[("ours", "connect", n)], by[("ours", "connect-own", n)]
        shared, vec, slots = by[("ours", "shared", n)], by[("ours", "vector", n)], by[("ours", "vector-slots", n)]
        print(
            f"  {n:>4} episodes, our server, client CPU/step vs mcp.Client: "
            f"connect {lean.client_us / sdk.client_us:.2f}"
            f" (target <= 0.33), connect-own (before #22) {own.client_us / sdk.client_us:.2f}, "
            f"shared {shared.client_us / sdk.client_us:.2f}, vector {vec.client_us / sdk.client_us:.2f} "
            f"(one request per slot: {slots.client_us / sdk.client_us:.2f}); "
            f"server CPU/step connect/connect-own {lean.server_us / own.server_us:.2f}"
        )
    if 64 in counts:
        bare, lean = by[("bare", "mcp.Client", 64)], by[("ours", "connect", 64)]
        print(
            f"  64 episodes steps/s, connect+ours / mcp.Client+bare SDK = {lean.steps_per_s / bare.steps_per_s:.2f}x "
            f"(target >= 2); shared+ours {by[('ours', 'shared', 64)].steps_per_s / bare.steps_per_s:.2f}x; "
            f"vector+ours {by[('ours', 'vector', 64)].steps_per_s / bare.steps_per_s:.2f}x"
        )
    one_own, one_lean = by[("ours", "connect-own", 1)], by[("ours", "connect", 1)]
    print(
        f"  1 episode latency/step: connect {one_lean.latency_us:,.0f} µs vs connect-own {one_own.latency_us:,.0f} µs "
        f"({one_lean.latency_us / one_own.latency_us:.2f}x; target <= 1)"
    )
    bare_lean, bare_sdk = by[("bare", "connect", 1)], by[("bare", "mcp.Client", 1)]
    print(
        f"  bare SDK server, 1 episode: client CPU/step connect/mcp.Client = "
        f"{bare_lean.client_us / bare_sdk.client_us:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", default="1,8,64,512", help="comma-separated concurrent episode counts")
    parser.add_argument("--seconds", type=float, default=2.0, help="measured seconds per cell")
    parser.add_argument("--many", type=int, default=2048, help="episodes in the one-process scale check")
    parser.add_argument("--quick", action="store_true", help="smoke run: 1,8,64 episodes, 0.4 s per cell")
    args = parser.parse_args()
    counts = [1, 8, 64] if args.quick else [int(x) for x in args.episodes.split(",")]
    seconds = 0.4 if args.quick else args.seconds
    rows: list[Row] = []
    for server in ("bare", "ours"):
        with http_server(server, ServerSettings()) as (url, proc):
            anyio.run(until_ready, url)
            for n in counts:
                for kind in CLIENTS:
                    row = _cell(kind, server, url, proc.pid, n, seconds)
                    print(
                        f"  {server} {kind} x{n}: {row.steps_per_s:,.0f} steps/s, {row.client_us:,.0f} µs",
                        file=sys.stderr,
                    )
                    rows.append(row)
            if server == "ours":
                done, errors, wall = anyio.run(many_episodes, url, args.many, 2 if args.quick else 5)
    print(f"Echo step over HTTP, co-located, {seconds:g}s per cell; latency = wall per step of one episode")
    _table(rows)
    _ratios(rows, counts)
    print(
        f"\n{args.many} concurrent episodes, each its own mcpgym.connect(url): {done:,} steps in {wall:.1f}s, "
        f"{errors} errors ({'PASS' if errors == 0 else 'FAIL'})"
    )


if __name__ == "__main__":
    main()
