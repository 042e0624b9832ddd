"""`textarena:ID` targets: TextArena games as mcpgym environments, one- and two-player (rfcs/0017-bridges.md).

Layer: a bridge on the episode side: imports TextArena and the episode core, no transport.
Needs the `textarena` extra (`pip install 'mcpgym[textarena]'`).

    textarena:GuessTheNumber-v0           a single-player game, played directly
    textarena:TicTacToe-v0                two players: this episode plays seat 0 against the
                                          built-in opponent (`opponent=random`, the default: a
                                          seeded random pick among the moves the game lists)
    textarena:TicTacToe-v0?seat=1         ... or plays seat 1 (the opponent opens)
    reset(options={"match": "m1"})        joins the shared match "m1": each player is an MCP
                                          client in its own episode of one match

Every game is one tool, `move(action)`, the text the game asks for (e.g. "[4]"); its result
is this player's observation once it is this player's turn again (or the game is over). The
reward is the player's own TextArena reward, given when the match ends (`finish`).

A shared match starts when its last seat is taken (`options["player"]` picks a seat, else the
first free one). `reset` returns when it is this player's turn, so seat 1 sees seat 0's first
move; `move` applies this player's move and returns at its next turn. Turn order is so
enforced by construction: no call can act out of turn. Each player sees only its own
observations. When the game ends it ends for every player, each with its own reward; a player
whose episode closes mid-match ends it for the others (truncated, reward 0).

TextArena seeds Python's global `random`; each match keeps its own generator state and swaps it
in around every call into the game (all calls run on the event loop, one at a time), so
concurrent matches in one server cannot disturb each other's seeded trajectory.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, TypeVar

import anyio
from pydantic import Field

from mcpgym._core.extras import needs

with needs("textarena", "the TextArena bridge (textarena: targets)"):
    import textarena  # type: ignore[import-untyped]

from mcpgym._episode.environment import Environment, Reset
from mcpgym._episode.tools import tool
from mcpgym._targets.target import ParsedTarget, TargetError
from mcpgym.bridges._query import parse_query, query_text

__all__ = ["Match", "TextArenaEnvironment"]  # `target`: the scheme's hook (SCHEMES), not a public name

T = TypeVar("T")

_RESERVED = ("seat", "opponent", "join_timeout")
_MOVES = re.compile(r"\[[^\[\]]{1,20}\]")


@dataclass
class Match:
    """One TextArena game and the players in it (a shared match, or one episode's own)."""

    game: Any
    players: int
    seed: int | None
    random_state: Any
    seats: dict[int, object] = field(default_factory=dict)
    over: bool = False
    aborted: bool = False
    rewards: dict[int, float] = field(default_factory=dict)
    reason: str = ""
    changed: anyio.Event = field(default_factory=anyio.Event)

    def call(self, fn: Callable[[], T]) -> T:
        """Run `fn` (a call into the game) with this match's own global `random` state."""
        with _random_state(self):
            return fn()

    def notify(self) -> None:
        previous, self.changed = self.changed, anyio.Event()
        previous.set()

    def current(self) -> int:
        return int(self.game.state.current_player_id)

    def step(self, action: str) -> None:
        done, _ = self.call(lambda: self.game.step(action=action))
        if done:
            rewards, game_info = self.call(self.game.close)
            self.rewards = {int(k): float(v) for k, v in (rewards or {}).items()}
            self.reason = "; ".join(sorted({str(i.get("reason", "")) for i in game_info.values()} - {""}))
            self.over = True
        self.notify()

    def abort(self, reason: str) -> None:
        if not self.over:
            self.over = self.aborted = True
            self.reason = reason
            self.notify()


@contextmanager
def _random_state(match: Match) -> Iterator[None]:
    saved = random.getstate()
    random.setstate(match.random_state)
    try:
        yield
    finally:
        match.random_state = random.getstate()
        random.setstate(saved)


def new_match(game_id: str, kwargs: dict[str, Any], players: int, seed: int | None) -> Match:
    start = random.Random(seed if seed is not None else random.SystemRandom().randrange(2**63))
    match = Match(textarena.make(game_id, **kwargs), players, seed, start.getstate())
    match.call(lambda: match.game.reset(num_players=players, seed=seed))
    return match


class TextArenaEnvironment(Environment):
    """Base of the per-game classes `environment_class` builds; not served by itself."""

    game_id: ClassVar[str]
    game_kwargs: ClassVar[dict[str, Any]]
    players: ClassVar[int]
    seat: ClassVar[int] = 0
    join_timeout: ClassVar[float] = 300.0
    __mcpgym_target__: ClassVar[str]

    def __init__(self) -> None:
        self.match: Match | None = None
        self.me = 0
        self._opponent = random.Random(0)

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Reset:
        options = options or {}
        self._opponent = random.Random(seed)
        if self.players > 1 and "match" in options:
            await self._join(str(options["match"]), options.get("player"), seed)
        else:
            self.match = new_match(self.game_id, self.game_kwargs, self.players, seed)
            self.me = self.seat if self.players > 1 else 0
            self._opponents_move()
        return Reset(self._observation(), {"player": self.me, "players": self.players})

    async def _join(self, name: str, player: Any, seed: int | None) -> None:
        assert self.host is not None  # the episode core sets the host before reset
        matches: dict[str, Match] = self.host.state.setdefault(("textarena", self.__mcpgym_target__), {})
        match = matches.get(name)
        if match is None or match.over:
            match = matches[name] = new_match(self.game_id, self.game_kwargs, self.players, seed)
        free = [s for s in range(self.players) if s not in match.seats]
        seat = free[0] if player is None and free else int(player) if player is not None else -1
        if seat not in free:
            raise ValueError(f"match {name!r}: seat {player} is taken or does not exist (free: {free})")
        match.seats[seat] = self
        self.match, self.me = match, seat
        if len(match.seats) == self.players:
            del matches[name]  # full: a later reset with this name starts a new match
            match.notify()
        with anyio.fail_after(self.join_timeout):
            await self._wait(lambda: len(match.seats) == self.players)
            await self._wait(lambda: match.over or match.current() == self.me)

    async def _wait(self, ready: Callable[[], bool]) -> None:
        assert self.match is not None
        while not ready():
            await self.match.changed.wait()

    @tool
    async def move(
        self, action: Annotated[str, Field(description="your move, written as the game asks (e.g. '[4]')")]
    ) -> str:
        """Make your move in the game; returns what you see once it is your turn again, or the outcome."""
        match = self.match
        assert match is not None  # the episode core resets before any tool runs
        if not match.over:
            match.step(action)
            if match.seats:
                await self._wait(lambda: match.over or match.current() == self.me)
            else:
                self._opponents_move()
        if match.over:
            self.finish(reward=match.rewards.get(self.me, 0.0), truncated=match.aborted)
        return self._observation()

    def _opponents_move(self) -> None:
        """The built-in opponent: a seeded random pick among the moves the game last listed."""
        match = self.match
        assert match is not None
        while not match.over and match.current() != self.me:
            _, seen = match.call(match.game.get_observation)
            listed = _MOVES.findall(_text(seen).rsplit("\n", 3)[-1]) or _MOVES.findall(_text(seen)) or ["[0]"]
            match.step(self._opponent.choice(listed))

    def _observation(self) -> str:
        match = self.match
        assert match is not None
        if match.over:
            rewards = ", ".join(f"player {p}: {r:g}" for p, r in sorted(match.rewards.items()))
            return f"The game is over. {match.reason}" + (f" Rewards: {rewards}." if rewards else "")
        _, seen = match.call(match.game.get_observation)
        return _text(seen)

    async def close(self) -> None:
        match = self.match
        if match is not None and match.seats and not match.over:
            match.abort(f"player {self.me} left the match")

    def state_info(self) -> dict[str, Any]:
        return {"textarena": {"id": self.game_id, "player": self.me, "players": self.players}}


def _text(observation: Any) -> str:
    """A TextArena observation as text: the wrappers' string, or raw (sender, message, kind) triples."""
    if isinstance(observation, str):
        return observation
    return "\n".join(f"[{'GAME' if m[0] == -1 else f'Player {m[0]}'}] {m[1]}" for m in observation or [])


# --- the target form ------------------------------------------------------------------------

_CLASSES: dict[str, type[TextArenaEnvironment]] = {}


def target(rest: str, args: dict[str, Any]) -> ParsedTarget:
    """`textarena:ID[?key=value&...]`: values JSON where they parse (`max_turns=5`); `seat`,
    `opponent` (only `random`) and `join_timeout` are the bridge's, the rest go to `textarena.make`."""
    game_id, _, query = rest.partition("?")
    kwargs = {**parse_query(f"textarena:{rest}", query), **args}
    text = f"textarena:{game_id}{query_text(kwargs)}"
    cls = _CLASSES.get(text)
    if cls is None:
        try:
            cls = _CLASSES[text] = environment_class(game_id, kwargs, text)
        # LookupError: NLTK's, for a word list the game downloads when first made (or a KeyError of its own);
        # SyntaxError: a game whose module does not compile on this Python (TextArena 0.7.4's Chess on 3.11).
        except (ValueError, TypeError, ImportError, AssertionError, LookupError, SyntaxError) as exc:
            raise TargetError(f"textarena:{rest}: {_why(exc)}", forms=False) from None
    return ParsedTarget("environment", cls, spec=text)


def environment_class(game_id: str, kwargs: dict[str, Any], text: str) -> type[TextArenaEnvironment]:
    own = {key: kwargs[key] for key in _RESERVED if key in kwargs}
    game_kwargs = {key: value for key, value in kwargs.items() if key not in _RESERVED}
    if own.get("opponent", "random") != "random":
        raise ValueError(f"opponent must be 'random' (the built-in policy), not {own['opponent']!r}")
    players = _players(game_id, game_kwargs)
    seat = int(own.get("seat", 0))
    if not 0 <= seat < players:
        raise ValueError(f"seat must be 0-{players - 1} for a {players}-player game, not {seat}")
    namespace = {
        "__doc__": f"The TextArena game {game_id} ({players} player{'s' if players > 1 else ''}). "
        "Play by calling `move` with the text the game asks for.",
        "__module__": __name__,
        "__mcpgym_target__": text,
        "game_id": game_id,
        "game_kwargs": game_kwargs,
        "players": players,
        "seat": seat,
        "join_timeout": float(own.get("join_timeout", TextArenaEnvironment.join_timeout)),
    }
    name = "TextArena_" + "".join(c if c.isalnum() else "_" for c in game_id)
    return type(name, (TextArenaEnvironment,), namespace)


def _why(exc: Exception) -> str:
    said = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))  # some NLTK releases colour the resource's name
    missing = re.search(r"Resource '?(\w+)'? not found", said) if isinstance(exc, LookupError) else None
    if missing is None:
        return f"{type(exc).__name__}: {exc}"
    name = missing.group(1)
    return (
        f"the game needs NLTK's {name!r} data, which TextArena downloads when the game is first made "
        f"and could not (no network?): run `python -m nltk.downloader {name}` where the server runs, "
        "or pick a game that needs no data (docs/bridges.md lists some)"
    )


def _players(game_id: str, kwargs: dict[str, Any]) -> int:
    """How many players the game takes: the fewest of 1 and 2 its reset accepts."""
    textarena.make(game_id, **kwargs)  # a game that cannot be made says why (a missing API key, data)
    for players in (1, 2):
        try:
            new_match(game_id, kwargs, players, 0)
            return players
        except (AssertionError, ValueError):
            continue
    raise ValueError(f"{game_id} is neither a one- nor a two-player game")
