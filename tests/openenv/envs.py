# mypy: disable-error-code="misc,untyped-decorator"
"""OpenEnv environments written against `openenv`'s own base classes, for the `openenv:` target tests.

Imported only in tests/openenv/.venv (the real openenv 0.10), by mcpgym's launcher. `Counter` is
MCP-based (tools on a FastMCP server, as OpenEnv's echo is); `Guess` is action-typed (its own
Action and Observation models, as OpenEnv's coding and game environments are).
"""

from __future__ import annotations

import random
from typing import Any

from fastmcp import FastMCP
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.types import Action, Observation, State


class Counter(MCPEnvironment):
    """Add to a counter; reaching the target earns 1.0 and ends the episode."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        mcp = FastMCP("counter")
        self.total = 0
        self.target = 3

        @mcp.tool
        def add(n: int) -> int:
            """Add n to the counter and return the total."""
            self.total += n
            return self.total

        @mcp.tool
        def peek() -> dict[str, int]:
            """The total and the target."""
            return {"total": self.total, "target": self.target}

        super().__init__(mcp)
        self._state = State(step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Observation:
        self.total = 0
        self.target = int(kwargs.get("target", random.Random(seed).randint(2, 9)))
        self._state = State(episode_id=episode_id, step_count=0)
        return Observation(metadata={"message": f"reach {self.target}", "target": self.target})

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        return self._scored(super().step(action, timeout_s=timeout_s, **kwargs))

    async def step_async(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        return self._scored(await super().step_async(action, timeout_s=timeout_s, **kwargs))

    def _scored(self, observation: Observation) -> Observation:
        self._state.step_count += 1
        if self.total == self.target:
            observation.reward, observation.done = 1.0, True
        elif self.total > self.target:
            observation.reward, observation.done = -1.0, True
        return observation

    def _step_impl(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        return Observation(metadata={"error": f"unknown action {type(action).__name__}"})

    @property
    def state(self) -> State:
        return self._state


class GuessAction(Action):
    """Guess the secret number (1-10)."""

    guess: int


class GuessObservation(Observation):
    hint: str


class Guess(Environment[GuessAction, GuessObservation, State]):
    """Guess a number from 1 to 10; each hint says higher or lower."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self.secret = 5
        self._state = State(step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> GuessObservation:
        self.secret = random.Random(seed).randint(1, 10)
        self._state = State(episode_id=episode_id, step_count=0)
        return GuessObservation(hint="guess a number from 1 to 10")

    def step(self, action: GuessAction, timeout_s: float | None = None, **kwargs: Any) -> GuessObservation:
        self._state.step_count += 1
        if action.guess == self.secret:
            return GuessObservation(hint="right", reward=1.0, done=True)
        hint = "higher" if action.guess < self.secret else "lower"
        return GuessObservation(hint=hint, reward=0.0, done=self._state.step_count >= 6)

    @property
    def state(self) -> State:
        return self._state
