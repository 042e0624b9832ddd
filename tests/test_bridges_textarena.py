"""`textarena:ID` targets (#26): a single-player game played directly (GuessTheNumber), a
two-player one against the built-in opponent and as one match shared by two MCP clients over
HTTP (TicTacToe). Both games need no downloaded data (no nltk word lists)."""

from __future__ import annotations

import random
import re
from typing import Any

import anyio
import pytest
import textarena  # type: ignore[import-untyped]

import mcpgym
from mcpgym._targets.target import TargetError, parse_text
from mcpgym.bridges.textarena import TextArenaEnvironment
from mcpgym.testing import assert_doors_agree, serve_gym

pytestmark = pytest.mark.anyio

GUESS = "textarena:GuessTheNumber-v0"
TICTACTOE = "textarena:TicTacToe-v0"


def environment(text: str) -> type[TextArenaEnvironment]:
    cls: type[TextArenaEnvironment] = parse_text(text).value
    assert issubclass(cls, TextArenaEnvironment)
    return cls


def textarena_episode(game_id: str, seed: int, actions: list[str]) -> list[Any]:
    """TextArena's own single-player episode: each observation, then the rewards."""
    state = random.getstate()
    try:
        game = textarena.make(game_id)
        game.reset(num_players=1, seed=seed)
        rows: list[Any] = [game.get_observation()[1]]
        for action in actions:
            done, _ = game.step(action=action)
            if done:
                rows.append(game.close()[0][0])
                return rows
            rows.append(game.get_observation()[1])
        return rows
    finally:
        random.setstate(state)


async def test_a_single_player_game_replays_textarenas_own_episode() -> None:
    actions = ["[10]", "[5]", "[15]", "[3]", "[12]", "[7]", "[18]", "[1]", "[2]", "[4]", "[6]", "[8]"]
    expected = textarena_episode("GuessTheNumber-v0", 3, actions)
    async with mcpgym.connect(GUESS) as env:
        first = await env.reset(seed=3)
        rows: list[Any] = [first.observation]
        for action in actions:
            step = await env.call_tool("move", {"action": action})
            if step.done:
                assert step.terminated
                rows.append(step.reward)
                break
            rows.append(step.text)
    assert rows == expected and len(rows) > 3


async def test_interleaved_episodes_in_one_process_keep_their_own_seeded_games() -> None:
    """TextArena seeds the global `random`: each match keeps its own state, so interleaving
    episodes (as a server does) changes nothing."""
    actions = ["[10]", "[5]", "[15]", "[3]"]
    expected = textarena_episode("GuessTheNumber-v0", 8, actions)
    async with mcpgym.connect(GUESS) as a, mcpgym.connect(GUESS) as b:
        seen = {"a": [(await a.reset(seed=8)).observation], "b": [(await b.reset(seed=8)).observation]}
        for action in actions:
            random.random()  # someone else using the global generator in between
            seen["a"].append((await a.call_tool("move", {"action": action})).text)
            seen["b"].append((await b.call_tool("move", {"action": action})).text)
    assert seen["a"] == seen["b"] == expected[: len(actions) + 1]


async def test_against_the_built_in_opponent_each_seat_plays_and_the_outcome_is_the_reward() -> None:
    for seat, text in ((0, TICTACTOE), (1, f"{TICTACTOE}?seat=1")):
        async with mcpgym.connect(text) as env:
            first = await env.reset(seed=2)
            assert first.info == {"player": seat, "players": 2} and f"You are Player {seat}" in first.observation
            if seat == 1:
                assert "[Player 0]" in first.observation  # the opponent opened before the first reset returned
            step = None
            for cell in range(9):
                step = await env.call_tool("move", {"action": f"[{cell}]"})
                if step.done:
                    break
            assert step is not None and step.done and step.terminated
            assert step.reward in (-1.0, 0.0, 1.0) and "The game is over" in step.text


async def test_the_built_in_opponent_is_seeded() -> None:
    async def play(seed: int) -> list[str]:
        async with mcpgym.connect(TICTACTOE) as env:
            await env.reset(seed=seed)
            return [(await env.call_tool("move", {"action": f"[{cell}]"})).text for cell in (4, 0, 8)]

    assert await play(5) == await play(5)


@pytest.mark.parametrize("text", [GUESS, TICTACTOE])
async def test_every_door_gives_the_same_game(text: str) -> None:
    script = [("move", {"action": a}) for a in ("[4]", "not a move", "[0]", "[8]", "[2]", "[6]", "[10]")]
    await assert_doors_agree(environment(text), script, seed=1)


@pytest.mark.parametrize("text", [GUESS, TICTACTOE, f"{TICTACTOE}?seat=1"])
def test_every_textarena_environment_passes_mcpgym_check(text: str) -> None:
    assert mcpgym.check_environment(environment(text), raise_on_error=False) == []


