"""Each hot-path trick against the plain way it replaces, and the in-process step, in one run (#22 item 7).

    python -m benchmarks.bench_hotpath                         # ~20 s on the 2-core dev box
    python -m benchmarks.bench_hotpath --against /tmp/old/src  # also: the step on another tree

`mcpgym._core.fastpath` keeps a trick only while its row here shows it pays: the ratio is the
plain way's cost over the trick's (above ~1.2 on a step of a few µs: kept). Medians of interleaved
rounds, so load on a shared machine hits both sides alike. `--against` times the in-process
echo step of another source tree (say, an older commit's `src`) in a subprocess beside this
tree's, alternately, and reports the ratio; each run reports its fastest of 100 samples of 200
steps (on a loaded machine the fastest sample is the one least disturbed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types

from mcpgym._core.fastpath import Turns
from mcpgym._core.types import ToolStep, tool_step

RESULT = types.CallToolResult(content=[types.TextContent(type="text", text="hi")])
FIELDS: dict[str, Any] = {
    "reward": 1.0,
    "done": False,
    "truncated": False,
    "info": {"step": 1},
    "terminated": False,
    "components": {},
}


def _sync_us(fn: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


async def _async_us(fn: Callable[[int], Awaitable[None]], n: int) -> float:
    start = time.perf_counter()
    await fn(n)
    return (time.perf_counter() - start) / n * 1e6


async def _leaf() -> int:
    return 1


async def _helper() -> int:
    return await _leaf()


async def _inline(n: int) -> None:
    for _ in range(n):
        await _leaf()


async def _helped(n: int) -> None:
    for _ in range(n):
        await _helper()


async def _turns(n: int) -> None:
    turns = Turns()
    for _ in range(n):
        if not turns.take_nowait():
            await turns.wait()
        turns.release()


async def _lock(n: int) -> None:
    lock = anyio.Lock()
    for _ in range(n):
        async with lock:
            pass


SYNC_ROWS = {
    "StepResult: trusted (tool_step)": lambda: tool_step(RESULT, 1.0, False, False, 1),
    "StepResult: validated": lambda: ToolStep(observation=RESULT, **FIELDS),
    "StepResult: model_construct": lambda: ToolStep.model_construct(observation=RESULT, **FIELDS),
}
ASYNC_ROWS = {
    "step body inline (one coroutine)": _inline,
    "step body in a helper coroutine": _helped,
    "turns: Turns flag": _turns,
    "turns: anyio.Lock": _lock,
}
PAIRS = [
    ("trusted StepResult vs validated", "StepResult: validated", "StepResult: trusted (tool_step)"),
    ("trusted StepResult vs model_construct", "StepResult: model_construct", "StepResult: trusted (tool_step)"),
    ("inline step body vs helper coroutine", "step body in a helper coroutine", "step body inline (one coroutine)"),
    ("Turns vs anyio.Lock", "turns: anyio.Lock", "turns: Turns flag"),
]

STEP_SCRIPT = """
import sys, time, statistics, anyio, mcpgym
from mcpgym.servers.echo import Echo
async def main():
    async with mcpgym.connect(Echo) as env:
        await env.reset(options={"target": "zzz"})
        action = mcpgym.CallToolAction(tool_name="echo_message", arguments={"message": "hi"})
        for _ in range(500):
            await env.step(action)
        samples = []
        for _ in range(100):
            start = time.perf_counter()
            for _ in range(200):
                await env.step(action)
            samples.append((time.perf_counter() - start) / 200 * 1e6)
        print(min(samples))
anyio.run(main)
"""


def _step_us(src: str) -> float:
    env = {**os.environ, "PYTHONPATH": src}
    out = subprocess.run([sys.executable, "-c", STEP_SCRIPT], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


async def _measure(rounds: int, n: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in (*SYNC_ROWS, *ASYNC_ROWS)}
    for _ in range(rounds):
        for name, fn in SYNC_ROWS.items():
            samples[name].append(_sync_us(fn, n))
        for name, coro in ASYNC_ROWS.items():
            samples[name].append(await _async_us(coro, n))
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (%(default)s)")
    parser.add_argument("-n", type=int, default=20_000, help="calls per sample (%(default)s)")
    parser.add_argument("--against", help="another tree's src/ to time the in-process step of, beside this one")
    parser.add_argument("--step-rounds", type=int, default=3, help="alternating step subprocesses (%(default)s)")
    args = parser.parse_args()
    us = anyio.run(_measure, args.rounds, args.n)
    print("| row | µs |\n|---|---|")
    for name, value in us.items():
        print(f"| {name} | {value:.3f} |")
    print("\n| trick | plain / trick |\n|---|---|")
    for label, plain, trick in PAIRS:
        print(f"| {label} | {us[plain] / us[trick]:.2f}x |")
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    trees = {"this tree": here, **({"--against": args.against} if args.against else {})}
    steps: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(args.step_rounds):
        for name, src in trees.items():
            steps[name].append(_step_us(src))
    print("\n| in-process echo step | µs (median over runs of each run's fastest sample) |\n|---|---|")
    for name, values in steps.items():
        print(f"| {name} | {statistics.median(values):.2f} |")
    if args.against:
        ratio = statistics.median(steps["this tree"]) / statistics.median(steps["--against"])
        print(f"\nthis tree / --against: {ratio:.2f}x")


if __name__ == "__main__":
    main()
