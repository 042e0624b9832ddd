"""The public surface: exported names, the sync twin, factories and instances as targets."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from pydantic import ValidationError

import mcpgym
from mcpgym import CallToolAction, ListToolsAction
from mcpgym.servers.echo import Echo
from tests.envs import CLOSED, Counter

EXPORTED = {
    "AT_CAPACITY",
    "EPISODE_HEADER",
    "HTTP_ERROR",
    "EPISODE_KEY",
    "STEP_KEY",
    "RUBRIC_KEY",
    "Action",
    "AsyncEnv",
    "CallToolAction",
    "Environment",
    "EpisodeState",
    "GymServer",
    "JSONValue",
    "ListToolsAction",
    "MCPError",
    "Reset",
    "Render",
    "Rendering",
    "StepResult",
    "SyncEnv",
    "Target",
    "TargetError",
    "Task",
    "ToolError",
    "__version__",
    "check_environment",
    "connect",
    "connect_sync",
    "list_tasks",
    "load_environment",
    "run",
    "tool",
    "StepRecord",
    "Recording",
    "read_recordings",
    "read_traces",
    "ServerProcess",
    "wrap",
    "RunSpec",
    "SpecError",
    "load_spec",
    "SharedClient",
    "AsyncVectorEnv",
    "SyncVectorEnv",
    "VectorStep",
    "connect_vector",
    "connect_vector_sync",
    "task_stats",
    "SamplerConfig",
}


def test_public_names_are_exactly_the_documented_ones() -> None:
    assert set(mcpgym.__all__) == EXPORTED
    for name in EXPORTED:
        assert hasattr(mcpgym, name)


def test_sync_twin_drives_every_kind_of_action() -> None:
    with mcpgym.connect_sync(Echo) as env:
        first = env.reset(seed=0)
        assert first.observation == {"prompt": "Say the word 'orbit' using echo_message.", "target": "orbit"}
        tools = env.step(ListToolsAction())
        assert [t.name for t in tools.observation] == ["echo_message", "repeat"]
        result = env.step(CallToolAction(tool_name="echo_message", arguments={"message": "orbit"}))
        assert (result.text, result.reward, result.done) == ("orbit", 1.0, True)
        assert env.state().total_reward == 1.0


def test_sync_twin_over_stdio() -> None:
    with mcpgym.connect_sync("python -m mcpgym.servers.echo") as env:
        env.reset(seed=0)
        assert env.call_tool("repeat", {"message": "a", "times": 3}).text == "a a a"


@pytest.mark.anyio
async def test_partial_passes_constructor_arguments_and_instances_are_reused() -> None:
    class Greeter(mcpgym.Environment):
        def __init__(self, greeting: str = "hello") -> None:
            self.greeting = greeting

        @mcpgym.tool
        async def greet(self, name: str) -> str:
            """Greet someone."""
            return f"{self.greeting} {name}"

    async with mcpgym.connect(functools.partial(Greeter, greeting="hi")) as env:
        await env.reset()
        assert (await env.call_tool("greet", {"name": "x"})).text == "hi x"
    async with mcpgym.connect(mcpgym.GymServer(functools.partial(Greeter, greeting="yo"))) as env:
        await env.reset()
        assert (await env.call_tool("greet", {"name": "x"})).text == "yo x"

    CLOSED.clear()
    shared = Counter()
    async with mcpgym.connect(shared) as env:
        await env.reset(options={"label": "shared"})
        await env.reset(options={"label": "shared"})
    assert CLOSED["shared"] == 1  # one instance, closed once, at the end


@pytest.mark.anyio
async def test_step_result_models_are_frozen_and_typed() -> None:
    async with mcpgym.connect(Echo) as env:
        await env.reset(seed=0)
        result = await env.step(CallToolAction(tool_name="echo_message", arguments={"message": "x"}))
    with pytest.raises(ValidationError, match="frozen"):
        setattr(result, "reward", 2.0)  # noqa: B010 - the frozen check is the point
    assert result.info == {"step": 1}
    with pytest.raises(ValidationError, match="extra"):
        CallToolAction.model_validate({"tool_name": "x", "extra_field": 1})


def test_reward_outside_a_tool_call_is_a_clear_error() -> None:
    env: Any = Echo()
    with pytest.raises(RuntimeError, match="only be called while"):
        env.reward(1.0)


def test_connect_rejects_what_it_cannot_reach() -> None:
    with pytest.raises(TypeError, match="Cannot connect"):
        mcpgym.connect(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"not an mcpgym\.Environment"):
        mcpgym.connect("json:dumps")


@pytest.mark.anyio
async def test_any_mcp_server_can_be_driven_without_rewards() -> None:
    from mcp.server.mcpserver import MCPServer

    plain = MCPServer("plain")

    @plain.tool()
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    async with mcpgym.connect(plain) as env:
        first = await env.reset()
        assert first.info == {"plain_mcp_server": True}
        result = await env.call_tool("shout", {"text": "hi"})
        assert (result.text, result.reward, result.done) == ("HI", 0.0, False)
        with pytest.raises(mcpgym.MCPError, match="no mcpgym control plane"):
            await env.state()
