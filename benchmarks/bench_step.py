"""Per-step cost of the echo step over every door, measured in one run (issue #2, "Performance").

    python -m benchmarks.bench_step                  # ~2 minutes on the 2-core dev box
    python -m benchmarks.bench_step --install-size   # also: fresh venv with the core alone

Doors, each timed as the median µs of one `echo_message("hi")` step after warm-up:

1. the plain call of the tool method (the floor);
   and the typed result alone: building the three pydantic objects an echo step returns
   (`TextContent`, `CallToolResult`, `StepResult`) the way the step builds them, nothing else;
2. in-process: `mcpgym.connect(Class)` then `env.step(CallToolAction(...))`;
3. the SDK's in-memory `mcp.Client(server)` against a bare `MCPServer` and against our server;
4. stdio: `mcpgym.connect(command)`;
5. streamable HTTP on loopback: the same `mcp.Client(url)` code against our server and against
   a bare SDK `MCPServer` (each in its own subprocess, under the same uvicorn settings);
6. 64 concurrent episodes over HTTP: steps/s, our server vs the bare SDK server.

Every subprocess server is `benchmarks.echo_servers` (handed an already listening loopback
socket: no port race, no polling). The environment is `Echo` with no step limit, reset with
`options={"target": "zzz"}`, so no episode ever ends mid-measurement.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import anyio
import mcp
from mcp import StdioServerParameters
from mcp.client.extension import advertise
from mcp_types import RequestParamsMeta

import mcpgym
from benchmarks.echo_servers import (
    ROOT,
    ServerSettings,
    UnboundedEcho,
    bare_server,
    cpu_seconds,
    http_server,
    spawned,
    until_ready,
)
from mcpgym import CallToolAction
from mcpgym._core.protocol import EXTENSION_ID
from mcpgym._core.types import ToolStep, tool_step

CONCURRENT = {
    "bare": "bare MCPServer, `mcp.Client(url)`",
    "ours": "our server, `mcpgym.connect(url)` reset + steps",
    "ours_raw": "our server, `mcp.Client(url)` naming the episode",
}
"""The concurrent runs: `bare` vs `ours` is the target; `ours_raw` uses the bare run's client code."""
# A raw SDK client that names its episodes says so, as mcpgym's own does; our server keeps
# clients that do not on session-based HTTP (mcpgym._server.plain_agents), a different wire to measure.
NAMES_EPISODES = [advertise(EXTENSION_ID)]
OPTIONS = {"target": "zzz"}
ARGS = {"message": "hi"}
ACTION = CallToolAction(tool_name="echo_message", arguments=ARGS)
# --------------------------------------------------------------------------- timing


@dataclass
class Door:
    """One way to take the echo step; timed in rounds interleaved with every other door."""

    key: str
    label: str
    fn: Callable[..., Awaitable[object]]
    args: tuple[Any, ...]
    batch: int = 1
    """Steps per timed sample (the sub-µs doors amortise one perf_counter over many)."""
    proc: subprocess.Popen[bytes] | None = None
    """The server process whose CPU time is charged to this door."""
    samples: list[float] = field(default_factory=list)
    cpu: float = 0.0
    own_cpu: float = 0.0
    steps: int = 0

    async def run(self, samples: int) -> None:
        fn, args, batch = self.fn, self.args, self.batch
        cpu = cpu_seconds(self.proc.pid) if self.proc else 0.0
        own = time.process_time()
        for _ in range(samples):
            start = time.perf_counter_ns()
            for _ in range(batch):
                await fn(*args)
            self.samples.append((time.perf_counter_ns() - start) / batch / 1000)
        self.own_cpu += time.process_time() - own
        self.steps += samples * batch
        self.cpu += cpu_seconds(self.proc.pid) - cpu if self.proc else 0.0

    @property
    def median_us(self) -> float:
        return statistics.median(self.samples)

    @property
    def client_cpu_us(self) -> float:
        return self.own_cpu / self.steps * 1e6

    @property
    def server_cpu_us(self) -> float | None:
        return self.cpu / self.steps * 1e6 if self.proc else None


