"""Small environments the tests drive; importable as `tests.envs:NAME` by the stdio door."""

from __future__ import annotations

from collections import Counter as Tally
from typing import Any, Literal, cast

import anyio

import mcpgym
from mcpgym import rubrics

CLOSED: Tally[str] = Tally()
"""How many times close() ran per episode label (in-process, in-memory and HTTP doors)."""

_CLOSE_EVENTS: dict[str, anyio.Event] = {}


def closed_event(label: str) -> anyio.Event:
    """An event set when an episode with this label closes (tests wait on it, never sleep)."""
    return _CLOSE_EVENTS.setdefault(label, anyio.Event())


class Counter(mcpgym.Environment):
    """Adds numbers; rewards each addition by n/10; `stop` ends the episode with a bonus."""

    max_steps = 7

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> dict[str, Any]:
        self.total = self.rng.randint(0, 100)
        self.label = str((options or {}).get("label", ""))
        if (options or {}).get("refuse"):
            raise ValueError("this reset is refused")
        return {"start": self.total, "label": self.label}

    @mcpgym.tool(inline=True)
    def add(self, n: int) -> int:
        """Add n to the running total and return it."""
        self.total += n
        self.reward(n / 10)
        return self.total

    @mcpgym.tool
    def slow_add(self, n: int) -> int:
        """Like add, but runs in a worker thread (a plain blocking tool)."""
        self.total += n
        return self.total

    @mcpgym.tool
    async def stop(self, bonus: float = 1.0) -> str:
        """End the episode with a final bonus reward."""
        self.finish(reward=bonus)
        return f"stopped at {self.total}"

    @mcpgym.tool
    async def fail(self, kind: Literal["tool", "crash", "unserialisable"]) -> int:
        """Fail on purpose, in one of three ways."""
        if kind == "tool":
            raise mcpgym.ToolError("the tool refused")
        if kind == "crash":
            raise ValueError("boom")
        bad: Any = {"not": object()}  # breaks the declared `-> int` output schema
        return cast(int, bad)

    async def close(self) -> None:
        CLOSED[self.label] += 1
        if (event := _CLOSE_EVENTS.pop(self.label, None)) is not None:
            event.set()


class Mortal(mcpgym.Environment):
    """Tells its process id (so a test can kill the server) and can hang until timed out."""

    call_timeout = 0.5

    @mcpgym.tool
    async def pid(self) -> int:
        """The server's process id."""
        import os

        return os.getpid()

    @mcpgym.tool
    async def hang(self) -> str:
        """Never returns on its own (the call timeout ends it)."""
        await anyio.Event().wait()
        return "unreachable"

    @mcpgym.tool
    def hang_in_thread(self) -> str:
        """Blocks a worker thread until the call timeout abandons it."""
        import threading

        threading.Event().wait(2.0)
        return "late"


class Sleepy(mcpgym.Environment):
    """A step that awaits a short sleep: what load tests hold thousands of at once."""

    @mcpgym.tool
    async def wait(self, ms: int = 5) -> int:
        """Sleep `ms` milliseconds, then return the step's own number."""
        await anyio.sleep(ms / 1000)
        self.calls = getattr(self, "calls", 0) + 1
        self.reward(1.0)
        return self.calls


GRADED_RUBRIC = rubrics.Rubric(
    {
        "correct": rubrics.progress("found"),
        "brevity": rubrics.step_rubric(lambda step: -0.01 * len(str(step.arguments.get("text", "")))),
        "well_formed": rubrics.step_rubric(lambda step: 0.0 if step.is_error else 1.0),
        "own": rubrics.env_reward(),
        "solved": rubrics.final("found"),
    },
    weights={"brevity": 0.5, "solved": 2.0},
    gates=["well_formed"],
)


class Graded(mcpgym.Environment):
    """Find the hidden word; a rubric scores progress, brevity, format and the final result."""

    max_steps = 8
    rubric = GRADED_RUBRIC

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> str:
        self.target = "orbit"
        return f"find a {len(self.target)}-letter word"

    @mcpgym.tool
    async def guess(self, text: str) -> str:
        """Guess; says how much of the word the guess holds."""
        found = sum(1 for a, b in zip(text, self.target, strict=False) if a == b) / len(self.target)
        self.signal("found", found)
        self.reward(0.25)
        if text == self.target:
            self.finish()
        return f"{found:.0%}"

    @mcpgym.tool
    async def broken(self) -> str:
        """Always fails."""
        raise mcpgym.ToolError("broken on purpose")


class Briefed(mcpgym.Environment):
    """Returns `info` with its first observation, and truncates after two calls."""

    max_steps = 2

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> mcpgym.Reset:
        return mcpgym.Reset({"prompt": "call noop"}, info={"task_id": "t-1", "seed": seed})

    @mcpgym.tool
    async def noop(self) -> str:
        """Do nothing."""
        return "ok"


class Catalogued(Graded):
    """`Graded` with a task catalog of three tasks (what the door contract reads back)."""

    def catalog(self) -> list[mcpgym.Task]:
        return [mcpgym.Task(id=f"word-{i}", prompt=f"Find word {i}.", seed=i, options={"n": i}) for i in range(3)]
