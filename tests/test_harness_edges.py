"""Edges of the harness: failing sinks, hanging servers, failures mid-turn, resumed output files,
what reconnects, malformed endpoint replies, and CLI flags."""

from __future__ import annotations

import signal
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

import mcpgym
from mcpgym import harness
from mcpgym._cli import main as mcpgym_cli
from mcpgym.harness import _scripted, config
from mcpgym.harness.openai import parse_completion
from mcpgym.harness.policy import tool_call
from mcpgym.harness.types import AssistantTurn, ChatTool, Message, Trajectory
from mcpgym.servers.echo import Echo
from tests.conftest import serve_app

pytestmark = pytest.mark.anyio


async def say_bye(messages: list[Message], tools: list[ChatTool]) -> AssistantTurn:
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
    async def score_then_stall(messages: list[Message], tools: list[ChatTool]) -> AssistantTurn:
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
    async def times_out(messages: list[Message], tools: list[ChatTool]) -> AssistantTurn:
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
    async def broken(messages: list[Message], tools: list[ChatTool]) -> AssistantTurn:
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


def test_backoff_needs_one_attempt() -> None:
    with pytest.raises(ValueError, match="attempts >= 1"):
        harness.Backoff(attempts=0)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"choices": [{"message": None}]}, "NoneType"),
        ({"choices": [{"message": {"content": 3}}]}, "content is a int"),
        ({"choices": [{"message": {"tool_calls": [{"id": "1", "function": {"name": None}}]}}]}, "no function name"),
        ({"choices": [{"message": {"tool_calls": [{"id": 1, "function": {"name": "f"}}]}}]}, "validation error"),
    ],
)
def test_a_malformed_reply_is_an_endpoint_error(body: dict[str, Any], reason: str) -> None:
    with pytest.raises(harness.EndpointError, match="not a chat completion") as raised:
        parse_completion(body)
    assert reason in str(raised.value)


def test_lenient_replies_parse() -> None:
    parts = {"content": [{"type": "text", "text": "hi "}, {"type": "text", "text": "there"}]}
    assert parse_completion({"choices": [{"message": parts}]}).content == "hi there"
    bad_usage = {"prompt_tokens": None, "completion_tokens": "n/a", "total_tokens": 5}
    turn = parse_completion({"choices": [{"message": {"content": "x"}}], "usage": bad_usage})
    assert turn.usage == harness.Usage(total_tokens=5)
    assert parse_completion({"choices": [{"message": {"content": "x"}}], "usage": []}).usage == harness.Usage()
    calls = [{"function": {"name": "f", "arguments": "{}"}}, {"function": {"name": "g"}}]
    turn = parse_completion({"choices": [{"message": {"tool_calls": calls}}]})
    assert [(c.id, c.name) for c in turn.tool_calls] == [("call_0", "f"), ("call_1", "g")]


def test_a_base_url_without_a_scheme_is_refused() -> None:
    with pytest.raises(ValueError, match="http://"):
        harness.OpenAIPolicy("localhost:8000/v1", "m")


def test_rollout_flags_are_validated(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["rollout", "mcpgym.servers.echo:Echo", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"]
    for flags in (["--episodes", "0"], ["--concurrency", "-1"], ["--retries", "-1"], ["--episodes", "x"]):
        with pytest.raises(SystemExit) as exit:
            mcpgym_cli.main([*base, *flags])
        assert exit.value.code == 2, flags
    assert "must be at least 1" in capsys.readouterr().err


async def test_no_retries_means_one_attempt(tmp_path: Path) -> None:
    out = tmp_path / "x.jsonl"
    async with serve_app(_scripted.ScriptedEndpoint().app()) as base:
        argv = ["mcpgym", "rollout", "mcpgym.servers.echo:Echo", "--model", "solve", "--base-url", f"{base}/v1"]
        code = await anyio.to_thread.run_sync(_exit_code, [*argv, "--retries", "0", "--out", str(out)])
    (t,) = harness.read_rollout(out)
    assert code == 0 and t.status == "ok"  # not "AssertionError: unreachable"


def test_rollout_against_a_dead_model_endpoint_says_so_without_retrying(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def retried(*args: object) -> float:
        raise AssertionError("a refused connection was retried")

    monkeypatch.setattr(harness.Backoff, "delay", retried)
    with socket.socket() as probe:  # a free port nobody listens on once it is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    argv = ["mcpgym", "rollout", "mcpgym.servers.echo:Echo", "--model", "m", "--base-url", url, "--episodes", "2"]
    assert _exit_code([*argv, "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "2 episodes: mean reward 0.000 over 0 ok, 2 failed" in err
    assert f"nothing listens at {url}/chat/completions (connection refused): start the model server" in err


def _exit_code(argv: list[str]) -> object:
    with pytest.raises(SystemExit) as exit:
        mcpgym_cli.main(argv[1:])
    return exit.value.code


@pytest.mark.parametrize("flag", [["--record", "runs"], ["--server-args=--partial-credit"]])
def test_server_flags_with_a_url_are_refused(flag: list[str]) -> None:
    with pytest.raises(harness.ConfigError, match="launched server"):
        config.server_entry(
            "claude-code", "mcpgym.servers.coding", url="http://127.0.0.1:9/mcp", **_config_kwargs(flag)
        )


def _config_kwargs(flag: list[str]) -> dict[str, Any]:
    return {"record": flag[1]} if flag[0] == "--record" else {"server_args": ["--partial-credit"]}


async def test_ctrl_c_prints_what_finished_and_exits_130(tmp_path: Path) -> None:
    out = tmp_path / "x.jsonl"
    endpoint = _scripted.ScriptedEndpoint()
    async with serve_app(endpoint.app()) as base:
        argv = [sys.executable, "-m", "mcpgym", "rollout", "mcpgym.servers.echo:Echo", "--model", "hang"]
        argv += ["--base-url", f"{base}/v1", "--episodes", "2", "--concurrency", "1", "--out", str(out)]
        async with await anyio.open_process(argv) as process:
            assert process.stderr is not None
            with anyio.fail_after(60):
                await endpoint.received.wait()  # the first episode is waiting on the model
            process.send_signal(signal.SIGINT)
            stderr = b""
            async for chunk in process.stderr:
                stderr += chunk
            endpoint.release.set()
        assert await process.wait() == 130, stderr.decode()
    assert b"0 episodes" in stderr and b"interrupted" in stderr
