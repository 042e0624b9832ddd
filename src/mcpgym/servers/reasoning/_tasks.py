"""reasoning-gym datasets as a source of tasks with stable ids.

Layer: plain data over the `reasoning_gym` package (imported on first use: it takes seconds,
and it is an optional extra). A task id is `DATASET/SEED/INDEX`: entry INDEX of reasoning-gym's
dataset DATASET generated with SEED. reasoning-gym's procedural datasets build each entry from
(seed, index) alone, so an id names the same question on every machine; nothing is downloaded
(the generators' word lists and puzzles ship inside the package).
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from typing import Any

from mcpgym._core.extras import needs

FEATURE = "mcpgym.servers.reasoning"


class TaskIdError(ValueError):
    """A task id that does not name an entry of this server's datasets."""


@dataclass(frozen=True)
class Mix:
    """Which datasets a server draws from, how often, how many entries each, from which seed."""

    weights: tuple[tuple[str, float], ...]
    size: int = 1000
    seed: int = 0

    @classmethod
    def parse(cls, spec: str, size: int = 1000, seed: int = 0) -> Mix:
        """`"chain_sum:2,basic_arithmetic"`: names with optional weights (default 1)."""
        weights = []
        for part in filter(None, (p.strip() for p in spec.split(","))):
            name, _, weight = part.partition(":")
            value = float(weight) if weight else 1.0
            if value <= 0:
                raise ValueError(f"{name}: a weight must be positive, not {value}")
            weights.append((name.strip(), value))
        if not weights:
            raise ValueError("no dataset named")
        mix = cls(tuple(weights), size, seed)
        unknown = [name for name, _ in weights if name not in available()]
        if unknown:
            raise ValueError(
                f"unknown dataset(s) {', '.join(unknown)}; reasoning-gym has {len(available())}, e.g. chain_sum"
            )
        if size < 1:
            raise ValueError("size must be at least 1")
        return mix

    def draw(self, rng: random.Random) -> str:
        """A task id drawn by weight from the seeded RNG."""
        names = [name for name, _ in self.weights]
        name = rng.choices(names, weights=[w for _, w in self.weights])[0]
        return f"{name}/{self.seed}/{rng.randrange(self.size)}"

    def entry(self, task_id: str) -> tuple[Any, dict[str, Any]]:
        """(the dataset object, its entry) for a task id of this mix."""
        name, seed, index = _split(task_id)
        if name not in dict(self.weights) or seed != self.seed or not 0 <= index < self.size:
            raise TaskIdError(
                f"unknown task id {task_id!r}: this server serves "
                f"{', '.join(n for n, _ in self.weights)} with seed {self.seed}, indices 0-{self.size - 1}"
            )
        dataset = _dataset(name, self.size, seed)
        return dataset, dataset[index]


def score(dataset: Any, entry: dict[str, Any], answer: str) -> float:
    """reasoning-gym's own scorer for the entry: 1.0 correct, 0.0 wrong, partial credit between."""
    value = float(dataset.score_answer(answer, entry))
    return min(1.0, max(0.0, value))


@functools.cache
def available() -> frozenset[str]:
    with needs("reasoning", FEATURE):
        from reasoning_gym.factory import DATASETS  # type: ignore[import-untyped]
    return frozenset(name for name in DATASETS if name != "composite")


@functools.cache
def _dataset(name: str, size: int, seed: int) -> Any:
    with needs("reasoning", FEATURE):
        import reasoning_gym  # type: ignore[import-untyped]

    return reasoning_gym.create_dataset(name, size=size, seed=seed)


def _split(task_id: str) -> tuple[str, int, int]:
    name, _, rest = task_id.partition("/")
    seed, _, index = rest.partition("/")
    try:
        return name, int(seed), int(index)
    except ValueError:
        raise TaskIdError(f"a task id is DATASET/SEED/INDEX, e.g. chain_sum/0/3, not {task_id!r}") from None