async def measure(doors: Sequence[Door], steps: int, warmup: int, rounds: int) -> None:
    """Warm every door up, then `rounds` rounds of `steps / rounds` samples per door, so that
    load from anything else on the machine lands on all doors alike."""
    for door in doors:
        for _ in range(warmup * door.batch):
            await door.fn(*door.args)
    for _ in range(rounds):
        for door in doors:
            await door.run(max(1, steps // rounds))


@dataclass
class Report:
    doors: dict[str, Door] = field(default_factory=dict)
    concurrent: dict[str, list[tuple[float, float, float]]] = field(default_factory=dict)
    """kind -> per round: (steps/s, server CPU µs per step, client process CPU µs per step)."""
    cold_start_ms: float | None = None
    install: tuple[int, list[str]] | None = None

    def us(self, key: str) -> float:
        return self.doors[key].median_us

    def rate(self, kind: str) -> tuple[float, float, float]:
        rate, server, client = zip(*self.concurrent[kind], strict=True)
        return statistics.median(rate), statistics.median(server), statistics.median(client)


# --------------------------------------------------------------------------- the doors


@dataclass(frozen=True)
class Counts:
    steps: int
    warmup: int
    rounds: int
    clients: int
    concurrent_steps: int
    concurrent_rounds: int
    cold_runs: int


SPEC = UnboundedEcho.__mcpgym_tools__["echo_message"]


async def typed_result() -> ToolStep:
    """What every in-process step must build whatever else it does: its typed result."""
    return tool_step(SPEC.convert("hi"), 0.0, False, False, 1)


async def open_doors(stack: AsyncExitStack, servers: dict[str, tuple[str, subprocess.Popen[bytes]]]) -> list[Door]:
    """Every sequential door, connected, its episode reset (the HTTP servers already running)."""
    plain = UnboundedEcho()
    plain.rng = random.Random(0)
    await plain.reset(options=OPTIONS)
    inproc = await stack.enter_async_context(mcpgym.connect(UnboundedEcho))
    memory_bare = await stack.enter_async_context(mcp.Client(bare_server()))
    memory_ours = await stack.enter_async_context(mcpgym.connect(mcpgym.GymServer(UnboundedEcho)))
    serve_stdio = ["-m", "benchmarks.echo_servers", "ours"]
    stdio_cmd = StdioServerParameters(command=sys.executable, args=serve_stdio, cwd=str(ROOT))
    stdio = await stack.enter_async_context(mcpgym.connect(stdio_cmd))
    (bare_url, bare_proc), (ours_url, ours_proc) = servers["bare"], servers["ours"]
    http_bare = await stack.enter_async_context(mcp.Client(bare_url))
    http_gym = await stack.enter_async_context(mcpgym.connect(ours_url))
    http_ours = await stack.enter_async_context(mcp.Client(ours_url, extensions=NAMES_EPISODES))
    for env in (inproc, memory_ours, stdio, http_gym):
        await env.reset(options=OPTIONS)
    # The raw client steps the episode `http_gym` reset, naming it in `_meta` as any client may.
    meta = cast(RequestParamsMeta, {mcpgym.EPISODE_KEY: http_gym.episode_id})
    ours_call = functools.partial(http_ours.call_tool, meta=meta)
    tool = ("echo_message", ARGS)
    bare_label = "HTTP `mcp.Client(url)` call_tool -> bare MCPServer"
    return [
        Door("plain", "plain call `await env.echo_message('hi')`", plain.echo_message, ("hi",), batch=1000),
        Door("typed", "typed result alone: the 3 pydantic objects a step returns", typed_result, (), batch=50),
        Door("inprocess", "in-process `mcpgym.connect(Echo)` step", inproc.step, (ACTION,), batch=50),
        Door("memory_bare", "(a) SDK in-memory `mcp.Client(MCPServer)` call_tool", memory_bare.call_tool, tool),
        Door("memory_ours", "(b) SDK in-memory `mcpgym.connect(GymServer(Echo))` step", memory_ours.step, (ACTION,)),
        Door("stdio", "stdio `mcpgym.connect(command)` step", stdio.step, (ACTION,)),
        Door("http_bare", bare_label, http_bare.call_tool, tool, proc=bare_proc),
        Door("http_ours", "HTTP `mcp.Client(url)` call_tool -> our server", ours_call, tool, proc=ours_proc),
        Door("http_gym", "HTTP `mcpgym.connect(url)` step -> our server", http_gym.step, (ACTION,), proc=ours_proc),
    ]


async def concurrent(url: str, proc: subprocess.Popen[bytes], kind: str, n: Counts) -> tuple[float, float, float]:
    """`n.clients` clients, each `n.concurrent_steps` sequential steps; all start together.
    Returns (steps/s, server and client CPU µs per step) from the start signal to the last step."""
    arrived, finished = 0, 0
    all_arrived, go = anyio.Event(), anyio.Event()
    marks: dict[str, float] = {}

    async def steps(fn: Callable[..., Awaitable[object]], *args: Any) -> None:
        nonlocal arrived, finished
        await fn(*args)  # warm this connection
        arrived += 1
        if arrived == n.clients:
            all_arrived.set()
        await go.wait()
        for _ in range(n.concurrent_steps):
            await fn(*args)
        finished += 1
        if finished == n.clients:
            marks["end"], marks["cpu"], marks["own"] = time.perf_counter(), cpu_seconds(proc.pid), time.process_time()

    async def client() -> None:
        if kind == "bare":
            async with mcp.Client(url) as raw:
                await steps(raw.call_tool, "echo_message", ARGS)
            return
        async with mcpgym.connect(url) as env:
            await env.reset(options=OPTIONS)
            if kind == "ours":
                await steps(env.step, ACTION)
                return
            async with mcp.Client(url, extensions=NAMES_EPISODES) as raw:  # the bare client code, naming the episode
                meta = cast(RequestParamsMeta, {mcpgym.EPISODE_KEY: env.episode_id})
                await steps(functools.partial(raw.call_tool, meta=meta), "echo_message", ARGS)

    async with anyio.create_task_group() as tg:
        for _ in range(n.clients):
            tg.start_soon(client)
        await all_arrived.wait()
        start, cpu, own = time.perf_counter(), cpu_seconds(proc.pid), time.process_time()
        go.set()
    total = n.clients * n.concurrent_steps
    return total / (marks["end"] - start), (marks["cpu"] - cpu) / total * 1e6, (marks["own"] - own) / total * 1e6


async def run_concurrent(report: Report, n: Counts, servers: dict[str, tuple[str, subprocess.Popen[bytes]]]) -> None:
    for _ in range(n.concurrent_rounds):
        for kind in CONCURRENT:
            url, proc = servers[kind.partition("_")[0]]
            rate, server, client = await concurrent(url, proc, kind, n)
            report.concurrent.setdefault(kind, []).append((rate, server, client))
            print(f"  {n.clients} concurrent, {kind}: {rate:,.0f} steps/s", file=sys.stderr)


# --------------------------------------------------------------------------- cold start, install size


async def cold_start(runs: int) -> float:
    """Median ms from spawning `python -m mcpgym.servers.echo --http --port P` to its first MCP answer."""
    samples = []
    for _ in range(runs):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        url = f"http://127.0.0.1:{port}/mcp"
        start = time.perf_counter()
        with spawned([sys.executable, "-m", "mcpgym.servers.echo", "--http", "--port", str(port)]) as proc:
            await _poll_port(port, proc)
            await until_ready(url)
            samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


async def _poll_port(port: int, proc: subprocess.Popen[bytes]) -> None:
    """Bounded poll (30 s) until the port accepts: this server binds a port of its own."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before answering")
        with contextlib.suppress(OSError):
            stream = await anyio.connect_tcp("127.0.0.1", port)
            await stream.aclose()
            return
        await anyio.sleep(0.002)  # poll interval, not a synchronisation sleep
    raise TimeoutError(f"nothing listened on port {port} within 30 s")


def install_size() -> tuple[int, list[str]]:
    """Bytes of site-packages in a fresh venv with `pip install <this repo>`, and what it pulled in."""
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        before = _site_bytes(venv), _dists(venv)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(ROOT)], check=True)
        added = sorted(set(_dists(venv)) - set(before[1]))
        return _site_bytes(venv) - before[0], added


def _site_bytes(venv: Path) -> int:
    (site,) = venv.glob("lib/python*/site-packages")
    return sum(p.stat().st_size for p in site.rglob("*") if p.is_file() and not p.is_symlink())


def _dists(venv: Path) -> list[str]:
    out = subprocess.run([str(venv / "bin" / "pip"), "list", "--format=json"], check=True, capture_output=True).stdout
    return [f"{d['name']}=={d['version']}" for d in json.loads(out)]


# --------------------------------------------------------------------------- report


def targets(report: Report, clients: int) -> list[tuple[str, float, bool]]:
    """The issue's targets, as (what, measured ratio, met)."""
    us = report.us
    a, b = us("memory_bare") / us("inprocess"), us("memory_ours") / us("inprocess")
    plain = us("inprocess") / us("plain")
    http = us("http_ours") / us("http_bare")
    checks = [
        ("in-process >= 100x faster than SDK in-memory client, (a) bare MCPServer", a, a >= 100),
        ("in-process >= 100x faster than SDK in-memory client, (b) our server", b, b >= 100),
        ("in-process within 100x of the plain call", plain, plain <= 100),
        ("our HTTP step within 1.3x of the bare SDK server (same `mcp.Client` code)", http, http <= 1.3),
    ]
    if report.concurrent:
        rate = report.rate("ours")[0] / report.rate("bare")[0]
        checks.append((f"{clients} concurrent episodes over HTTP: steps/s ours >= bare", rate, rate >= 1.0))
    return checks


def print_report(report: Report, n: Counts, settings: ServerSettings, command: str) -> None:
    print(
        f"`{command}` — Python {platform.python_version()}, {os.cpu_count()} CPUs; both HTTP servers: uvicorn "
        f"loop={settings.loop} http={settings.http}, ours {settings.ours_response}, bare {settings.bare_response} "
        f"responses; {n.steps} timed steps per door in {n.rounds} interleaved rounds, {n.warmup} warm-up\n"
    )
    print("| door | median µs/step | x plain call | client process CPU µs/step | server CPU µs/step |")
    print("|---|---:|---:|---:|---:|")
    plain = report.us("plain")
    for door in report.doors.values():
        cpu = door.server_cpu_us
        print(
            f"| {door.label} | {door.median_us:,.2f} | {door.median_us / plain:,.0f}x | "
            f"{door.client_cpu_us:,.1f} | {'' if cpu is None else f'{cpu:,.0f}'} |"
        )
    for kind in report.concurrent:
        rate, server, client = report.rate(kind)
        who = CONCURRENT[kind]
        print(
            f"| HTTP, {n.clients} concurrent episodes x {n.concurrent_steps} steps, {who} "
            f"(median of {n.concurrent_rounds}) | {rate:,.0f} steps/s | | {client:,.0f} | {server:,.0f} |"
        )
    if report.cold_start_ms is not None:
        print(
            f"| cold start: `python -m mcpgym.servers.echo --http` to its first MCP answer (median of {n.cold_runs}) | "
            f"{report.cold_start_ms:,.0f} ms | | | |"
        )
    if report.install is not None:
        size, dists = report.install
        print(
            f"\nFresh venv + `pip install .` (core only): {size / 1e6:.1f} MB added to site-packages, "
            f"{len(dists)} distributions: {', '.join(dists)}"
        )
    print("\n| target | measured | result |")
    print("|---|---:|---|")
    for what, value, ok in targets(report, n.clients):
        print(f"| {what} | {value:,.2f}x | {'PASS' if ok else 'FAIL'} |")
    typed, inproc = report.us("typed"), report.us("inprocess")
    print(
        f"\nThe typed result alone costs {typed:,.2f} µs ({typed / inproc:.0%} of the in-process step): the SDK's "
        f"in-memory client is {report.us('memory_bare') / typed:,.0f}x that, the most any in-process step that "
        "returns these objects could reach against it."
    )


async def run(args: argparse.Namespace, command: str) -> None:
    n = Counts(
        args.steps,
        args.warmup,
        args.rounds,
        args.clients,
        args.concurrent_steps,
        args.concurrent_rounds,
        args.cold_runs,
    )
    settings = ServerSettings(args.loop, args.http_impl, args.ours_response, args.bare_response)
    report = Report()
    with contextlib.ExitStack() as processes:
        servers = {kind: processes.enter_context(http_server(kind, settings)) for kind in ("bare", "ours")}
        async with anyio.create_task_group() as tg:
            for url, _ in servers.values():
                tg.start_soon(until_ready, url)
        async with AsyncExitStack() as stack:
            print("sequential doors ...", file=sys.stderr, flush=True)
            doors = await open_doors(stack, servers)
            await measure(doors, n.steps, n.warmup, n.rounds)
            report.doors = {door.key: door for door in doors}
        if n.clients and n.concurrent_rounds:
            print("concurrent episodes ...", file=sys.stderr, flush=True)
            await run_concurrent(report, n, servers)
    if n.cold_runs:
        print("cold start ...", file=sys.stderr, flush=True)
        report.cold_start_ms = await cold_start(n.cold_runs)
    if args.install_size:
        print("install size (fresh venv) ...", file=sys.stderr, flush=True)
        report.install = await anyio.to_thread.run_sync(install_size)
    print_report(report, n, settings, command)


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_step", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--steps",
        type=int,
        default=2000,
        help="timed samples per door (%(default)s); a sample "
        "is one step, or for the sub-µs doors the mean of a batch of 50-1000 steps",
    )
    parser.add_argument("--warmup", type=int, default=200, help="untimed warm-up samples per door (%(default)s)")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds over all doors (%(default)s)")
    parser.add_argument("--clients", type=int, default=64, help="concurrent episodes over HTTP (%(default)s)")
    parser.add_argument("--concurrent-steps", type=int, default=50, help="steps per concurrent episode (%(default)s)")
    parser.add_argument("--concurrent-rounds", type=int, default=3, help="alternating bare/ours runs (%(default)s)")
    parser.add_argument("--cold-runs", type=int, default=5, help="cold-start samples; 0 skips (%(default)s)")
    parser.add_argument("--install-size", action="store_true", help="also build a fresh venv with the core (slow)")
    parser.add_argument("--loop", default="auto", help="uvicorn --loop of both HTTP servers (auto|asyncio|uvloop)")
    parser.add_argument("--http-impl", default="auto", help="uvicorn --http of both HTTP servers (auto|h11|httptools)")
    parser.add_argument("--ours-response", choices=("json", "sse"), default="json", help="our server's default: json")
    parser.add_argument("--bare-response", choices=("json", "sse"), default="sse", help="the SDK's default: sse")
    parser.add_argument("--uvloop-client", action="store_true", help="run this (client) process on uvloop")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse(argv)
    command = " ".join(["python -m benchmarks.bench_step", *argv])
    anyio.run(run, args, command, backend_options={"use_uvloop": True} if args.uvloop_client else {})


if __name__ == "__main__":
    main()
