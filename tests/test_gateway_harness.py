"""The harness through the gateway: episode ids join the calls, `Trajectory.tokens` carries the
merged sequence, and `read_traces` joins the gateway's traces to the server's recordings and the
rollout's trajectories; `OpenAIPolicy(tokens=True)` gets the same from a vLLM-like engine directly;
`mcpgym gateway` runs as a command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import httpx2
import pytest

import mcpgym
from mcpgym import harness
from mcpgym._cli.main import main
from mcpgym.gateway import Gateway, GatewayConfig, read_traces
from mcpgym.servers.echo import Echo
from tests.conftest import serve_app, serve_gym
from tests.gateway_engines import ScriptedEngine, Step, prompt_ids

pytestmark = pytest.mark.anyio


def echo_player(body: dict[str, Any]) -> Step:
    """Repeat first, then say the target: two model calls per episode."""
    if body["messages"][-1]["role"] == "tool":
        return Step(text="", calls=[("echo_message", json.dumps({"message": "apple"}))])
    return Step(text="let me try", calls=[("repeat", json.dumps({"message": "hm", "times": 2}))])


async def test_a_rollout_through_the_gateway_is_joined_to_its_episodes(tmp_path: Path) -> None:
    engine = ScriptedEngine(decide=echo_player)
    traces_dir, server_dir, out = tmp_path / "traces", tmp_path / "server", tmp_path / "rollout.jsonl"
    async with serve_app(engine.app()) as upstream, serve_gym(Echo, record=server_dir) as (_, env_url):
        gateway = Gateway(GatewayConfig(upstream=upstream + "/v1", record=traces_dir))
        async with serve_app(gateway.app()) as url, harness.OpenAIPolicy(url + "/v1", "m") as policy:
            trajectories = await harness.rollout(
                env_url, policy, episodes=3, concurrency=3, options={"target": "apple"}, out=out
            )
    assert all(t.reward == 1.0 and t.episode_id for t in trajectories), [t.error for t in trajectories]
    assert not any("mcpgym-episode" in h for h in engine.headers)  # the gateway's business, not the engine's
    traces = {t.episode_id: t for t in read_traces(traces_dir, recordings=server_dir, rollout=out)}
    assert set(traces) == {t.episode_id for t in trajectories}
    for trajectory in trajectories:
        trace = traces[trajectory.episode_id]
        assert trace.recording is not None and trace.recording.episode_id == trajectory.episode_id
        assert trace.trajectory is not None and trace.trajectory.reward == 1.0
        [sequence] = trace.tokens
        assert sequence.turns == [0, 1] and trajectory.tokens == [sequence.model_copy()]
        assert sequence.token_ids[: len(prompt_ids(trajectory.messages[:-2]))] == prompt_ids(trajectory.messages[:-2])
        assert trace.trajectory.tokens == trajectory.tokens  # written out with the trajectory, read back


async def test_open_ai_policy_asks_a_vllm_like_engine_for_tokens_itself(tmp_path: Path) -> None:
    engine = ScriptedEngine(decide=echo_player)
    async with serve_app(engine.app()) as upstream:
        async with harness.OpenAIPolicy(upstream + "/v1", "m", tokens=True) as policy:
            [trajectory] = await harness.rollout(Echo, policy, options={"target": "apple"})
    assert engine.requests[0]["return_token_ids"] is True and engine.requests[0]["top_logprobs"] == 0
    [sequence] = trajectory.tokens
    assert sum(sequence.mask) > 0 and sequence.turns == [0, 1]


async def test_without_token_ids_a_trajectory_has_no_tokens(tmp_path: Path) -> None:
    engine = ScriptedEngine(decide=echo_player)
    async with serve_app(engine.app()) as upstream:
        async with harness.OpenAIPolicy(upstream + "/v1", "m") as policy:
            [trajectory] = await harness.rollout(Echo, policy, options={"target": "apple"})
    assert trajectory.reward == 1.0 and trajectory.tokens == []


def test_the_gateway_command_serves_and_a_killed_one_keeps_every_finished_call(tmp_path: Path) -> None:
    engine = ScriptedEngine()
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(serve_app(engine.app())) as upstream,
    ):
        argv = [sys.executable, "-m", "mcpgym", "gateway", "--upstream", upstream + "/v1", "--port", "0"]
        with subprocess.Popen([*argv, "--record", str(tmp_path)], stderr=subprocess.PIPE, text=True) as process:
            try:
                assert process.stderr is not None
                banner = process.stderr.readline()  # printed once the socket listens: nothing to poll
                assert banner.startswith("mcpgym gateway: http://127.0.0.1:"), banner
                body = {"messages": [{"role": "user", "content": "hi"}]}
                reply = httpx2.post(
                    banner.split()[2] + "/chat/completions", json=body, headers={"Mcpgym-Episode": "cli"}
                )
                assert reply.status_code == 200 and (tmp_path / "cli.jsonl").exists()
            finally:
                process.terminate()
                code = process.wait()
    assert code in (0, 128 + 15)
    assert mcpgym.read_traces(tmp_path)[0].episode_id == "cli"


def test_harness_config_writes_the_gateway_url_next_to_the_server_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text(json.dumps({"env": {"KEEP": "1"}, "model": "x"}))
    gateway = "http://127.0.0.1:8100/episodes/e1/v1"
    argv = ["harness", "config", "claude-code", "mcpgym.servers.echo:Echo", "--gateway", gateway]
    with pytest.raises(SystemExit) as printed:
        main(argv)
    assert (
        printed.value.code == 0
        and '"ANTHROPIC_BASE_URL": "http://127.0.0.1:8100/episodes/e1"' in capsys.readouterr().out
    )
    with pytest.raises(SystemExit) as written:
        main([*argv, "--write"])
    assert written.value.code == 0
    settings = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    assert settings == {"env": {"KEEP": "1", "ANTHROPIC_BASE_URL": "http://127.0.0.1:8100/episodes/e1"}, "model": "x"}
    assert "echo" in json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]
    with pytest.raises(SystemExit) as refused:
        main(["harness", "config", "mcp-json", "mcpgym.servers.echo:Echo", "--gateway", gateway])
    assert "--gateway writes Claude Code's settings" in str(refused.value.code)


def test_mcpgym_rollout_sends_its_episode_ids_to_the_gateway(tmp_path: Path) -> None:
    engine = ScriptedEngine(decide=echo_player)
    out, traces_dir = tmp_path / "rollout.jsonl", tmp_path / "traces"
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(serve_app(engine.app())) as upstream,
    ):
        gateway = Gateway(GatewayConfig(upstream=upstream + "/v1", record=traces_dir))
        with portal.wrap_async_context_manager(serve_app(gateway.app())) as url:
            argv = ["rollout", "mcpgym.servers.echo:Echo", "--model", "m", "--base-url", url + "/v1"]
            with pytest.raises(SystemExit) as done:
                main([*argv, "--episodes", "2", "--options", '{"target": "apple"}', "--out", str(out), "--no-progress"])
    assert done.value.code == 0
    traces = read_traces(traces_dir, rollout=out)
    assert len(traces) == 2 and all(t.trajectory is not None and t.trajectory.reward == 1.0 for t in traces)
    assert all(t.trajectory.tokens == t.tokens and len(t.calls) == 2 for t in traces)
