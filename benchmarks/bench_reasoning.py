"""mcpgym.servers.reasoning: what an episode (reset + answer) costs in-process, and how much of it is
reasoning-gym's own generation and scoring.

    python -m benchmarks.bench_reasoning [--episodes 400] [--dataset chain_sum,basic_arithmetic,leg_counting]

In one run, over the same task ids: (1) whole episodes through `mcpgym.connect(Reasoning)`
(reset with the task id, then `answer`); (2) reasoning-gym alone: `dataset[index]` plus
`score_answer` for the same entries. Prints µs per episode for each and generation's share of
the episode, so one can see whether mcpgym or the generator dominates. The datasets' entries are
warmed first (reasoning-gym caches nothing per index, so both sides regenerate every entry).
"""

from __future__ import annotations

import argparse
import functools
import random
import time

import anyio

import mcpgym
from mcpgym import CallToolAction
from mcpgym.servers.reasoning import Mix, Reasoning
from mcpgym.servers.reasoning._tasks import score


async def episodes(mix: Mix, task_ids: list[str]) -> float:
    async with mcpgym.connect(functools.partial(Reasoning, mix=mix)) as env:
        started = time.perf_counter()
        for task_id in task_ids:
            await env.reset(options={"task_id": task_id})
            await env.step(CallToolAction(tool_name="answer", arguments={"text": "0"}))
        return time.perf_counter() - started


def generator_alone(mix: Mix, task_ids: list[str]) -> float:
    started = time.perf_counter()
    for task_id in task_ids:
        dataset, entry = mix.entry(task_id)
        score(dataset, entry, "0")
    return time.perf_counter() - started


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--episodes", type=int, default=400)
    p.add_argument("--dataset", default="chain_sum,basic_arithmetic,leg_counting")
    args = p.parse_args()
    mix = Mix.parse(args.dataset, size=1000, seed=0)
    rng = random.Random(0)
    task_ids = [mix.draw(rng) for _ in range(args.episodes)]
    generator_alone(mix, task_ids[:20])  # import and build the datasets before timing
    ours = anyio.run(episodes, mix, task_ids)
    theirs = generator_alone(mix, task_ids)
    n = len(task_ids)
    print(f"{args.dataset}: {n} episodes")
    print(f"  reset + answer in-process: {ours / n * 1e6:8.0f} µs/episode")
    print(f"  reasoning-gym generate + score alone: {theirs / n * 1e6:8.0f} µs/episode")
    added = (ours - theirs) / n * 1e6
    print(f"  generation and scoring are {theirs / ours:.0%} of an episode; mcpgym adds {added:.0f} µs")


if __name__ == "__main__":
    main()
