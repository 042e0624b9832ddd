"""Blackjack rules and card arithmetic, free of any framework (the environment drives them).

Layer: plain game logic. The rules are OpenSpiel's `blackjack` (the game OpenEnv's GRPO
example plays), written out so nobody has to guess:

- One standard 52-card deck, shuffled afresh for every game from the episode's seeded RNG;
  cards are dealt from it without replacement.
- The player and the dealer get two cards each; one dealer card is face up, one face down.
- Number cards count their value, J/Q/K count 10, an ace counts 11 unless that would take the
  hand over 21, then 1 (a hand counting an ace as 11 is "soft").
- The player may `hit` (take a card) or `stand`. Going over 21 is a bust: the player loses at
  once and the dealer does not play.
- When the player stands, the dealer reveals the hole card and draws until the hand totals 17
  or more (the dealer stands on soft 17).
- Win +1, push 0, loss -1. A two-card 21 has no bonus (it pays +1 like any win, or pushes
  against a dealer 21), and there is no doubling, splitting, insurance or surrender.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal

RANKS = ("A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K")
SUITS = ("♠", "♥", "♦", "♣")
DEALER_STANDS_AT = 17

Outcome = Literal["win", "loss", "push"]
PAYOUT: dict[Outcome, float] = {"win": 1.0, "push": 0.0, "loss": -1.0}


def card_value(card: str) -> int:
    """A card's value with aces counted as 1 (`total` decides whether one counts 11)."""
    rank = card[:-1]
    if rank == "A":
        return 1
    return 10 if rank in ("J", "Q", "K") else int(rank)


def total(cards: list[str]) -> tuple[int, bool]:
    """The best total of a hand and whether it is soft (an ace counted as 11)."""
    hard = sum(card_value(c) for c in cards)
    if any(c[:-1] == "A" for c in cards) and hard + 10 <= 21:
        return hard + 10, True
    return hard, False


@dataclass
class Game:
    """One game: deal with `Game.deal(rng)`, then `hit()` / `stand()` until `outcome` is set."""

    deck: list[str]
    player: list[str] = field(default_factory=list)
    dealer: list[str] = field(default_factory=list)
    outcome: Outcome | None = None

    @classmethod
    def deal(cls, rng: random.Random) -> Game:
        deck = [rank + suit for suit in SUITS for rank in RANKS]
        rng.shuffle(deck)
        game = cls(deck)
        # Dealt as at a table: player, dealer (up), player, dealer (hole).
        game.player.append(game.draw())
        game.dealer.append(game.draw())
        game.player.append(game.draw())
        game.dealer.append(game.draw())
        return game

    def draw(self) -> str:
        return self.deck.pop()

    def hit(self) -> None:
        self.player.append(self.draw())
        if total(self.player)[0] > 21:
            self.outcome = "loss"

    def stand(self) -> None:
        while total(self.dealer)[0] < DEALER_STANDS_AT:
            self.dealer.append(self.draw())
        mine, theirs = total(self.player)[0], total(self.dealer)[0]
        if theirs > 21 or mine > theirs:
            self.outcome = "win"
        elif mine == theirs:
            self.outcome = "push"
        else:
            self.outcome = "loss"
