"""The one target grammar (`mcpgym._targets.target`): every form, through every entry point that takes one
(`connect`, `connect_sync`, the CLI, the harness, TRL, the pool), and the reported failures."""

from __future__ import annotations

import functools
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters

import mcpgym
from mcpgym import harness
from mcpgym._targets.target import FILE_FORMATS, TargetError, parse, parse_text
from mcpgym.harness import config as harness_config
from mcpgym.pool import Pool
from mcpgym.servers.echo import Echo
from tests.conftest import serve_gym
from tests.envs import Counter

pytestmark = pytest.mark.anyio

ENV_FILE = """\
import mcpgym
from helper import WORD  # a sibling module: importable while the file loads


class FileEnv(mcpgym.Environment):
    async def reset(self, seed=None, options=None):
        return WORD

    @mcpgym.tool
    async def say(self, text: str) -> str:
        '''Say a word.'''
        self.finish(reward=float(text == WORD))
        return text
"""


@pytest.fixture
def env_dir(tmp_path: Path) -> Path:
    """A directory holding `myenv.py` (one Environment subclass) and the module it imports."""
    (tmp_path / "helper.py").write_text("WORD = 'kiwi'\n")
    (tmp_path / "myenv.py").write_text(ENV_FILE)
    return tmp_path


async def _play(target: Any) -> tuple[Any, float]:
    async with mcpgym.connect(target) as env:
        first = await env.reset(seed=0)
        tools = [t.name for t in await env.list_tools()]
        word = first.observation if isinstance(first.observation, str) else first.observation.get("target")
        name = "say" if "say" in tools else "echo_message"
        result = await env.call_tool(name, {"text" if name == "say" else "message": word})
        return first.observation, result.reward


@pytest.mark.parametrize(
    ("target", "form"),
    [
        (Echo, "environment"),
        (functools.partial(Echo), "environment"),
        (Echo(), "environment"),
        ("mcpgym.servers.echo:Echo", "environment"),
        ("mcpgym.servers.echo", "environment"),
        ("http://127.0.0.1:1/mcp", "url"),
        ("python -m mcpgym.servers.echo", "command"),
        (["python", "-m", "mcpgym.servers.echo"], "command"),
        (mcpgym.GymServer(Echo), "server"),
        (StdioServerParameters(command="x"), "server"),
        (Pool(urls=["http://127.0.0.1:1/mcp"]), "connectable"),
    ],
)
def test_every_form_is_recognised(target: Any, form: str) -> None:
    assert parse(target).form == form


async def test_the_reported_connect_failure_a_module_runs_in_process() -> None:
    # d184b8c treated "mcpgym.servers.coding" as a shell command; it is the module's one Environment.
    env = mcpgym.connect("mcpgym.servers.echo")
    assert type(env.door).__name__ == "InProcessDoor"
    assert await _play("mcpgym.servers.echo") == (
        {"prompt": "Say the word 'orbit' using echo_message.", "target": "orbit"},
        1.0,
    )
    with mcpgym.connect_sync("mcpgym.servers.echo") as sync_env:
        assert sync_env.reset(seed=0).observation["target"] == "orbit"


async def test_a_file_with_or_without_its_class_runs_in_process(env_dir: Path) -> None:
    before = list(sys.path)
    assert await _play(str(env_dir / "myenv.py")) == ("kiwi", 1.0)
    assert await _play(f"{env_dir / 'myenv.py'}:FileEnv") == ("kiwi", 1.0)
    assert sys.path == before  # the file's directory was on the path only while it loaded
    with pytest.raises(TargetError, match="has no attribute 'Nope'"):
        parse(f"{env_dir / 'myenv.py'}:Nope")
    with pytest.raises(TargetError, match="does not exist"):
        parse(str(env_dir / "missing.py"))


def test_connect_leaves_sys_path_alone(env_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(env_dir)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(env_dir))])
    before = list(sys.path)
    # The working directory is not on sys.path: the module is not found, and the error says why.
    with pytest.raises(TargetError, match=r"working directory, which is not on sys\.path"):
        mcpgym.connect("myenv")
    assert sys.path == before


