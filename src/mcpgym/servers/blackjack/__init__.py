"""Blackjack against a dealer: the game of OpenEnv's GRPO example, as an mcpgym environment.

Rules: `mcpgym.servers.blackjack._game` (OpenSpiel's). Every observation shows the whole visible
table: the player's cards and total, the dealer's face-up card (all of the dealer's cards once
the game is over) and, at the end, the outcome. Reward +1 / 0 / -1 arrives with the last step.
The deck is shuffled from the episode's seed, so a seed deals the same game on every door.
"""

from __future__ import annotations

import random
from typing import Any, Literal

from pydantic import BaseModel

import mcpgym
from mcpgym.servers.blackjack._game import PAYOUT, Game, total

__all__ = ["Blackjack", "Table"]

CATALOG_SIZE = 1000
"""How many seeded games the task catalog lists (any seed deals a game; these are named)."""


class Table(BaseModel):
    """What the player sees."""

    your_cards: list[str]
    your_total: int
    soft: bool
    """Your total counts an ace as 11."""
    dealer_cards: list[str]
    """The dealer's face-up card while you play; every dealer card once the game is over."""
    dealer_total: int
    status: Literal["your turn", "win", "loss", "push"]
    message: str


class Blackjack(mcpgym.Environment):
    """Play one hand of blackjack against the dealer. Get closer to 21 than the dealer without going
    over: `hit` takes a card, `stand` ends your turn and the dealer draws to 17. Aces count 11 or 1,
    face cards 10. Reward: +1 win, 0 push, -1 loss."""

    max_reward = 1.0
    max_steps = 12  # 11 hits always bust; the limit only stops a client that ignores `done`

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> dict[str, Any]:
        self.game = Game.deal(self.rng)
        table = self._table("Your turn: hit or stand?")
        return {"prompt": f"{_rules(type(self))}\n\n{_describe(table)}", **table.model_dump()}

    @mcpgym.tool(inline=True)
    def hit(self) -> Table:
        """Take one more card. Going over 21 loses at once."""
        self.game.hit()
        if self.game.outcome is None:
            return self._table("Your turn: hit or stand?")
        return self._end("Bust: you went over 21.")

    @mcpgym.tool(inline=True)
    def stand(self) -> Table:
        """Keep your hand; the dealer plays and the game is scored."""
        self.game.stand()
        return self._end(f"The dealer finished on {total(self.game.dealer)[0]}.")

    def catalog(self) -> list[mcpgym.Task]:
        """The first `CATALOG_SIZE` seeds as named games (the prompt shows only the visible table)."""
        return [self._task(seed) for seed in range(CATALOG_SIZE)]

    def _task(self, seed: int) -> mcpgym.Task:
        game = Game.deal(random.Random(seed))  # what reset(seed) deals: the same RNG, the same shuffle
        table = _describe(_table(game, "Your turn: hit or stand?"))
        return mcpgym.Task(
            id=f"blackjack/seed/{seed}",
            prompt=f"{_rules(type(self))}\n\n{table}",
            title=f"Blackjack, seed {seed}",
            seed=seed,
        )

    def state_info(self) -> dict[str, Any]:
        return {"outcome": self.game.outcome} if hasattr(self, "game") else {}

    def render(self) -> mcpgym.Render | None:
        """The table as the player sees it now (the hole card stays hidden until the game is over)."""
        if not hasattr(self, "game"):
            return None
        table = self._table(_OUTCOME.get(self.game.outcome or "", "Your turn: hit or stand?"))
        return mcpgym.Render(text=_describe(table), markdown=_markdown(table))

    def _end(self, why: str) -> Table:
        outcome = self.game.outcome
        assert outcome is not None
        self.finish(reward=PAYOUT[outcome])
        return self._table(f"{why} You {'push' if outcome == 'push' else outcome.replace('loss', 'lose')}.")

    def _table(self, message: str) -> Table:
        return _table(self.game, message)


def _table(game: Game, message: str) -> Table:
    """The table as the player sees it: the hole card stays hidden until the game is over."""
    over = game.outcome is not None
    dealer = game.dealer if over else game.dealer[:1]
    mine, soft = total(game.player)
    return Table(
        your_cards=list(game.player),
        your_total=mine,
        soft=soft,
        dealer_cards=list(dealer),
        dealer_total=total(dealer)[0],
        status=game.outcome or "your turn",
        message=message,
    )


_OUTCOME = {"win": "You win.", "loss": "You lose.", "push": "You push."}


def _markdown(table: Table) -> str:
    mine = f"**{table.your_total}**{' (soft)' if table.soft else ''}"
    dealer = f"**{table.dealer_total}**"
    return (
        f"| | cards | total |\n|---|---|---|\n"
        f"| you | {' '.join(table.your_cards)} | {mine} |\n"
        f"| dealer | {' '.join(table.dealer_cards)} | {dealer} |\n\n{table.message}"
    )


def _rules(cls: type) -> str:
    return " ".join((cls.__doc__ or "").split())


def _describe(table: Table) -> str:
    return (
        f"Your cards: {' '.join(table.your_cards)} (total {table.your_total}{', soft' if table.soft else ''}). "
        f"Dealer shows: {' '.join(table.dealer_cards)}. {table.message}"
    )
