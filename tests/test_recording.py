"""Server-side trajectory recording: whoever drives the episode, it is on disk, step by step."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

import mcpgym
from tests.envs import Counter

pytestmark = pytest.mark.anyio


async def test_rl_client_and_plain_agent_are_recorded_alike(tmp_path: Path) -> None:
    server = mcpgym.GymServer(Counter, record=tmp_path)
    async with mcpgym.connect(server) as env:
        await env.reset(seed=4, options={"label": "rl"})
        await env.call_tool("add", {"n": 10})
        await env.call_tool("stop", {"bonus": 2.0})
    async with Client(server.mcp, mode="legacy") as agent:  # never resets: implicit episode
        await agent.call_tool("add", {"n": 5})
        await agent.call_tool("add", {"n": "oops"})

    rl, plain = sorted(mcpgym.read_trajectories(tmp_path), key=lambda t: t.implicit)
    assert (rl.environment, rl.seed, rl.options, rl.implicit, rl.closed) == ("Counter", 4, {"label": "rl"}, False, True)
    assert [s.tool for s in rl.steps] == ["add", "stop"]
    assert rl.total_reward == pytest.approx(3.0) and rl.done
    assert rl.steps[1].result.content[0].text.startswith("stopped at")  # type: ignore[union-attr]
    assert plain.implicit and plain.closed and [s.reward for s in plain.steps] == [0.5, 0.0]
    assert plain.steps[1].result.is_error and plain.steps[1].arguments == {"n": "oops"}
    assert all(s.duration >= 0 for s in rl.steps + plain.steps)


def test_a_killed_server_leaves_every_completed_step_on_disk(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpgym", "serve", "tests.envs:Counter", "--record", str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        # Speak the legacy handshake by hand so we know exactly which steps completed.
        def send(message: str) -> None:
            assert proc.stdin is not None
            proc.stdin.write(message + "\n")
            proc.stdin.flush()

        send(
            '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
            '"capabilities":{},"clientInfo":{"name":"t","version":"0"}}}'
        )
        proc.stdout.readline()
        send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        for i in range(1, 4):
            send(
                f'{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":"add","arguments":{{"n":{i}}}}}}}'
            )
            assert f'"id":{i}' in proc.stdout.readline()  # the step completed
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        proc.kill()
        proc.stdin.close()
        proc.stdout.close()
    (trajectory,) = mcpgym.read_trajectories(tmp_path)
    assert [s.arguments for s in trajectory.steps] == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert not trajectory.closed  # killed: no close record, but nothing before it lost
