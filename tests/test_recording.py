"""Server-side recording: whoever drives the episode, it is on disk, step by step."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

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

    rl, plain = sorted(mcpgym.read_recordings(tmp_path), key=lambda t: t.implicit)
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
    (recording,) = mcpgym.read_recordings(tmp_path)
    assert [s.arguments for s in recording.steps] == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert not recording.closed  # killed: no close record, but nothing before it lost


async def test_recording_more_live_episodes_than_the_open_file_limit(tmp_path: Path) -> None:
    """With RLIMIT_NOFILE at 64, 150 live recorded episodes (reset #~40 hit EMFILE when each held its file)."""
    limit, episodes = 64, 150
    code = (
        f"import resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, {limit})); "
        "from mcpgym._cli.main import main; main(sys.argv[1:])"
    )
    env_vars = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else None
    server = StdioServerParameters(
        command=sys.executable,
        args=["-c", code, "serve", "tests.envs:Counter", "--record", str(tmp_path)],
        env=env_vars,
    )
    async with mcpgym.connect(server) as env:
        for i in range(episodes):
            env.episode_id = None  # keep every episode live: reset would otherwise close the last one
            await env.reset(seed=i)
            assert (await env.call_tool("add", {"n": 1})).reward == 0.1
        state = await env.state()
        assert state.step_count == 1
    recorded = mcpgym.read_recordings(tmp_path)
    assert len(recorded) == episodes > limit  # the premise: more live episodes than descriptors
    assert sorted(t.seed or 0 for t in recorded) == list(range(episodes))
    assert all(len(t.steps) == 1 and t.steps[0].reward == 0.1 for t in recorded)


async def test_recording_writes_happen_off_the_event_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    import mcpgym._recording.recording as recording

    writers: set[str] = set()
    real = recording._write_all

    def spy(fd: int, data: bytes) -> None:
        writers.add(threading.current_thread().name)
        real(fd, data)

    monkeypatch.setattr(recording, "_write_all", spy)
    server = mcpgym.GymServer(Counter, record=tmp_path)
    async with mcpgym.connect(server) as env:
        await env.reset(options={"label": "off-loop"})
        await env.call_tool("add", {"n": 1})
    assert writers and threading.current_thread().name not in writers  # the loop's thread never writes
    (recorded,) = mcpgym.read_recordings(tmp_path)
    assert recorded.closed and len(recorded.steps) == 1


async def test_a_served_environment_records_its_render_for_the_viewer(tmp_path: Path) -> None:
    """The viewer shows what the server recorded: render() travels with the record whatever the
    door (here a stdio server, as `mcpgym serve ... --record` runs it)."""
    from tests.conftest import stdio_command

    served = stdio_command("-m", "mcpgym", "serve", "mcpgym.servers.blackjack", "--record", str(tmp_path))
    async with mcpgym.connect(served) as env:
        await env.reset(seed=3)
        await env.call_tool("stand")
    reset, step = _events(tmp_path)[:2]
    assert reset["render"]["text"].endswith("Your turn: hit or stand?")
    assert "| dealer | Q♦ 9♠ | **19** |" in step["render"]["markdown"]


def _events(directory: Path) -> list[dict[str, Any]]:
    """The events of the one recording in `directory`, as written."""
    (path,) = directory.glob("*.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]
