"""Run specs (mcpgym.yaml): accepted by connect, serve, mcpgym.trl and rollout; every mistake is a
one-line error naming the file, line and field; the checked-in JSON Schema is current."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from mcp import StdioServerParameters

import mcpgym
import mcpgym.trl
from mcpgym import CallToolAction, harness
from mcpgym._cli.main import _parser
from mcpgym._targets.spec import json_schema, rollout_defaults, serve_defaults
from mcpgym.servers.echo import Echo
from mcpgym.testing import serve_gym

REPO = Path(__file__).resolve().parent.parent


class Greeter(mcpgym.Environment):
    """Greets with the word it was built with, so a test sees whether `args` arrived."""

    def __init__(self, greeting: str = "hello", times: int = 1) -> None:
        self.greeting, self.times = greeting, times

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> str:
        return f"{self.greeting} x{self.times}"

    @mcpgym.tool
    async def greet(self, name: str) -> str:
        """Greet `name`; greeting with the built-in word earns 1.0."""
        self.finish(reward=1.0)
        return f"{self.greeting}, {name}"


FULL = """\
environment: tests.test_spec:Greeter
args:
  greeting: bonjour
  times: 2
tasks:
  count: 3
  seed: 10
  options: [{a: 1}, {a: 2}]
reward:
  hide: true
limits:
  max_episodes: 5
  idle_timeout: 30
  call_timeout: 7.5
serve:
  http: true
  port: 0
  allowed_hosts: [env.internal]
  record: runs/x
