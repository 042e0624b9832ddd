"""`check_environment` over every shipped server, and what it says about broken classes."""

from __future__ import annotations

from typing import Any

import pytest

import mcpgym
from mcpgym import servers
from mcpgym._cli.main import main
from mcpgym._episode.check import EnvironmentCheckError
from mcpgym.servers.echo import Echo
from mcpgym.testing import environments_in


def test_there_are_servers_to_check() -> None:
    assert {env.__name__ for env in environments_in(servers)} >= {"Echo", "Coding"}
    assert environments_in("mcpgym.servers.echo") == [Echo]  # re-exports (mcpgym.Environment itself) left out


@pytest.mark.parametrize("env", environments_in(servers), ids=lambda e: e.__name__)
def test_every_shipped_server_passes(env: type[mcpgym.Environment]) -> None:
    assert mcpgym.check_environment(env) == []


BRIDGED = [
    "gym:Blackjack-v1",  # the seed deals the first hand
    "gym:CartPole-v1",  # ... and draws the start state
    "textarena:GuessTheNumber-v0",
    "textarena:TicTacToe-v0?seat=1",  # the seeded built-in opponent opens
]


@pytest.mark.parametrize("target", BRIDGED)
def test_every_bridge_target_passes_mcpgym_check_on_the_command_line(
    target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bridged environment's reset is named by its seed alone, as a shipped one's is (#27):
    `check` resets two instances with one seed and compares what they show."""
    with pytest.raises(SystemExit) as exc:
        main(["check", target])
    out = capsys.readouterr().out
    assert exc.value.code == 0 and f"{target}: OK" in out, out


class NoTools(mcpgym.Environment):
    pass


class Sloppy(mcpgym.Environment):
    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        import random

        return random.random()  # global RNG: not reproducible

    @mcpgym.tool
    async def act(self, x):  # type: ignore[no-untyped-def]
        return x


class Needy(mcpgym.Environment):
    def __init__(self, required: str) -> None:
        self.required = required

    @mcpgym.tool
    async def act(self) -> None:
        """Act."""


class BadReset(mcpgym.Environment):
    async def reset(self) -> None:  # type: ignore[override]
        return None

    @mcpgym.tool
    async def act(self) -> None:
        """Act."""


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (NoTools, ["no tools"]),
        (Sloppy, ["has no description", "has no type hint", "different observations"]),
        (Needy, ["Needy() failed"]),
        (BadReset, ["must accept `seed` and `options`"]),
    ],
)
def test_problems_are_reported_in_words_an_author_can_act_on(
    env: type[mcpgym.Environment], expected: list[str]
) -> None:
    problems = mcpgym.check_environment(env, raise_on_error=False)
    for fragment in expected:
        assert any(fragment in p for p in problems), (fragment, problems)
    with pytest.raises(EnvironmentCheckError, match="problem"):
        mcpgym.check_environment(env)


def test_not_an_environment() -> None:
    assert mcpgym.check_environment(dict, raise_on_error=False) == [  # type: ignore[arg-type]
        "<class 'dict'> is not a subclass of mcpgym.Environment"
    ]


class Twins(mcpgym.Environment):
    """A catalog with one id twice."""

    @mcpgym.tool
    async def act(self) -> str:
        """Act."""
        return "ok"

    def catalog(self) -> list[mcpgym.Task]:
        return [mcpgym.Task(id="t", prompt="a"), mcpgym.Task(id="t", prompt="b")]


class Unstartable(Twins):
    """A catalog whose task names options that reset refuses."""

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> str:
        if (options or {}).get("level") == 99:
            raise ValueError("no level 99")
        return "ready"

    def catalog(self) -> list[mcpgym.Task]:
        return [mcpgym.Task(id="hard", prompt="p", options={"level": 99})]


def test_catalog_problems_are_reported() -> None:
    assert mcpgym.check_environment(Twins, raise_on_error=False) == [
        "catalog() failed: ValueError: catalog(): task ids must be unique"
    ]
    [problem] = mcpgym.check_environment(Unstartable, raise_on_error=False)
    assert problem.startswith("the catalog's first task 'hard' does not reset") and "no level 99" in problem


class Opaque:
    """Not JSON: the SDK would send its `str()`."""


class Unsendable(mcpgym.Environment):
    """A tool returning an object JSON cannot carry."""

    @mcpgym.tool
    async def peek(self) -> Any:
        """Peek."""
        return Opaque()

    @mcpgym.tool
    async def fine(self) -> dict[str, int]:
        """Fine."""
        return {"a": 1}


def test_a_result_json_cannot_carry_is_flagged_and_never_sent_as_a_repr() -> None:
    [problem] = mcpgym.check_environment(Unsendable, raise_on_error=False)
    assert problem.startswith("Tool 'peek' returned an object of type Opaque, which JSON cannot carry")


@pytest.mark.anyio
async def test_a_result_json_cannot_carry_is_a_clear_error_result() -> None:
    async with mcpgym.connect(Unsendable) as env:
        await env.reset(seed=0)
        peek = await env.call_tool("peek")
        assert peek.observation.is_error and "Opaque object at" not in str(peek.observation)
        assert "JSON cannot carry" in peek.observation.content[0].text  # type: ignore[union-attr]
        assert not (await env.call_tool("fine")).observation.is_error
