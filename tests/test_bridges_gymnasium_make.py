"""`mcpgym.gymnasium.make(target)`: any mcpgym target as a `gymnasium.Env` (#26), checked by
Gymnasium's own environment checker, over in-process, stdio and HTTP targets."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import mcpgym
import mcpgym.gymnasium
from mcpgym import CallToolAction
from mcpgym.servers.echo import Echo
from tests.conftest import stdio

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def echo_url() -> Iterator[str]:
    server = mcpgym.ServerProcess([*_argv(stdio("mcpgym.servers.echo:Echo")), "--http", "--port", "0"])
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def _argv(params: Any) -> list[str]:
    return [params.command, *params.args]


def checked(target: mcpgym.Target) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the checker's warnings are failures too
        with mcpgym.gymnasium.make(target) as env:
            check_env(env)


@pytest.mark.parametrize("target", [Echo, "mcpgym.servers.echo", "gym:FrozenLake-v1", "mcpgym.servers.maze"])
def test_gymnasiums_checker_passes_in_process(target: mcpgym.Target) -> None:
    checked(target)


def test_gymnasiums_checker_passes_over_stdio_and_http(echo_url: str) -> None:
    checked(stdio("mcpgym.servers.echo:Echo"))
    checked(echo_url)


def test_observations_are_text_actions_are_tool_calls_and_rewards_come_through() -> None:
    with mcpgym.gymnasium.make(Echo) as env:
        assert env.tool_names == ["echo_message", "repeat"]
        assert env.action_space["tool"].n == 2  # type: ignore[index]
        observation, _ = env.reset(seed=0)
        assert isinstance(observation, str) and "orbit" in observation
        say = env.tool_names.index("echo_message")
        text, reward, terminated, truncated, info = env.step({"tool": say, "arguments": '{"message": "nope"}'})
        assert (text, reward, terminated, truncated) == ("nope", 0.0, False, False)
        assert info["tool"] == "echo_message" and info["is_error"] is False
        assert info["result"]["content"] == [{"type": "text", "text": "nope"}]
        # The other spellings of an action: a name with a dict, and mcpgym's own CallToolAction.
        assert env.step({"tool": "repeat", "arguments": {"message": "ab", "times": 2}})[0] == "ab ab"
        last = env.step(CallToolAction(tool_name="echo_message", arguments={"message": "orbit"}))
        assert last[1:4] == (1.0, True, False)


@pytest.mark.parametrize(
    ("action", "says"),
    [
        ({"tool": 0, "arguments": "not json"}, "not JSON"),
        ({"tool": 0, "arguments": "[1, 2]"}, "JSON object"),
        ({"tool": 7, "arguments": "{}"}, "out of range"),
        ("echo_message", "an action is"),
    ],
)
def test_a_malformed_action_is_an_error_observation_with_no_reward(action: Any, says: str) -> None:
    with mcpgym.gymnasium.make(Echo) as env:
        env.reset(seed=0)
        text, reward, terminated, truncated, info = env.step(action)
        assert says in text and reward == 0.0 and not (terminated or truncated) and info["is_error"]


def test_an_unknown_tool_or_bad_arguments_is_an_error_the_server_sees() -> None:
    with mcpgym.gymnasium.make(Echo) as env:
        env.reset(seed=0)
        unknown = env.step({"tool": "no_such_tool", "arguments": {}})
        assert "no_such_tool" in unknown[0] and unknown[1] == 0.0 and unknown[4]["is_error"]
        bad = env.step({"tool": "repeat", "arguments": {"message": "a", "times": "x"}})
        assert bad[4]["is_error"] and bad[1] == 0.0


def test_a_gym_target_round_trips_to_gymnasiums_own_episode() -> None:
    reference = gymnasium.make("FrozenLake-v1")
    with mcpgym.gymnasium.make("gym:FrozenLake-v1") as env:
        observation, _ = env.reset(seed=4)
        expected, _ = reference.reset(seed=4)
        assert json.loads(observation)["observation"] == expected
        for action in [1, 2, 2, 1, 0, 3, 1, 2]:
            text, reward, terminated, truncated, _ = env.step({"tool": 0, "arguments": json.dumps({"action": action})})
            want = reference.step(action)
            assert json.loads(text.split("\n", 1)[0])["observation"] == want[0]
            assert (reward, terminated, truncated) == (want[1], want[2], want[3])
            if terminated or truncated:
                break


def test_unseeded_resets_after_a_seeded_one_are_reproducible() -> None:
    with mcpgym.gymnasium.make("gym:FrozenLake-v1?is_slippery=true&map_name=8x8") as env:
        env.reset(seed=9)
        first = [env.step({"tool": 0, "arguments": '{"action": 2}'})[0] for _ in range(3)]
        again = env.reset()[0]
        env.reset(seed=9)
        assert [env.step({"tool": 0, "arguments": '{"action": 2}'})[0] for _ in range(3)] == first
        assert env.reset()[0] == again


def test_gymnasium_make_builds_it_by_id_and_close_is_idempotent() -> None:
    env = gymnasium.make("mcpgym/MCP-v0", target="gym:Taxi-v4")
    try:
        observation, _ = env.reset(seed=1)
        assert json.loads(observation)["observation"] == gymnasium.make("Taxi-v4").reset(seed=1)[0]
    finally:
        env.close()
        env.close()


def test_without_gymnasium_the_error_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['gymnasium'] = None\n"
        "import mcpgym.gymnasium\n"  # importing the module costs nothing ...
        "try:\n    mcpgym.gymnasium.make\nexcept ImportError as exc:\n    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert "pip install 'mcpgym[gymnasium]'" in done.stdout, done.stderr


def test_the_example_loop_runs() -> None:
    sys.path.insert(0, str(REPO / "examples"))
    try:
        gymnasium_loop: Any = importlib.import_module("gymnasium_loop")
    finally:
        sys.path.remove(str(REPO / "examples"))
    assert gymnasium_loop.main(["--episodes", "2"]) == [1.0, 1.0]
    assert len(gymnasium_loop.main(["--episodes", "1", "--target", "gym:FrozenLake-v1"])) == 1