OFFLINE = ["Nim", "ConnectFour", "Mastermind", "TowerOfHanoi", "Minesweeper", "Sudoku", "Crosswords", "KuhnPoker"]
"""Games docs/bridges.md lists as loading without downloaded data or an API key."""


@pytest.mark.parametrize("game", OFFLINE)
def test_the_games_the_docs_list_as_needing_no_data_load_and_pass_mcpgym_check(game: str) -> None:
    assert mcpgym.check_environment(environment(f"textarena:{game}-v0"), raise_on_error=False) == []


async def test_two_mcp_clients_play_one_shared_match_over_http() -> None:
    """Each player is an MCP client in its own episode; turns alternate by construction."""
    cls = environment(TICTACTOE)
    # Player 0 takes the top row and wins on its third move; player 1 plays the middle row.
    plans = {0: ["[0]", "[1]", "[2]"], 1: ["[3]", "[4]", "[5]"]}
    seen: dict[int, list[str]] = {0: [], 1: []}
    last: dict[int, Any] = {}
    async with serve_gym(cls) as (_, url):

        async def player(seat: int) -> None:
            async with mcpgym.connect(url) as env:
                first = await env.reset(seed=0, options={"match": "final", "player": seat})
                assert first.info["player"] == seat
                seen[seat].append(first.observation)
                for action in plans[seat]:
                    step = await env.call_tool("move", {"action": action})
                    seen[seat].append(step.text)
                    last[seat] = step
                    if step.done:
                        break

        async with anyio.create_task_group() as group:
            group.start_soon(player, 1)  # the second seat joins first: the match waits for both
            group.start_soon(player, 0)
    assert "[Player 0] [0]" in seen[1][0]  # seat 1's reset returned after seat 0's first move
    assert all("You are Player 0" in s for s in seen[0][:1]) and "You are Player 1" in seen[1][0]
    assert not any("You are Player 1" in s for s in seen[0])  # each sees only its own observations
    assert (last[0].done, last[0].reward) == (True, 1.0)
    assert (last[1].done, last[1].reward, last[1].terminated) == (True, -1.0, True)  # it ends for both
    assert "Player 0 has won" in seen[1][-1]


async def test_a_player_leaving_ends_the_match_for_the_other() -> None:
    cls = environment(TICTACTOE)
    async with serve_gym(cls) as (_, url), mcpgym.connect(url) as zero, mcpgym.connect(url) as one:
        async with anyio.create_task_group() as group:

            async def seat_one() -> None:
                await one.reset(seed=0, options={"match": "m", "player": 1})
                await one.close_episode()  # leaves after seat 0's first move

            group.start_soon(seat_one)
            await zero.reset(seed=0, options={"match": "m", "player": 0})
            step = await zero.call_tool("move", {"action": "[4]"})
        assert (step.done, step.truncated, step.reward) == (True, True, 0.0)
        assert "left the match" in step.text


async def test_a_taken_or_missing_seat_is_refused() -> None:
    async with mcpgym.connect(TICTACTOE) as env:
        with pytest.raises(mcpgym.MCPError, match="seat 5"):
            await env.reset(seed=0, options={"match": "x", "player": 5})


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("textarena:NoSuchGame-v0", "NoSuchGame"),
        (f"{TICTACTOE}?seat=2", "seat must be 0-1"),
        (f"{TICTACTOE}?opponent=llm", "opponent must be 'random'"),
    ],
)
def test_a_bad_textarena_target_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(TargetError, match=says):
        parse_text(text)


def test_a_game_that_cannot_be_made_says_why_not_that_it_has_no_seats(monkeypatch: pytest.MonkeyPatch) -> None:
    """TextArena's own reason (a missing API key) comes through; NLTK data it could not download
    is named with the command that fetches it; a KeyError of the game's own is not called data."""
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    with pytest.raises(TargetError, match="OPENROUTER_API_KEY"):
        parse_text("textarena:TwentyQuestions-v0")
    nltk_says = "\n  Resource \x1b[93mwords\x1b[0m not found.\n  Please use the NLTK Downloader"
    for raised, says in [
        (LookupError("\n  Resource 'words' not found.\n  Please use the NLTK Downloader"), "nltk.downloader words"),
        (LookupError(nltk_says), "the game needs NLTK"),
        (KeyError("board"), "KeyError: 'board'"),
        (SyntaxError("f-string: unmatched '['"), "SyntaxError: f-string"),
    ]:

        def make(game_id: str, raised: Exception = raised, **kwargs: Any) -> Any:
            raise raised

        monkeypatch.setattr(textarena, "make", make)
        with pytest.raises(TargetError, match=re.escape(says)):
            parse_text(f"textarena:Broken{len(says)}-v0")
