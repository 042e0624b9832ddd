"""One episode's rubric state: signals seen so far, the steps a trajectory rubric will read,
the running sum of each component, and the end-of-episode score (computed once).

Layer: beside the episode core (the core drives it; it imports only `mcpgym.rubrics`). The
rubric itself is stateless and shared by every episode: everything that changes lives here.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import anyio
import mcp_types as types

from mcpgym.rubrics._core import Rubric, Step, Transcript

logger = logging.getLogger("mcpgym")

FINISH_TIMEOUT = 300.0
"""Seconds an episode's trajectory components may take when it is closed without finishing."""


class EpisodeScore:
    """Scores one episode's steps with `rubric`, and the episode once when it ends."""

    __slots__ = ("_latest", "_steps", "components", "finished", "rubric", "task", "total")

    def __init__(self, rubric: Rubric, task: Any) -> None:
        self.rubric = rubric
        self.task = task
        self.total = 0.0
        self.components: dict[str, float | None] = {}
        """The episode's running sum of each component (None: a component that could not score)."""
        self.finished = False
        self._latest: dict[str, Any] = {}
        self._steps: list[Step] | None = [] if rubric.has_trajectory else None

    def step(
        self,
        tool: str,
        arguments: dict[str, Any],
        result: types.CallToolResult,
        reward: float,
        signals: dict[str, Any] | None,
        number: int,
        terminated: bool,
        truncated: bool,
    ) -> tuple[float, dict[str, float | None]]:
        """This step's reward and components; a rubric that raises leaves the step unscored
        (reward NaN, components None)."""
        fresh = signals or _EMPTY
        step = _new_step(Step, (tool, arguments, result, reward, fresh, self._latest, number, terminated, truncated))
        try:
            total, scored = self.rubric.score_step(step)
            values: dict[str, float | None] = scored  # type: ignore[assignment]
        except Exception:
            logger.exception("the rubric failed on step %d (%s): the step is unscored", number, tool)
            total, values = math.nan, {n: None for n, _, _ in self.rubric.step_parts}
        if fresh:
            self._latest = {**self._latest, **fresh}  # a new dict: earlier steps keep their `before`
        if self._steps is not None:
            self._steps.append(step)
        self.total += total
        sums = self.components
        if total == total:  # scored (not NaN)
            for name, value in values.items():
                before = sums.get(name, 0.0)
                sums[name] = None if before is None or value is None else before + value
        else:  # an unscored step leaves each sum unscored for good
            for name in values:
                sums[name] = None
        return total, values

    async def finish(
        self, environment: str, seed: int | None, terminated: bool, truncated: bool
    ) -> tuple[float, dict[str, float | None]]:
        """Score the trajectory components (once): the reward they add to the final step and
        their values. A trajectory gate that fails caps the episode's return at 0 (the added
        reward is minus the return so far when that is positive). NaN when a component could
        not score."""
        if self.finished or self._steps is None:
            self.finished = True
            return 0.0, {}
        self.finished = True
        transcript = Transcript(environment, self.task, self._steps, terminated, truncated, seed)
        try:
            added, passed, values = await self.rubric.score_trajectory(transcript)
        except Exception:
            logger.exception("a trajectory rubric failed: the episode is unscored")
            added, passed, values = math.nan, True, {n: None for n, _, _ in self.rubric.trajectory_parts}
        if not passed and self.total + added > 0:
            added = -self.total
        self.total += added
        self.components.update(values)
        return added, values

    async def finish_on_close(self, environment: str, seed: int | None, truncated: bool) -> None:
        """An episode closed before it finished: score it, bounded in time (then unscored)."""
        with anyio.move_on_after(FINISH_TIMEOUT):
            await self.finish(environment, seed, False, truncated)
            return
        self.total = math.nan
        for name, _, _ in self.rubric.trajectory_parts:
            self.components[name] = None


_EMPTY: Mapping[str, Any] = MappingProxyType({})  # shared by every step without signals: read-only
_new_step = tuple.__new__  # Step's fields in order, without NamedTuple's Python-level __new__
