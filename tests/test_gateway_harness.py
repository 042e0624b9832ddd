"""The harness through the gateway: episode ids join the calls, `Trajectory.tokens` carries the
merged sequence, and `read_traces` joins the gateway's traces to the server's recordings and the
rollout's trajectories; `OpenAIPolicy(tokens=True)` gets the same from a vLLM-like engine directly;
`mcpgym gateway` runs as a command; `mcpgym.trl.rollout_func` turns an episode whose prompts
diverged into one sample of the tokens the model generated, in the context it generated them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import anyio.from_thread
import httpx2
import pytest

import mcpgym
import mcpgym.trl
from mcpgym import harness
from mcpgym._cli.main import main
from mcpgym.gateway import Gateway, GatewayConfig, TokenSequence, read_traces
from mcpgym.harness.trl import _batch
from mcpgym.servers.echo import Echo
from tests.conftest import serve_app, serve_gym
from tests.gateway_engines import EOS, ScriptedEngine, Step, prompt_ids

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


def thinking_player(body: dict[str, Any]) -> Step:
    """`echo_player` with reasoning the replies leave out: each next prompt diverges from what the
    model generated, as with a chat template that drops earlier reasoning from the history."""
    step = echo_player(body)
    step.think = "the target word is apple"
    return step


def grpo_trainer(vllm_url: str) -> Any:
    """What `rollout_func` reads of a GRPOTrainer: its vLLM server, its model's name, its tokenizer."""
    args = SimpleNamespace(vllm_server_base_url=vllm_url, max_completion_length=None)
    return SimpleNamespace(
        args=args, model=SimpleNamespace(name_or_path="m"), processing_class=SimpleNamespace(eos_token_id=EOS)
    )


def test_rollout_func_trains_on_the_last_branch_of_an_episode_whose_prompts_diverged(tmp_path: Path) -> None:
    engine = ScriptedEngine(decide=thinking_player)
    task = mcpgym.Task(id="echo/apple", prompt="say apple", options={"target": "apple"})
    play = mcpgym.trl.rollout_func(Echo, task=lambda prompt: task, record=str(tmp_path))
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(serve_app(engine.app())) as upstream,
        pytest.warns(UserWarning, match="diverged"),
    ):
        batch = play(["say apple", "say apple"], grpo_trainer(upstream))
    assert batch["episode_return"] == [1.0, 1.0] and batch["branches"] == [2, 2]
    traces = read_traces(tmp_path)
    assert len(traces) == 2 and all(len(t.tokens) == 2 and t.tokens[1].parent == 0 for t in traces)
    for n, prompt in enumerate(batch["prompt_ids"]):
        # The sample is the last call, in the context the model generated it in: its own prompt
        # (the first turn re-rendered, all mask 0) and exactly the tokens it sampled there.
        first, last = next(t.calls for t in traces if t.calls[1].prompt_token_ids == prompt)
        completion = batch["completion_ids"][n]
        assert completion == last.choices[0].completion_token_ids and batch["env_mask"][n] == [1] * len(completion)
        assert batch["logprobs"][n] == [-0.5] * len(completion)
        assert batch["untrained_tokens"][n] == len(first.choices[0].completion_token_ids or []) > 0


def test_a_model_token_without_a_logprob_is_not_given_probability_one() -> None:
    sequence = TokenSequence(prompt_length=1, token_ids=[1001, 7, 1003, 8], mask=[0, 1, 0, 1], logprobs=[None] * 4)
    tokens = harness.Trajectory(index=0, status="ok", reward=1.0, tokens=[sequence])
    batch = _batch([tokens], SimpleNamespace(eos_token_id=EOS))
    assert batch["completion_ids"] == [[7, 1003, 8]] and batch["env_mask"] == [[1, 0, 1]]
    assert batch["logprobs"] == [[None, 0.0, None]]  # TRL: None is "no correction", 0.0 would be p = 1
    assert batch["branches"] == [1] and batch["untrained_tokens"] == [0]


def test_a_rollout_without_tokens_is_masked_and_a_failed_one_stays_out_of_the_baseline() -> None:
    untokenised = harness.Trajectory(index=0, reward=1.0)  # played, but the engine gave no ids
    failed = harness.Trajectory(index=1, status="failed", error="the server went away")
    batch = _batch([untokenised, failed], SimpleNamespace(eos_token_id=EOS))
    assert batch["env_mask"] == [[0], [0]] and batch["completion_ids"] == [[EOS], [EOS]]
    assert batch["episode_return"] == [1.0, None]  # a real outcome counts in its group's baseline; an error not
    assert mcpgym.trl.episode_return([], batch["episode_return"]) == [1.0, None]
