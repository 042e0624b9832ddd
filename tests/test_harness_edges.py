"""Edges of the harness: failing sinks, hanging servers, failures mid-turn, resumed output files,
what reconnects, malformed endpoint replies, and CLI flags."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import anyio
import pytest

import harness
import mcpgym
from harness.policy import tool_call
from harness.types import AssistantTurn, Message, ToolSpec, Trajectory
from servers.echo import Echo

pytestmark = pytest.mark.anyio


async def say_bye(messages: list[Message], tools: list[ToolSpec]) -> AssistantTurn:
    return AssistantTurn(content="bye")


async def test_a_failing_callback_costs_no_episode(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    seen: list[tuple[int, str]] = []

    def callback(trajectory: Trajectory) -> None:
        seen.append((trajectory.index, trajectory.status))
        raise RuntimeError("a bug in the caller's callback")

    out = tmp_path / "x.jsonl"
    trajectories = await harness.rollout(Echo, say_bye, episodes=3, concurrency=1, on_trajectory=callback, out=out)
    assert [(t.index, t.status) for t in trajectories] == [(0, "ok"), (1, "ok"), (2, "ok")]
    assert seen == [(0, "ok"), (1, "ok"), (2, "ok")]  # each episode once, never re-recorded as failed
    assert [t.index for t in harness.read_rollout(out)] == [0, 1, 2]
    logged = [r.exc_info[1] for r in caplog.records if r.name == "harness" and r.exc_info]
    assert [str(e) for e in logged] == ["a bug in the caller's callback"] * 3


async def test_connecting_counts_against_the_episode_timeout() -> None:
    with socket.socket() as listener:  # accepts connections (backlog) and never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
        with anyio.fail_after(10):  # a guard for the test only; the harness must give up after 0.2s
            (t,) = await harness.rollout(url, say_bye, episode_timeout=0.2)
    assert t.failed and t.error is not None and t.error.startswith("TimeoutError: connecting")


class Stalls(mcpgym.Environment):
    """Score, then a tool that never answers."""

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> str:
        return "go"

    @mcpgym.tool
    async def score(self) -> str:
        """Earn 0.5."""
        self.reward(0.5)
        return "scored"

    @mcpgym.tool
    async def stall(self) -> str:
        """Never answers."""
        await anyio.Event().wait()
        return "unreachable"


async def test_a_failure_mid_turn_keeps_the_steps_taken() -> None:
    async def score_then_stall(messages: list[Message], tools: list[ToolSpec]) -> AssistantTurn:
        calls = [tool_call("a", "score", "{}"), tool_call("b", "stall", "{}"), tool_call("c", "score", "{}")]
        return AssistantTurn(tool_calls=calls)

    async with mcpgym.connect(Stalls) as env:
        t = await harness.run_episode(env, score_then_stall, episode_timeout=0.2)
    assert t.failed and t.error == "TimeoutError: the episode outlived its timeout (0.2s)"
    assert t.reward == 0.5 and len(t.turns) == 1
    scored, stalled, never = t.turns[0].steps
    assert scored.stepped and scored.reward == 0.5
    assert not stalled.stepped and not never.stepped and "before this call was answered" in stalled.output
    tool_messages = [m for m in t.messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["a", "b", "c"]  # every call answered


async def test_a_timeout_error_of_the_policy_is_not_the_episode_timeout() -> None:
    async def times_out(messages: list[Message], tools: list[ToolSpec]) -> AssistantTurn:
        raise TimeoutError("tokenizer service timed out")

    async with mcpgym.connect(Echo) as env:
        t = await harness.run_episode(env, times_out)
    assert t.error == "TimeoutError: tokenizer service timed out"


async def test_a_rerun_appends_after_a_line_cut_short(tmp_path: Path) -> None:
    out = tmp_path / "x.jsonl"
    await harness.rollout(Echo, say_bye, episodes=1, out=out)
    with out.open("a", encoding="utf-8") as file:
        file.write('{"index": 1, "sta')  # the first run was killed mid-write
    await harness.rollout(Echo, say_bye, episodes=2, out=out)
    assert [t.index for t in harness.read_rollout(out)] == [0, 0, 1]
    assert out.read_text(encoding="utf-8").endswith("}\n")


def test_read_rollout_skips_blank_lines(tmp_path: Path) -> None:
    line = Trajectory(index=4).model_dump_json()
    (tmp_path / "x.jsonl").write_text(f"\n{line}\n\n", encoding="utf-8")
    assert [t.index for t in harness.read_rollout(tmp_path / "x.jsonl")] == [4]


def test_read_rollout_refuses_a_file_that_is_not_a_rollout(tmp_path: Path) -> None:
    (tmp_path / "x.jsonl").write_text('{"not": "a trajectory"}\n', encoding="utf-8")
    with pytest.raises(ValueError):
        harness.read_rollout(tmp_path / "x.jsonl")


class Counting:
    """A target that counts the connections opened to it."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.opened = 0

    def __mcpgym_connect__(
        self, *, mode: str, read_timeout: float | None, headers: dict[str, str] | None
    ) -> mcpgym.AsyncEnv:
        self.opened += 1
        return mcpgym.connect(self.target)


class FailsOddSeeds(Echo):
    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        if seed is not None and seed % 2:
            raise RuntimeError("the environment broke")
        return await super().reset(seed=seed, options=options)


async def test_a_policy_failure_keeps_the_connection() -> None:
    async def broken(messages: list[Message], tools: list[ToolSpec]) -> AssistantTurn:
        raise harness.EndpointError("the endpoint is down")

    target = Counting(Echo)
    trajectories = await harness.rollout(target, broken, episodes=3, concurrency=1)
    assert [t.status for t in trajectories] == ["failed"] * 3
    assert target.opened == 1


async def test_an_environment_failure_reconnects() -> None:
    target = Counting(FailsOddSeeds)
    trajectories = await harness.rollout(target, say_bye, episodes=4, concurrency=1, seed=0)
    assert [t.status for t in trajectories] == ["ok", "failed", "ok", "failed"]
    assert target.opened == 2  # the first, and a fresh one for episode 2 (opened lazily: none after 3)
