"""mcpgym.servers.blackjack: its rules, the same deal on every door, and the rollout-loop example."""

from __future__ import annotations

import importlib
import random
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

import mcpgym
from mcpgym import CallToolAction
from mcpgym.servers.blackjack import Blackjack
from mcpgym.servers.blackjack._game import Game, total
from mcpgym.testing import transcripts as _transcripts

pytestmark = pytest.mark.anyio
REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "rollout_loop_blackjack.py"


def test_hand_totals_count_aces_soft_then_hard() -> None:
    assert total(["A♠", "6♥"]) == (17, True)
    assert total(["A♠", "6♥", "9♦"]) == (16, False)
    assert total(["A♠", "A♥", "K♦"]) == (12, False)
    assert total(["A♠", "K♥"]) == (21, True)
    assert total(["Q♠", "J♥", "2♦"]) == (22, False)


def _rigged(player: list[str], dealer: list[str], then: list[str]) -> Game:
    """A game whose next cards are `then`, in order (the deck is drawn from its end)."""
    return Game(deck=list(reversed(then)), player=player, dealer=dealer)


def test_dealer_stands_on_soft_17_and_draws_below_17() -> None:
    soft17 = _rigged(["10♠", "8♥"], ["A♦", "6♣"], ["5♠"])
    soft17.stand()
    assert soft17.dealer == ["A♦", "6♣"] and soft17.outcome == "win"  # 18 beats a dealer standing on soft 17
    draws = _rigged(["10♠", "7♥"], ["10♦", "6♣"], ["A♠", "K♠"])
    draws.stand()
    assert draws.dealer == ["10♦", "6♣", "A♠"] and draws.outcome == "push"  # 16 draws; 17 stands
    busts = _rigged(["10♠", "2♥"], ["10♦", "6♣"], ["9♠"])
    busts.stand()
    assert busts.outcome == "win"


def test_player_bust_loses_before_the_dealer_plays() -> None:
    game = _rigged(["10♠", "6♥"], ["10♦", "6♣"], ["K♠", "5♦"])
    game.hit()
    assert game.outcome == "loss" and game.dealer == ["10♦", "6♣"]


async def test_an_episode_pays_plus_one_zero_minus_one_and_hides_the_hole_card() -> None:
    seen: dict[float, int] = {}
    async with mcpgym.connect(Blackjack) as env:
        for seed in range(60):
            first = await env.reset(seed=seed)
            assert len(first.observation["dealer_cards"]) == 1 and first.observation["status"] == "your turn"
            assert first.observation["your_cards"][0] in first.observation["prompt"]
            result = await env.step(CallToolAction(tool_name="stand"))
            table = result.observation.structured_content
            assert result.done and table is not None and len(table["dealer_cards"]) >= 2
            assert result.reward == {"win": 1.0, "push": 0.0, "loss": -1.0}[table["status"]]
            seen[result.reward] = seen.get(result.reward, 0) + 1
            after = await env.step(CallToolAction(tool_name="hit"))  # an illegal move: the hand is over
            assert after.is_error and "over" in after.text and after.reward == 0.0
    assert set(seen) == {1.0, 0.0, -1.0}, seen  # the premise: 60 seeds produce every outcome


async def test_the_same_seed_deals_the_same_game_and_other_seeds_do_not() -> None:
    async def deal(seed: int) -> Any:
        async with mcpgym.connect(Blackjack) as env:
            return (await env.reset(seed=seed)).observation

    assert await deal(7) == await deal(7)
    assert len({str(await deal(seed)) for seed in range(10)}) == 10


BLACKJACK_SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("hit", {"unexpected": 1}),  # extra arguments are ignored, as the SDK does
    ("hit", {}),
    ("double", {}),  # not a tool here: a protocol error
    ("stand", {}),
    ("hit", {}),  # after the end
]


async def test_every_door_deals_the_same_game() -> None:
    results = await _transcripts(Blackjack, BLACKJACK_SCRIPT)
    reference = results["inprocess"]
    assert [row[0] for row in reference].count("step") == 5  # the premise: the calls were made (an invented tool too)
    for kind, transcript in results.items():
        assert transcript == reference, f"{kind} differs from in-process"


async def test_rollout_loop_example_basic_strategy_beats_random() -> None:
    sys.path.insert(0, str(EXAMPLE.parent))
    try:
        example = importlib.import_module("rollout_loop_blackjack")
    finally:
        sys.path.remove(str(EXAMPLE.parent))
    means = await example.main(["--games", "400", "--concurrency", "8"])
    # Over 400 seeded games random play loses about 0.39 a hand and basic strategy about 0.1.
    assert means["basic"] - means["random"] >= 0.2, means
    assert means["basic"] > -0.2 and means["random"] < -0.25, means
    # The policies themselves: basic strategy stands on hard 17 and hits 11 whatever the dealer shows.
    rng = random.Random(0)
    assert example.basic_strategy({"your_total": 17, "soft": False, "dealer_cards": ["A♠"]}, rng) == "stand"
    assert example.basic_strategy({"your_total": 11, "soft": False, "dealer_cards": ["6♠"]}, rng) == "hit"


async def test_rollout_loop_example_runs_over_stdio() -> None:
    command = f"{sys.executable} -m mcpgym.servers.blackjack"
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [sys.executable, str(EXAMPLE), "--games", "20", "--concurrency", "2", "--target", command], cwd=REPO
        )
    out = done.stdout.decode()
    assert "random: mean return" in out and "basic: mean return" in out and "over 20 games" in out
