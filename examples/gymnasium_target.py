"""A Gymnasium environment served as an mcpgym environment: the `gym:ID` target (docs/bridges.md).

FrozenLake, not slippery, played to its goal: one `step` tool whose schema follows the action
space, the observation as JSON and its text render, reward and termination as Gymnasium gives
them. The same episode is then played by Gymnasium itself, to show that a seeded mcpgym
episode is Gymnasium's own trajectory.

    pip install 'mcpgym[gymnasium]'
    python examples/gymnasium_target.py                                  # in-process
    mcpgym serve "gym:FrozenLake-v1?is_slippery=false" --http --port 8000
    python examples/gymnasium_target.py --target http://127.0.0.1:8000/mcp   # the same over HTTP
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence
from typing import Any

import gymnasium

import mcpgym

TARGET = "gym:FrozenLake-v1?is_slippery=false"
PATH = [2, 2, 1, 1, 1, 2]  # right, right, down, down, down, right: the 4x4 map's way to the goal


# --8<-- [start:play]
async def play(target: str, seed: int = 0) -> list[tuple[Any, float, bool, bool]]:
    """One episode of `target` along PATH: (observation, reward, terminated, truncated) per step."""
    rows = []
    async with mcpgym.connect(target) as env:
        [step_tool] = await env.list_tools()
        print(step_tool.name, step_tool.input_schema["properties"]["action"])
        # step {'description': 'an integer from 0 to 3 (0: Move left, 1: Move down, ...)', 'maximum': 3, ...}
        first = await env.reset(seed=seed)
        print(first.observation["text"])  # the ansi render: the map with the player on S
        for action in PATH:
            result = await env.call_tool("step", {"action": action})
            observation = result.observation.structured_content["observation"]  # FrozenLake's cell index
            rows.append((observation, result.reward, result.terminated, result.truncated))
            if result.done:
                break
    print(rows[-1])  # (15, 1.0, True, False): the goal, reward 1, terminated
    return rows


# --8<-- [end:play]


def gymnasium_rows(seed: int = 0) -> list[tuple[Any, float, bool, bool]]:
    """The same episode played by Gymnasium itself."""
    env = gymnasium.make("FrozenLake-v1", is_slippery=False)
    env.reset(seed=seed)
    rows = []
    for action in PATH:
        observation, reward, terminated, truncated, _ = env.step(action)
        rows.append((int(observation), float(reward), terminated, truncated))
        if terminated or truncated:
            break
    env.close()
    return rows


def main(argv: Sequence[str] | None = None) -> list[tuple[Any, float, bool, bool]]:
    parser = argparse.ArgumentParser(description="A gym:ID target played over mcpgym.")
    parser.add_argument("--target", default=TARGET, help=f"{TARGET} (in-process) or the URL of a server serving it")
    args = parser.parse_args(argv)
    rows = asyncio.run(play(args.target))
    same = rows == gymnasium_rows()
    print("the same trajectory as Gymnasium's own:", same)
    if not same:
        raise SystemExit(1)
    return rows


if __name__ == "__main__":
    main()