def test_a_name_that_is_a_module_and_a_command_is_ambiguous(env_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = env_dir / "bin"
    bin_dir.mkdir()
    (bin_dir / "myenv").write_text("#!/bin/sh\n")
    (bin_dir / "myenv").chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.syspath_prepend(str(env_dir))
    with pytest.raises(TargetError, match="ambiguous") as caught:
        parse("myenv")
    assert "path/to/file.py[:Class]" in str(caught.value) and "http(s)://" in str(caught.value)  # lists the forms
    assert parse("myenv:FileEnv").form == "environment"  # the unambiguous spellings still work
    assert parse(str(bin_dir / "myenv")).form == "command"


@pytest.mark.parametrize("text", ["no_such_module_xyz", "!!", "::", " "])
def test_text_that_fits_no_form_lists_the_forms(text: str) -> None:
    with pytest.raises(TargetError) as caught:
        parse_text(text)
    assert "A target is one of:" in str(caught.value)


def test_a_module_with_several_environments_names_them() -> None:
    with pytest.raises(TargetError, match=r"tests\.envs has \d+ Environment subclasses .*Counter.*tests\.envs:CLASS"):
        parse("tests.envs")


def test_file_forms_dispatch_on_the_suffix(env_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Where a future form (a `.yaml` run spec) plugs in: one loader per suffix.
    seen: list[tuple[Path, str | None]] = []

    def load(path: Path, name: str | None) -> Any:
        seen.append((path, name))
        return parse(Counter)

    monkeypatch.setitem(FILE_FORMATS, ".yaml", load)
    (env_dir / "run.yaml").write_text("env: tests.envs:Counter\n")
    assert parse(str(env_dir / "run.yaml")).value is Counter
    assert seen == [((env_dir / "run.yaml").resolve(), None)]


def _mcpgym(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    pythonpath = os.pathsep.join(p for p in sys.path if p and "site-packages" not in p)
    env = {**os.environ, "PYTHONPATH": pythonpath}
    return subprocess.run(
        [sys.executable, "-m", "mcpgym", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_reported_cli_failure_check_takes_a_module(env_dir: Path) -> None:
    # d184b8c: `mcpgym: cannot load myenv: module 'myenv' has no attribute ''`.
    out = _mcpgym("check", "myenv", cwd=env_dir)
    assert out.returncode == 0, out.stderr
    assert "myenv: OK" in out.stdout
    out = _mcpgym("check", "myenv.py", cwd=env_dir)
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr
    out = _mcpgym("tools", "myenv", cwd=env_dir)
    assert out.returncode == 0 and out.stdout.startswith("say(text: string)"), out.stderr


def test_the_reported_harness_failure_a_file_gets_a_config_that_launches(
    env_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # d184b8c printed {"command": "path/to/env.py", "args": []}: a client could not start it.
    monkeypatch.chdir(env_dir)
    (entry,) = harness_config.block("x", harness_config.server_entry("claude-code", "myenv.py"))["mcpServers"].values()
    assert entry["args"][:3] == ["-m", "mcpgym", "serve"] and entry["args"][3].endswith("myenv.py:FileEnv")
    assert harness_config.default_name(str(env_dir / "myenv.py")) == "myenv"
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"] or None, cwd="/")
    with mcpgym.connect_sync(params) as env:  # launched as the client would, from another directory
        assert env.reset().observation == "kiwi"


def test_the_harness_and_trl_and_the_pool_share_the_parser(env_dir: Path) -> None:
    file_target = str(env_dir / "myenv.py")
    from mcpgym.harness import target as harness_target

    assert harness_target.resolve(file_target) is parse(file_target).value
    from mcpgym._targets.target import load_environment

    assert load_environment(f"{file_target}:FileEnv").__name__ == "FileEnv"
    assert load_environment("mcpgym.servers.echo") is Echo  # what RayPool's actors load
    with pytest.raises(TargetError, match="is a url"):
        load_environment("http://127.0.0.1:1/mcp")


async def test_a_rollout_takes_a_file(env_dir: Path) -> None:
    from mcpgym.harness.types import AssistantTurn, ChatTool, Message

    async def say_kiwi(messages: list[Message], tools: list[ChatTool]) -> AssistantTurn:
        return AssistantTurn(content=None, tool_calls=[harness.policy.tool_call("1", "say", {"text": "kiwi"})])

    (trajectory,) = await harness.rollout(str(env_dir / "myenv.py"), say_kiwi, episodes=1)
    assert trajectory.reward == 1.0, trajectory


async def test_every_door_serves_the_module_form(env_dir: Path) -> None:
    async with serve_gym(mcpgym.load_environment("mcpgym.servers.echo")) as (_, url):
        assert (await _play(url))[1] == 1.0
    assert (await _play("python -m mcpgym serve mcpgym.servers.echo"))[1] == 1.0


def test_a_module_with_several_environments_names_its_default() -> None:
    from mcpgym._targets.target import parse
    from mcpgym.servers.coding import Coding, GradedCoding

    assert GradedCoding.__module__.startswith("mcpgym.servers.coding")  # the premise: two classes there
    assert parse("mcpgym.servers.coding").value is Coding  # mcpgym.servers.coding.__mcpgym_environment__
