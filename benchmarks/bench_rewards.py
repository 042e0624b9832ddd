"""Cost of rewards: a 3-component rubric's per-step overhead in-process, and the LLM judge's
throughput against the scripted endpoint with its cache on and off (issue 13).

    python -m benchmarks.bench_rewards            # ~20 s on the 2-core dev box
    python -m benchmarks.bench_rewards --steps 20000 --episodes 200

Step part: the same echo tool in two environments, one without a rubric and one with three
step components (the environment's own reward, a length penalty read from the arguments and a
format gate read from the result), timed in interleaved rounds in one process (this thread's
CPU time, lowest round); the report is µs per step of each and their difference (target: < 2 µs).

Judge part: `--episodes` trajectories, drawn from a quarter as many distinct ones (as in a
GRPO group, where identical completions recur), judged by `LLMJudge` against the scripted
endpoint (`harness._scripted`, model "judge", on loopback in this process) with the cache on
and off, `--concurrency` at once; the report is judgements/s and requests sent.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import anyio
import mcp_types as types

import mcpgym
from mcpgym import CallToolAction, rubrics
from mcpgym.harness import _scripted

STEP_TARGET_US = 2.0


class Plain(mcpgym.Environment):
    """Echo, rewarded 1 a step, never ending."""

    @mcpgym.tool
    async def echo_message(self, message: str) -> str:
        """Echo the message."""
        self.reward(1.0)
        return message


THREE = rubrics.Rubric(
    {
        "own": rubrics.env_reward(),
        "length": rubrics.step_rubric(lambda step: -len(step.arguments["message"])),
        "well_formed": rubrics.step_rubric(lambda step: 0.0 if step.result.is_error else 1.0),
    },
    weights={"length": 0.01},
    gates=["well_formed"],
)


class Scored(Plain):
    """Plain, with a 3-component rubric."""

    rubric = THREE


async def step_costs(steps: int, rounds: int) -> dict[str, float]:
    action = CallToolAction(tool_name="echo_message", arguments={"message": "hi"})
    samples: dict[str, list[float]] = {"plain": [], "rubric": []}
    async with mcpgym.connect(Plain) as plain, mcpgym.connect(Scored) as scored:
        envs = {"plain": plain, "rubric": scored}
        for env in envs.values():
            await env.reset(seed=0)
            for _ in range(2000):
                await env.step(action)
        per_round = max(1, steps // rounds)
        for _ in range(rounds):
            for name, env in envs.items():
                start = time.thread_time_ns()
                for _ in range(per_round):
                    await env.step(action)
                samples[name].append((time.thread_time_ns() - start) / per_round / 1000)
    # CPU time of this thread, lowest round: on a shared box, other processes' load is what
    # varies between rounds, and it only ever adds.
    return {name: min(values) for name, values in samples.items()}


def transcripts(episodes: int) -> list[rubrics.Transcript]:
    distinct = max(1, episodes // 4)
    out = []
    for i in range(episodes):
        text = f"answer {i % distinct}"
        result = types.CallToolResult(content=[types.TextContent(type="text", text=text)])
        step = rubrics.Step("answer", {"text": text}, result, 0.0, {}, {}, 1, True, False)
        out.append(rubrics.Transcript("Bench", "Answer.", [step], terminated=True))
    return out


async def judge_throughput(episodes: int, concurrency: int) -> dict[str, tuple[float, int]]:
    work = transcripts(episodes)
    out = {}
    async with _scripted.serve() as url:
        for label, cache in (("cache on", True), ("cache off", False)):
            judge = rubrics.LLMJudge(url, "judge", "Award 4 if it answered.", cache=cache, max_concurrency=concurrency)
            start = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for transcript in work:
                    tg.start_soon(judge, transcript)
            out[label] = (episodes / (time.perf_counter() - start), judge.requests)
            await judge.aclose()
    return out


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_rewards", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100_000, help="timed steps per environment (%(default)s)")
    parser.add_argument("--rounds", type=int, default=20, help="interleaved rounds (%(default)s)")
    parser.add_argument("--episodes", type=int, default=400, help="trajectories to judge (%(default)s)")
    parser.add_argument("--concurrency", type=int, default=16, help="judge requests at once (%(default)s)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    costs = anyio.run(step_costs, args.steps, args.rounds)
    overhead = costs["rubric"] - costs["plain"]
    print("| in-process step | CPU µs |")
    print("|---|---|")
    print(f"| no rubric | {costs['plain']:.2f} |")
    print(f"| 3-component rubric | {costs['rubric']:.2f} |")
    verdict = "PASS" if overhead < STEP_TARGET_US else "FAIL"
    print(f"\nrubric overhead: {overhead:.2f} µs/step (target < {STEP_TARGET_US:g} µs): {verdict}")
    judged = anyio.run(judge_throughput, args.episodes, args.concurrency)
    print(f"\n| LLM judge, {args.episodes} trajectories ({args.episodes // 4} distinct) | judgements/s | requests |")
    print("|---|---|---|")
    for label, (rate, requests) in judged.items():
        print(f"| {label} | {rate:.0f} | {requests} |")


if __name__ == "__main__":
    main()
