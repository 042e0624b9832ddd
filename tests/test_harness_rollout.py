"""The agent loop against a real (scripted) chat-completions server on loopback.

Each test plays mcpgym.servers.coding or Echo through `harness.rollout` with `OpenAIPolicy` pointed
at harness._scripted, which speaks the OpenAI protocol over HTTP and replays fixed tool calls.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

import mcpgym
from mcpgym import harness
from mcpgym.harness import _scripted
from mcpgym.harness.types import AssistantTurn, ChatTool, Message
from mcpgym.servers.coding import Coding
from mcpgym.servers.echo import Echo
from tests.conftest import serve_app, serve_gym

pytestmark = pytest.mark.anyio

FAST = harness.Backoff(attempts=4, base=0.001, cap=0.01)
TASKS = [{"task_id": f"HumanEval/{i}"} for i in range(3)]


@contextlib.asynccontextmanager
async def scripted() -> AsyncIterator[tuple[_scripted.ScriptedEndpoint, str]]:
    """The scripted endpoint on a free loopback port; yields it and its base URL (`.../v1`)."""
    endpoint = _scripted.ScriptedEndpoint()
    async with serve_app(endpoint.app()) as base:
        try:
            yield endpoint, f"{base}/v1"
        finally:
            endpoint.release.set()  # a hung request returns, so the server can shut down


def policy(base: str, model: str, **options: float) -> harness.OpenAIPolicy:
    return harness.OpenAIPolicy(base, model, backoff=FAST, **options)  # type: ignore[arg-type]


async def test_canonical_solutions_earn_reward_one(tmp_path: Path) -> None:
    out = tmp_path / "runs" / "solve.jsonl"
    async with scripted() as (endpoint, base), policy(base, "solve", temperature=0.0) as p:
        trajectories = await harness.rollout(
            "mcpgym.servers.coding", p, episodes=3, concurrency=3, options=TASKS, out=out
        )

    assert [t.reward for t in trajectories] == [1.0, 1.0, 1.0]
    assert all(t.status == "ok" and t.stop == "done" and t.done for t in trajectories)
    first = trajectories[0]
    assert first.options == {"task_id": "HumanEval/0"} and first.observation["task_id"] == "HumanEval/0"
    assert [[s.tool for s in turn.steps] for turn in first.turns] == [["write_file"], ["submit"]]
    assert first.turns[1].steps[0].reward == 1.0 and first.turns[1].steps[0].done
    assert [m["role"] for m in first.messages] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert first.usage.total_tokens == sum(t.assistant.usage.total_tokens for t in first.turns) > 0
    assert sorted(read_lines(out), key=lambda t: t.index) == trajectories  # written as they finished
    # What the endpoint saw: the MCP tools as function tools, parameters = inputSchema.
    request = endpoint.requests[0]
    assert request["model"] == "solve" and request["temperature"] == 0.0
    tools = {t["function"]["name"]: t["function"] for t in request["tools"]}
    async with mcpgym.connect(Coding) as env:
        for tool in await env.list_tools():
            assert tools[tool.name]["parameters"] == tool.input_schema
            assert tools[tool.name]["description"] == tool.description


async def test_an_http_server_records_what_the_harness_played(tmp_path: Path) -> None:
    async with serve_gym(Coding, record=tmp_path) as (_, url), scripted() as (_, base), policy(base, "solve") as p:
        (played,) = await harness.rollout(url, p, options=TASKS[:1])
    (recorded,) = mcpgym.read_recordings(tmp_path)
    assert played.reward == recorded.total_reward == 1.0
    assert played.episode_id == recorded.episode_id and recorded.closed
    assert [s.tool for s in recorded.steps] == [s.tool for turn in played.turns for s in turn.steps]


async def test_an_unknown_tool_is_answered_without_stepping() -> None:
    async with scripted() as (endpoint, base), policy(base, "unknown-tool") as p:
        (t,) = await harness.rollout(Coding, p, options=TASKS[:1])
    (step,) = t.turns[0].steps
    assert (step.tool, step.stepped, step.is_error, step.reward) == ("launch_rockets", False, True, 0.0)
    assert "unknown tool 'launch_rockets'" in step.output and "submit" in step.output
    assert t.status == "ok" and t.stop == "no_tool_calls" and not t.done
    tool_message = endpoint.requests[1]["messages"][-1]  # the model was told, and could correct itself
    assert tool_message == {"role": "tool", "tool_call_id": "call_0", "content": step.output}


async def test_malformed_arguments_are_answered_without_stepping() -> None:
    async with scripted() as (_, base), policy(base, "malformed-arguments") as p:
        (t,) = await harness.rollout(Coding, p, options=TASKS[:1])
    (step,) = t.turns[0].steps
    assert step.arguments is None and not step.stepped and step.is_error
    assert "not a JSON object" in step.output
    assert t.turns[0].assistant.tool_calls[0].arguments_json == '{"path": "a.py", "content": '


async def test_a_timed_out_episode_is_recorded_failed_and_the_others_survive(tmp_path: Path) -> None:
    out = tmp_path / "mixed.jsonl"
    async with scripted() as (_, base), policy(base, "solve") as solve, policy(base, "hang", timeout=0.5) as hang:

        async def mixed(messages: list[Message], tools: list[ChatTool]) -> AssistantTurn:
            task = json.loads(messages[1]["content"])["task_id"]
            return await (hang if task == "HumanEval/1" else solve)(messages, tools)

        trajectories = await harness.rollout(Coding, mixed, episodes=3, concurrency=3, options=TASKS, out=out)

    assert [t.status for t in trajectories] == ["ok", "failed", "ok"]
    assert [t.reward for t in trajectories] == [1.0, 0.0, 1.0]
    failed = trajectories[1]
    assert failed.error is not None and failed.error.startswith("EndpointTimeout") and failed.stop == "error"
    assert failed.observation["task_id"] == "HumanEval/1"  # it got as far as the reset
    assert sorted(t.index for t in read_lines(out)) == [0, 1, 2]


async def test_transient_errors_are_retried() -> None:
    async with scripted() as (endpoint, base), policy(base, "flaky") as p:
        (t,) = await harness.rollout(Coding, p, options=TASKS[:1])
    assert t.reward == 1.0 and t.status == "ok"
    assert len(endpoint.requests) == 2 + 2  # a 500 and a 429, then write_file and submit (done)


async def test_retries_are_capped() -> None:
    async with scripted() as (endpoint, base):
        async with harness.OpenAIPolicy(base, "flaky", backoff=harness.Backoff(attempts=2, base=0.001)) as p:
            (t,) = await harness.rollout(Coding, p, options=TASKS[:1])
    assert t.failed and t.error is not None and "kept failing: HTTP 429" in t.error
    assert len(endpoint.requests) == 2


async def test_client_errors_are_not_retried() -> None:
    async with scripted() as (endpoint, base), policy(base, "no-such-model") as p:
        (t,) = await harness.rollout(Echo, p)
    assert t.failed and t.error is not None and "HTTP 404" in t.error and "no-such-model" in t.error
    assert len(endpoint.requests) == 1


async def test_a_refused_connection_fails_at_once_until_the_endpoint_has_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    delays: list[int] = []
    real = harness.Backoff.delay

    def delay(self: harness.Backoff, retry: int, retry_after: float | None = None) -> float:
        delays.append(retry)
        return real(self, retry, retry_after)

    monkeypatch.setattr(harness.Backoff, "delay", delay)
    async with scripted() as (_, base):
        pass  # the port is closed again: connections are refused
    async with policy(base, "solve") as p:
        (t,) = await harness.rollout(Echo, p)
    assert t.failed and t.error is not None and f"nothing listens at {base}/chat/completions" in t.error
    assert delays == []  # no retry: nothing listens there
    async with contextlib.AsyncExitStack() as stack:
        server = contextlib.AsyncExitStack()
        _, served = await server.enter_async_context(scripted())
        stack.push_async_exit(server)
        p = await stack.enter_async_context(policy(served, "solve"))
        (ok,) = await harness.rollout(Echo, p)
        await server.aclose()  # the endpoint stops: its port refuses connections now
        (gone,) = await harness.rollout(Echo, p)  # it answered before: a refusal now is a restart
    assert ok.status == "ok" and gone.failed and gone.error is not None and "cannot reach" in gone.error
    assert delays == [0, 1, 2]  # retried (FAST: 4 attempts)


async def test_the_turn_limit_ends_an_episode() -> None:
    async with scripted() as (_, base), policy(base, "solve") as p:
        (t,) = await harness.rollout(Coding, p, options=TASKS[:1], max_turns=1)
    assert (t.stop, t.done, t.reward, len(t.turns)) == ("max_turns", False, 0.0, 1)


# A policy is any async callable: no endpoint needed.


async def say_the_word(messages: list[Message], tools: list[ChatTool]) -> AssistantTurn:
    target = json.loads(messages[-1]["content"])["target"] if messages[-1]["role"] == "user" else None
    if target is None:
        return AssistantTurn(content="done")
    return AssistantTurn(tool_calls=[harness.tool_call("c0", "echo_message", {"message": target})])


async def test_a_plain_async_function_is_a_policy() -> None:
    seen: list[int] = []
    trajectories = await harness.rollout(
        Echo,
        say_the_word,
        episodes=5,
        concurrency=2,
        seed=10,
        system_prompt=None,
        on_trajectory=lambda t: seen.append(t.index),
    )
    assert [t.reward for t in trajectories] == [1.0] * 5 and sorted(seen) == [0, 1, 2, 3, 4]
    assert [t.seed for t in trajectories] == [10, 11, 12, 13, 14]
    assert trajectories[0].messages[0]["role"] == "user"  # no system prompt when told so
    assert trajectories[0].usage == harness.Usage()


async def test_a_policy_that_raises_fails_only_its_own_episode() -> None:
    async def flaky_policy(messages: list[Message], tools: list[ChatTool]) -> AssistantTurn:
        if json.loads(messages[1]["content"])["target"] == "river":
            raise RuntimeError("the policy broke")
        return await say_the_word(messages, tools)

    targets = [{"target": w} for w in ("apple", "river", "stone")]
    trajectories = await harness.rollout(Echo, flaky_policy, episodes=6, concurrency=2, options=targets)
    assert [t.status for t in trajectories] == ["ok", "failed", "ok"] * 2
    assert trajectories[1].error == "RuntimeError: the policy broke"


async def test_an_episode_timeout_fails_the_episode() -> None:
    never = anyio.Event()

    async def stuck(messages: list[Message], tools: list[ChatTool]) -> AssistantTurn:
        await never.wait()
        raise AssertionError("unreachable")

    (t,) = await harness.rollout(Echo, stuck, episode_timeout=0.05)
    assert t.failed and t.error is not None and "timeout" in t.error


async def test_a_target_that_cannot_start_fails_every_episode_as_data() -> None:
    trajectories = await harness.rollout([sys.executable, "-c", "raise SystemExit(3)"], say_the_word, episodes=2)
    assert [t.status for t in trajectories] == ["failed", "failed"]
    assert all(t.error is not None and t.error.startswith("MCPError") for t in trajectories)


async def test_the_cli_runs_a_rollout(tmp_path: Path) -> None:
    out = tmp_path / "x.jsonl"
    async with scripted() as (_, base):
        result = await anyio.run_process(
            [
                sys.executable,
                "-m",
                "mcpgym",
                "rollout",
                "mcpgym.servers.coding",
                "--model",
                "solve",
                "--base-url",
                base,
                "--episodes",
                "2",
                "--concurrency",
                "2",
                "--seed",
                "0",
                "--options",
                '{"task_id": "HumanEval/3"}',
                "--out",
                str(out),
            ],
            check=False,
        )
    assert result.returncode == 0, result.stderr.decode()
    assert [(t.reward, t.seed) for t in read_lines(out)] in ([(1.0, 0), (1.0, 1)], [(1.0, 1), (1.0, 0)])
    assert "mean reward 1.000" in result.stderr.decode()


def test_importing_mcpgym_does_not_import_the_harness() -> None:
    code = "import sys, mcpgym, mcpgym._cli.main; assert 'harness' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_public_api() -> None:
    assert sorted(harness.__all__) == sorted(
        [
            "SYSTEM_PROMPT",
            "AssistantTurn",
            "Backoff",
            "CallOutcome",
            "ConfigError",
            "EndpointError",
            "EndpointTimeout",
            "HarnessError",
            "Message",
            "OpenAIPolicy",
            "Policy",
            "ToolCall",
            "ChatTool",
            "Trajectory",
            "Turn",
            "Usage",
            "openai_tools",
            "read_rollout",
            "rollout",
            "run_episode",
            "tool_call",
            "evaluate",
            "Report",
            "EvalError",
        ]
    )


def read_lines(path: Path) -> list[harness.Trajectory]:
    return harness.read_rollout(path)
