"""Per-episode cost of mcpgym.servers.coding: latency of reset, first and next `run_python`, submit; RSS; processes.

    python -m benchmarks.bench_episode              # 20 sequential episodes, medians, ~5 s
    python -m benchmarks.bench_episode --episodes 50
    python -m benchmarks.bench_episode --concurrent 1024   # issue 12: all at once, every one must score 1.0

Each episode runs in-process (`mcpgym.connect(Coding)`) on HumanEval/0 with its canonical
solution: `reset`, two `run_python` calls (the first starts the sandboxed interpreter), `submit`.
Also reported: the sandbox processes the server holds for every episode once it has graded (the
grader zygote and the trial it keeps forked ahead) and their RSS; and, with one episode kept open
after its first `run_python`, the sandbox processes that episode costs (every new process under
the server's tree) and their RSS (sum of `VmRSS`: pages shared copy-on-write count in each), and
the server's own RSS growth per open episode.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

import mcpgym
from mcpgym.servers.coding import Coding
from mcpgym.servers.coding._environment import default_sandbox, humaneval_tasks

TASK = "HumanEval/0"


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        for task in Path(f"/proc/{current}/task").iterdir():
            try:
                children = [int(p) for p in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            todo += children
    return found


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


async def _timed(samples: dict[str, list[float]], name: str, call: Callable[[], Awaitable[Any]]) -> Any:
    start = time.perf_counter()
    result = await call()
    samples.setdefault(name, []).append((time.perf_counter() - start) * 1000)
    return result


async def measure(episodes: int) -> None:
    task = humaneval_tasks()[TASK]
    code = task.prompt + (task.canonical_solution or "")
    samples: dict[str, list[float]] = {}
    for _ in range(episodes):
        async with mcpgym.connect(Coding) as env:
            await _timed(samples, "reset", lambda: env.reset(options={"task_id": TASK}))
            await _timed(samples, "first run_python", lambda: env.call_tool("run_python", {"code": "x = 1"}))
            await _timed(samples, "next run_python", lambda: env.call_tool("run_python", {"code": "x + 1"}))
            result = await _timed(samples, "submit", lambda: env.call_tool("submit", {"code": code}))
            assert result.reward == 1.0, result.text
    for name, values in samples.items():
        print(f"{name:>18}: median {statistics.median(values):7.2f} ms  (min {min(values):.2f})")
    server = os.getpid()
    before = set(_descendants(server))
    rss_before = _rss_kib(server)
    # What the server holds for all episodes once it has graded: the grader zygote (under its
    # launcher) and the trial it keeps forked ahead.
    print(f"server-wide: {len(before)} sandbox processes, {sum(map(_rss_kib, before)) / 1024:.1f} MiB RSS")
    async with mcpgym.connect(Coding) as env:
        await env.reset(options={"task_id": TASK})
        await env.call_tool("run_python", {"code": "x = 1"})
        extra = [pid for pid in _descendants(server) if pid not in before]
        print(
            f"open episode: {len(extra)} sandbox processes, {sum(map(_rss_kib, extra)) / 1024:.1f} MiB RSS, "
            f"server RSS +{(_rss_kib(server) - rss_before) / 1024:.1f} MiB"
        )


async def concurrent(count: int) -> None:
    """`count` episodes at once (reset, two run_python calls, submit): how many scored 1.0, and how
    long it took. Sandbox start-ups are queued, so none should fail for lack of time."""
    task = humaneval_tasks()[TASK]
    code = task.prompt + (task.canonical_solution or "")
    outcomes: list[str] = []

    async def one() -> None:
        async with mcpgym.connect(Coding) as env:
            await env.reset(options={"task_id": TASK})
            for step in ("x = 1", "x + 1"):
                result = await env.call_tool("run_python", {"code": step})
                if result.is_error:
                    outcomes.append(f"run_python failed: {result.text[-120:]}")
                    return
            result = await env.call_tool("submit", {"code": code})
            outcomes.append("ok" if result.reward == 1.0 else f"submit: {result.text}")

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(count):
            tg.start_soon(one)
    elapsed = time.perf_counter() - start
    failures = [outcome for outcome in outcomes if outcome != "ok"]
    print(f"{count} concurrent episodes: {count - len(failures)}/{count} scored 1.0 in {elapsed:.1f} s")
    for failure in sorted(set(failures))[:5]:
        print(f"  {failures.count(failure)} x {failure}")
    print("PASS" if not failures else "FAIL")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_episode", description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20, help="sequential episodes measured (%(default)s)")
    parser.add_argument("--concurrent", type=int, default=0, help="instead: run N episodes at once (pass/fail)")
    args = parser.parse_args()
    print(f"isolation={default_sandbox().protections.isolation}")
    if args.concurrent:
        anyio.run(concurrent, args.concurrent)
    else:
        anyio.run(measure, args.episodes)


if __name__ == "__main__":
    main()
