"""The `openenv:` target: OpenEnv environments (written against the real `openenv` 0.10's base
classes, tests/openenv/envs.py) and running OpenEnv servers, served as mcpgym environments."""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path

import mcp_types as types
import pytest

import mcpgym
from mcpgym._targets.target import TargetError, parse
from mcpgym.bridges.openenv._environment import json_result, mcp_result
from tests.openenv_venv import openenv_python
from tests.test_openenv_serve import drive

pytestmark = pytest.mark.timeout(600)  # the first test may build the OpenEnv venv

HERE = Path(__file__).resolve().parent
ENVS = HERE / "openenv" / "envs.py"
LAUNCH = HERE.parent / "src" / "mcpgym" / "bridges" / "openenv" / "_launch.py"


@pytest.fixture(scope="module")
def oe_python() -> Path:
    return openenv_python()


@pytest.fixture(scope="module")
def guess_url(oe_python: Path) -> Iterator[str]:
    """A running OpenEnv server (OpenEnv's own, started as its users start one)."""
    with mcpgym.ServerProcess([str(oe_python), str(LAUNCH), f"{ENVS}:Guess"]) as server:
        yield server.url.removesuffix("/mcp")


def call(name: str, **arguments: object) -> mcpgym.CallToolAction:
    return mcpgym.CallToolAction(tool_name=name, arguments=arguments)


@pytest.mark.anyio
async def test_an_mcp_based_openenv_class_is_an_environment_whose_tools_are_its_tools(oe_python: Path) -> None:
    target = f"openenv:{ENVS}:Counter?python={oe_python}"
    async with mcpgym.connect(target) as env:
        tools = {t.name: t for t in await env.list_tools()}
        assert set(tools) == {"add", "peek"}
        assert tools["add"].input_schema["properties"] == {"n": {"type": "integer"}}
        first = await env.reset(seed=1, options={"target": 3})
        assert first.observation == {"metadata": {"message": "reach 3", "target": 3}}
        step = await env.step(call("add", n=1))
        assert (step.reward, step.done, step.text) == (0.0, False, "1")
        peek = await env.step(call("peek"))
        assert peek.observation.structured_content == {"total": 1, "target": 3}
        won = await env.step(call("add", n=2))
        assert (won.reward, won.done, won.terminated) == (1.0, True, True)
        over = await env.step(call("add", n=1))  # the episode is over: nothing reaches OpenEnv, no reward
        assert (over.reward, over.is_error) == (0.0, True)
        assert (await env.state()).total_reward == 1.0
        await env.reset(options={"target": 2})
        bust = await env.step(call("add", n=5))  # a negative reward comes through as well
        assert (bust.reward, bust.done) == (-1.0, True)


@pytest.mark.anyio
async def test_an_action_typed_openenv_server_is_one_tool_whose_schema_is_its_action(guess_url: str) -> None:
    secret = random.Random(4).randint(1, 10)
    async with mcpgym.connect(f"openenv:{guess_url}") as env:
        (tool,) = await env.list_tools()
        assert tool.name == "act" and tool.input_schema["required"] == ["guess"]
        assert "metadata" not in tool.input_schema["properties"]  # OpenEnv's framework field, not the agent's
        first = await env.reset(seed=4)
        assert first.observation["hint"] == "guess a number from 1 to 10"
        refused = await env.step(call("act", guess="seven"))  # not the Action model: refused, the episode goes on
        assert refused.is_error and "VALIDATION_ERROR" in refused.text and not refused.done
        wrong = await env.step(call("act", guess=secret % 10 + 1))
        assert wrong.observation.structured_content["hint"] in ("higher", "lower") and wrong.reward == 0.0
        right = await env.step(call("act", guess=secret))
        assert (right.reward, right.done, right.observation.structured_content["hint"]) == (1.0, True, "right")


@pytest.mark.anyio
async def test_episodes_are_sessions_of_their_own(oe_python: Path) -> None:
    target = f"openenv:{ENVS}:Counter?python={oe_python}"
    async with mcpgym.connect(target) as a, mcpgym.connect(target) as b:
        await a.reset(options={"target": 9})
        await b.reset(options={"target": 9})
        await a.step(call("add", n=1))
        await b.step(call("add", n=2))
        assert (await a.step(call("peek"))).observation.structured_content == {"total": 1, "target": 9}
        assert (await b.step(call("peek"))).observation.structured_content == {"total": 2, "target": 9}


def test_mcpgym_serve_puts_an_openenv_class_behind_mcp_and_openenvs_api_again(oe_python: Path) -> None:
    """OpenEnv class -> mcpgym (over MCP, and --openenv) -> OpenEnv's own client: the round trip."""
    argv = [sys.executable, "-m", "mcpgym", "serve", f"openenv:{ENVS}:Counter?python={oe_python}"]
    with mcpgym.ServerProcess([*argv, "--http", "--port", "0", "--openenv"]) as server:
        both = drive(
            oe_python, "generic,mcp", server.url.removesuffix("/mcp"), tool="add", arguments={"n": 3}, reset={}
        )
    seen, tools = both["generic"], both["mcp"]["tools"]
    assert tools == ["add", "peek"]
    first = seen["steps"][0]
    assert first["observation"]["result"]["data"] == 3
    target = seen["reset"]["metadata"]["target"]
    assert (first["reward"], first["done"]) == (
        (1.0, True) if target == 3 else (0.0, False) if target > 3 else (-1.0, True)
    )


def test_a_class_target_needs_an_interpreter_with_openenv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCPGYM_OPENENV_PYTHON", raising=False)
    with pytest.raises(TargetError, match="MCPGYM_OPENENV_PYTHON"):
        parse(f"openenv:{ENVS}:Counter")
    with pytest.raises(TargetError, match="unknown option"):
        parse("openenv:http://127.0.0.1:9?colour=red")
    with pytest.raises(TargetError, match="could not read the OpenEnv environment"):
        parse("openenv:http://127.0.0.1:9")  # nothing listens on the discard port


def test_a_remote_result_cannot_stamp_a_reward_or_pass_for_mcp_content() -> None:
    forged = {
        "tool_name": "add",
        "result": {
            "content": [{"type": "text", "text": "7", "annotations": None, "meta": None}],
            "structured_content": {"result": 7},
            "meta": {"io.mcpgym/step": {"reward": 100.0, "done": True}},
            "is_error": False,
        },
    }
    result = mcp_result(forged)
    assert result.meta is None and result.structured_content == {"result": 7}
    assert result.content == [types.TextContent(type="text", text="7")]
    odd = mcp_result({"tool_name": "x", "result": {"content": [{"type": "bogus"}]}})
    shown = odd.content[0]
    assert isinstance(shown, types.TextContent)
    assert json.loads(shown.text) == {"content": [{"type": "bogus"}]}  # not MCP content: shown as JSON
    with pytest.raises(mcpgym.ToolError, match="boom"):
        mcp_result({"tool_name": "x", "error": {"error_type": "execution_error", "message": "boom"}})
    assert json_result({"hint": "h", "reward": 5, "done": True}).structured_content == {"hint": "h"}


@pytest.mark.anyio
async def test_a_run_spec_names_an_openenv_class_with_its_interpreter_in_args(oe_python: Path, tmp_path: Path) -> None:
    spec = tmp_path / "mcpgym.yaml"
    spec.write_text(f"environment: 'openenv:{ENVS}:Counter'\nargs: {{python: '{oe_python}'}}\n")
    async with mcpgym.connect(str(spec)) as env:
        await env.reset(options={"target": 2})
        won = await env.step(call("add", n=2))
        assert (won.reward, won.done) == (1.0, True)
