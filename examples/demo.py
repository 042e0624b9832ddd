"""The main demo: an RL-style episode loop against mcpgym.servers.echo, in-process and over HTTP.

A toy "policy" guesses words; the environment rewards the right one. The same loop runs
against the Echo class in this process and against `python -m mcpgym.servers.echo --http` in a
child process, and prints each episode's return and how fast each door steps.

    python examples/demo.py [--episodes N]
"""

from __future__ import annotations

import argparse
import random
import time

import anyio

import mcpgym
from mcpgym import CallToolAction
from mcpgym.servers.echo import WORDS, Echo


async def play(target: mcpgym.Target, episodes: int, label: str) -> None:
    policy = random.Random(1234)
    steps = 0
    started = time.perf_counter()
    async with mcpgym.connect(target) as env:
        tools = await env.list_tools()
        print(f"\n[{label}] tools: {', '.join(t.name for t in tools)}")
        for episode in range(episodes):
            first = await env.reset(seed=episode)
            ret, done, guesses = 0.0, False, []
            while not done:
                guess = policy.choice(WORDS)
                result = await env.step(CallToolAction(tool_name="echo_message", arguments={"message": guess}))
                ret += result.reward
                done = result.done
                guesses.append(guess)
                steps += 1
            state = await env.state()
            end = "truncated" if state.truncated else "solved"
            print(
                f"[{label}] episode {episode}: {first.observation['prompt']!s:44} return={ret:.1f} "
                f"after {len(guesses)} steps ({end})"
            )
    elapsed = time.perf_counter() - started
    print(f"[{label}] {steps} steps in {elapsed:.2f}s ({steps / elapsed:,.0f} steps/s incl. resets)")


def main(episodes: int) -> None:
    anyio.run(play, Echo, episodes, "in-process")
    with mcpgym.ServerProcess("python -m mcpgym.servers.echo --http --port 0") as server:  # stopped on exit
        print(f"\nstarted: python -m mcpgym.servers.echo --http, serving on {server.url}")
        anyio.run(play, server.url, episodes, "http")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=5)
    main(parser.parse_args().episodes)
