"""Task samplers: which catalog task the next episode (or GRPO group) plays (docs/curriculum.md).

Layer: bottom (pure logic over `Task`s, stdlib randomness; no transport). The server runs one
per served environment (`mcpgym._server.curriculum`) and feeds it every finished episode.

- `Sampler` (uniform): every task equally likely (what a static dataset does).
- `Learnability`: a task is drawn with weight p(1 - p), p being the success rate the server
  observed for it: tasks the policy always or never solves give GRPO groups with zero reward
  variance (no gradient), and p(1 - p) is largest where a group's rewards vary most. The
  estimate is a decayed count (`decay` per episode of that task: a moving policy is tracked,
  old outcomes fade), and `explore` is the share of draws made uniformly, unseen tasks first,
  so every task gets measured and a task the estimate wrote off (p = 0 or 1) is re-checked.
  Before any task has a positive weight every draw explores.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mcpgym._episode.catalog import Task

SamplerKind = Literal["uniform", "learnability"]


class SamplerConfig(BaseModel):
    """How a server picks tasks: the run spec's `curriculum` section."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sampler: Annotated[SamplerKind, Field(description="uniform, or learnability (weight p(1-p))")] = "uniform"
    explore: Annotated[float, Field(ge=0.0, le=1.0, description="learnability: share of draws made uniformly")] = 0.1
    decay: Annotated[
        float, Field(gt=0.0, le=1.0, description="weight an old outcome keeps per newer episode of its task")
    ] = 0.9
    seed: Annotated[int | None, Field(description="seeds the sampler's draws (None: fresh randomness)")] = None


@dataclass
class TaskStats:
    """What the server saw of one task: raw counts and the decayed estimate the sampler uses."""

    id: str
    episodes: int = 0
    successes: int = 0
    weight: float = 0.0
    """The decayed number of episodes (each older one counts `decay` times less)."""
    weighted_successes: float = 0.0
    drawn: int = 0
    """How many times the sampler handed this task out."""

    @property
    def success_rate(self) -> float | None:
        return self.weighted_successes / self.weight if self.weight > 0 else None

    @property
    def learnability(self) -> float | None:
        p = self.success_rate
        return None if p is None else p * (1.0 - p)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "episodes": self.episodes,
            "successes": self.successes,
            "success_rate": self.success_rate,
            "learnability": self.learnability,
            "drawn": self.drawn,
        }


class Sampler:
    """Uniform sampling over `tasks`, with per-task statistics; subclasses weight the draw."""

    kind: SamplerKind = "uniform"

    def __init__(self, tasks: Sequence[Task], config: SamplerConfig | None = None) -> None:
        if not tasks:
            raise ValueError("a task sampler needs a task catalog; this environment lists no tasks")
        self.config = config if config is not None else SamplerConfig(sampler=self.kind)
        self.tasks = list(tasks)
        self.stats = {task.id: TaskStats(task.id) for task in self.tasks}
        self.rng = random.Random(self.config.seed)
        self._by_key = {task_key(t.seed, dict(t.options)): t for t in self.tasks}

    def draw(self) -> Task:
        task = self._choose()
        self.stats[task.id].drawn += 1
        return task

    def _choose(self) -> Task:
        return self.rng.choice(self.tasks)

    def observe(self, task_id: str, success: bool) -> None:
        """Count one finished episode of `task_id`."""
        stats = self.stats.get(task_id)
        if stats is None:
            return
        decay = self.config.decay
        stats.episodes += 1
        stats.successes += success
        stats.weight = stats.weight * decay + 1.0
        stats.weighted_successes = stats.weighted_successes * decay + float(success)

    def task_of(self, seed: int | None, options: dict[str, Any] | None) -> Task | None:
        """The catalog task an episode reset with (`seed`, `options`) plays, if any."""
        return self._by_key.get(task_key(seed, options or {}))

    def report(self) -> list[dict[str, Any]]:
        """Every task's statistics, in catalog order."""
        return [s.as_dict() for s in self.stats.values()]


class Learnability(Sampler):
    kind: SamplerKind = "learnability"

    def _choose(self) -> Task:
        weights = [self.stats[t.id].learnability or 0.0 for t in self.tasks]
        if self.rng.random() < self.config.explore or not any(weights):
            unseen = [t for t in self.tasks if self.stats[t.id].weight == 0]
            return self.rng.choice(unseen or self.tasks)
        return self.rng.choices(self.tasks, weights=weights)[0]


def make_sampler(tasks: Sequence[Task], config: SamplerConfig) -> Sampler:
    return (Learnability if config.sampler == "learnability" else Sampler)(tasks, config)


def task_key(seed: int | None, options: dict[str, Any]) -> str:
    """One text per (seed, options) pair, to find the task an episode was reset to."""
    return json.dumps([seed, options], sort_keys=True, default=str)