"""


def _write(tmp_path: Path, text: str, name: str = "mcpgym.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_full_spec_loads_typed(tmp_path: Path) -> None:
    spec = mcpgym.load_spec(_write(tmp_path, FULL))
    assert spec.args == {"greeting": "bonjour", "times": 2}
    assert (spec.tasks.count, spec.tasks.seed, spec.tasks.options) == (3, 10, [{"a": 1}, {"a": 2}])
    assert (spec.reward.hide, spec.limits.max_episodes, spec.limits.call_timeout) == (True, 5, 7.5)
    assert (spec.serve.http, spec.serve.port, spec.serve.allowed_hosts) == (True, 0, ["env.internal"])
    minimal = mcpgym.load_spec(_write(tmp_path, "environment: mcpgym.servers.echo:Echo\n", "m.yml"))
    assert minimal.serve.host == "127.0.0.1" and minimal.limits.idle_timeout == 900.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "environment: a:B\nlimits:\n  idle_timout: 5\n",
            "x.yaml:3: limits.idle_timout: unknown field (did you mean 'idle_timeout'?)",
        ),
        ("environment: a:B\nserve:\n  port: eighty\n", "x.yaml:3: serve.port: Input should be a valid integer"),
        (
            "environment: a:B\nserve:\n  port: 70000\n",
            "x.yaml:3: serve.port: Input should be less than or equal to 65535",
        ),
        ("environment: a:B\ntasks:\n  options: [{a: 1}, 7]\n", "x.yaml:3: tasks.options"),
        ("environment: a:B\nenvironmnt: c:D\n", "x.yaml:2: environmnt: unknown field (did you mean 'environment'?)"),
        ("serve: {http: true}\n", "x.yaml:1: environment: required field is missing"),
        ("environment: a:B\nreward: {hide: true}\nreward: {hide: false}\n", "x.yaml:3: reward: given twice"),
        ("environment: a:B\nserve: {http: true\n", "x.yaml:3: not valid YAML: expected ',' or '}'"),
        (
            "environment: http://h/mcp\nargs: {x: 1}\n",
            "x.yaml:2: args: constructor arguments need an environment class",
        ),
        ("- environment: a:B\n", "x.yaml:1: (top level): Input should be a valid dictionary"),
        ("# nothing\n", "x.yaml: the run spec is empty"),
    ],
)
def test_mistakes_name_file_line_and_field(tmp_path: Path, text: str, expected: str) -> None:
    path = _write(tmp_path, text, "x.yaml")
    with pytest.raises(mcpgym.SpecError) as exc:
        mcpgym.load_spec(path)
    assert expected.replace("x.yaml", str(path)) in str(exc.value)


def test_every_mistake_is_reported_at_once_in_line_order(tmp_path: Path) -> None:
    path = _write(tmp_path, "environment: a:B\nserve:\n  port: x\nlimits:\n  max_episodes: 0\n  nope: 1\n")
    with pytest.raises(mcpgym.SpecError) as exc:
        mcpgym.load_spec(path)
    lines = str(exc.value).splitlines()
    assert [line.split(":")[1] for line in lines] == ["3", "5", "6"], lines


def test_the_cli_says_what_is_wrong_without_a_traceback(tmp_path: Path) -> None:
    path = _write(tmp_path, "environment: mcpgym.servers.echo:Echo\nlimits: {idle_timout: 5}\n")
    for argv in (
        ["serve", str(path)],
        ["tools", str(path)],
        ["rollout", str(path), "--model", "m", "--base-url", "http://x"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "mcpgym", *argv], cwd=REPO, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 1, argv
        assert done.stderr == f"mcpgym: {path}:2: limits.idle_timout: unknown field (did you mean 'idle_timeout'?)\n"


def test_serve_takes_its_settings_from_the_spec_and_flags_still_win(tmp_path: Path) -> None:
    path = str(_write(tmp_path, FULL))
    spec = mcpgym.load_spec(path)
    args = _parser({"serve": serve_defaults(spec)}).parse_args(["serve", path, "--idle-timeout", "9"])
    assert (args.http, args.port, args.allowed_host, args.record) == (True, 0, ["env.internal"], "runs/x")
    assert (args.hide_rewards, args.max_episodes, args.call_timeout, args.idle_timeout) == (True, 5, 7.5, 9.0)
    args = _parser({"rollout": rollout_defaults(spec)}).parse_args(["rollout", path, "--model", "m", "--base-url", "u"])
    assert (args.episodes, args.seed, json.loads(args.options)) == (3, 10, [{"a": 1}, {"a": 2}])


def _pythonpath() -> dict[str, str] | None:
    """The SDK gives a stdio child only a few variables; it must import this code too."""
    return {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else None


@pytest.mark.anyio
async def test_mcpgym_serve_spec_builds_the_environment_with_its_args(tmp_path: Path) -> None:
    path = _write(tmp_path, "environment: tests.test_spec:Greeter\nargs: {greeting: hola}\nreward: {hide: true}\n")
    command = StdioServerParameters(
        command=sys.executable, args=["-m", "mcpgym", "serve", str(path)], env=_pythonpath()
    )
    async with mcpgym.connect(command) as env:  # stdio, served from the spec
        first = await env.reset(seed=0)
        result = await env.step(CallToolAction(tool_name="greet", arguments={"name": "Ann"}))
    assert first.observation == "hola x1"
    assert result.observation.content[0].text == "hola, Ann"  # type: ignore[union-attr]
    assert mcpgym.STEP_KEY not in (result.observation.meta or {})  # reward.hide reached the server


@pytest.mark.anyio
async def test_connect_opens_what_the_spec_names(tmp_path: Path) -> None:
    async with mcpgym.connect(str(_write(tmp_path, FULL))) as env:
        assert (await env.reset(seed=0)).observation == "bonjour x2"
    async with serve_gym(Echo) as (_, url):
        spec = _write(tmp_path, f"environment: {url}\nserve: {{token_env: NO_SUCH_VARIABLE_SET}}\n", "remote.yml")
        async with mcpgym.connect(str(spec)) as env:
            assert (await env.reset(seed=0)).observation["target"] == "orbit"


def test_trl_environment_class_takes_a_spec(tmp_path: Path) -> None:
    Env = mcpgym.trl.environment_class(str(_write(tmp_path, FULL)))
    env = Env()
    try:
        assert env.reset() == "bonjour x2"
        assert env.greet(name="Bo") == "bonjour, Bo"  # type: ignore[attr-defined]
        assert env.get_reward() == 1.0
    finally:
        env._close()


@pytest.mark.anyio
async def test_rollout_plays_the_spec(tmp_path: Path) -> None:
    async def policy(messages: list[harness.Message], tools: list[harness.ChatTool]) -> harness.AssistantTurn:
        return harness.AssistantTurn(content="done")

    path = str(_write(tmp_path, FULL))
    trajectories = await harness.rollout(path, policy, episodes=2, progress=False)
    assert [t.failed for t in trajectories] == [False, False]
    assert "bonjour x2" in json.dumps(trajectories[0].messages)


def test_harness_config_launches_mcpgym_serve_on_the_spec(tmp_path: Path) -> None:
    from mcpgym.harness.config import server_entry

    path = _write(tmp_path, FULL)
    entry = server_entry("claude-code", str(path))
    assert entry["args"] == ["-m", "mcpgym", "serve", str(path.resolve())]


def test_the_checked_in_json_schema_is_current_and_validates_specs() -> None:
    checked_in = (REPO / "docs" / "mcpgym.schema.json").read_text()
    regenerate = (
        "python -c 'from mcpgym._targets.spec import json_schema; print(json_schema(), end=\"\")'"
        " > docs/mcpgym.schema.json"
    )
    assert checked_in == json_schema(), f"docs/mcpgym.schema.json is stale; regenerate: {regenerate}"
    validator = jsonschema.Draft202012Validator(json.loads(checked_in))
    assert list(validator.iter_errors(yaml.safe_load(FULL))) == []
    assert [e.message for e in validator.iter_errors({"environment": "a:B", "limits": {"idle_timout": 1}})] == [
        "Additional properties are not allowed ('idle_timout' was unexpected)"
    ]
