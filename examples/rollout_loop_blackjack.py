"""A trainer-agnostic async rollout loop over `mcpgym.connect()`, playing mcpgym.servers.blackjack.

This is the shape torchforge-style trainers use: a pool of concurrent actors, each opening an
environment, resetting it with a seed, asking a policy for an action on every observation and
collecting (observation, action, reward) until done. Swap `Policy` for a model's generate call
and `target` for a URL (`python -m mcpgym.servers.blackjack --http`) or a `mcpgym.pool.Pool`: the loop
does not change. Two policies are built in, to show that the reward signal separates them:

- `random`: hit or stand with equal odds;
- `basic`: the textbook basic strategy for hit/stand (no doubling or splitting here).

    python examples/rollout_loop_blackjack.py [--games 400] [--concurrency 16] [--target URL|COMMAND]
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

import mcpgym
from mcpgym import CallToolAction
from mcpgym.servers.blackjack import Blackjack

Policy = Callable[[dict[str, Any], random.Random], str]
"""(the table as the player sees it, an RNG) -> the tool to call: "hit" or "stand"."""


def random_policy(table: dict[str, Any], rng: random.Random) -> str:
    return rng.choice(("hit", "stand"))


def basic_strategy(table: dict[str, Any], rng: random.Random) -> str:
    """Hit/stand basic strategy against a dealer who stands on soft 17."""
    mine, up = table["your_total"], _upcard(table["dealer_cards"][0])
    if table["soft"]:
        return "stand" if mine >= 19 or (mine == 18 and up <= 8) else "hit"
    if mine >= 17:
        return "stand"
    if mine >= 13:
        return "stand" if up <= 6 else "hit"
    if mine == 12:
        return "stand" if 4 <= up <= 6 else "hit"
    return "hit"


def _upcard(card: str) -> int:
    rank = card[:-1]
    return 11 if rank == "A" else 10 if rank in ("J", "Q", "K") else int(rank)


POLICIES: dict[str, Policy] = {"random": random_policy, "basic": basic_strategy}


@dataclass
class Episode:
    seed: int
    steps: list[tuple[dict[str, Any], str, float]] = field(default_factory=list)
    ret: float = 0.0


async def play(env: mcpgym.AsyncEnv, policy: Policy, seed: int) -> Episode:
    """One episode: reset with `seed`, then act until done. The table rides in each result's
    structured content, so the policy never parses text."""
    episode = Episode(seed)
    first = await env.reset(seed=seed)
    table: dict[str, Any] = first.observation
    rng = random.Random(seed)  # the policy's own randomness, seeded too
    done = False
    while not done:
        action = policy(table, rng)
        result = await env.step(CallToolAction(tool_name=action))
        if result.is_error:
            raise RuntimeError(f"seed {seed}: {result.text}")
        episode.steps.append((table, action, result.reward))
        episode.ret += result.reward
        table, done = result.observation.structured_content or {}, result.done
    return episode


async def rollout(target: mcpgym.Target, policy: Policy, seeds: range, concurrency: int) -> list[Episode]:
    """Play every seed, `concurrency` actors at a time, each on its own connection."""
    episodes: list[Episode] = []
    queue = iter(seeds)

    async def actor() -> None:
        async with mcpgym.connect(target) as env:
            for seed in queue:  # actors share one iterator: each seed is played exactly once
                episodes.append(await play(env, policy, seed))

    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(actor)
    return sorted(episodes, key=lambda e: e.seed)


def mean_return(episodes: list[Episode]) -> float:
    return sum(e.ret for e in episodes) / len(episodes)


async def main(argv: list[str] | None = None) -> dict[str, float]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--games", type=int, default=400, help="seeded games per policy (seeds 0..N-1)")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--target", default=None, help="URL or command of a blackjack server (default: in-process)")
    args = p.parse_args(argv)
    target: mcpgym.Target = args.target or Blackjack
    means: dict[str, float] = {}
    for name, policy in POLICIES.items():
        episodes = await rollout(target, policy, range(args.games), args.concurrency)
        means[name] = mean_return(episodes)
        steps = sum(len(e.steps) for e in episodes)
        print(f"{name:>6}: mean return {means[name]:+.3f} over {len(episodes)} games ({steps} steps)")
    return means


if __name__ == "__main__":
    anyio.run(main)
