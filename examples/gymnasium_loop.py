"""A Gymnasium loop over an mcpgym environment: `mcpgym.gymnasium.make` turns any mcpgym target
into a `gymnasium.Env` whose observations are text and whose actions are tool calls.

The policy reads the word Echo asks for out of the first observation and says it with the
`echo_message` tool; the loop is Gymnasium's own (reset, step until terminated or truncated).
Any other target works the same way, e.g. `--target gym:FrozenLake-v1` (a Gymnasium
environment served by mcpgym, and back) or `--target http://127.0.0.1:8000/mcp`.

    pip install 'mcpgym[gymnasium]'
    python examples/gymnasium_loop.py [--episodes N] [--target mcpgym.servers.echo]
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from typing import Any

from gymnasium.utils.env_checker import check_env

import mcpgym.gymnasium


def policy(observation: str, tool_names: list[str]) -> dict[str, Any]:
    """Echo back the quoted word the observation asks for (tool index + JSON arguments)."""
    asked = re.search(r"'(\w+)'", observation)
    message = asked.group(1) if asked else "hello"
    return {"tool": tool_names.index("echo_message"), "arguments": json.dumps({"message": message})}


def main(argv: Sequence[str] | None = None) -> list[float]:
    parser = argparse.ArgumentParser(description="A Gymnasium loop over an mcpgym environment.")
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--target", default="mcpgym.servers.echo")
    args = parser.parse_args(argv)
    returns = []
    # --8<-- [start:loop]
    with mcpgym.gymnasium.make(args.target) as env:
        check_env(env)  # Gymnasium's own environment checker passes
        print(f"action space: {env.action_space}\ntools: {env.tool_names}")
        for episode in range(args.episodes):
            observation, _ = env.reset(seed=episode)
            total, terminated, truncated = 0.0, False, False
            while not (terminated or truncated):
                if "echo_message" in env.tool_names:
                    action = policy(observation, env.tool_names)
                else:  # another target: its first tool, with a random integer `action` (a gym:ID target's step)
                    action = {"tool": 0, "arguments": json.dumps({"action": int(env.np_random.integers(4))})}
                observation, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
            returns.append(total)
            print(f"episode {episode}: return {total}")
    # --8<-- [end:loop]
    return returns


if __name__ == "__main__":
    main()
