"""Reasoning: procedurally generated, verifiable reasoning tasks from reasoning-gym.

An episode is one task: the first observation is its question; `answer(text)` submits the
final answer once, reasoning-gym's own scorer grades it (reward 1.0 correct, else 0.0, or its
partial credit with `partial_credit=True`) and the episode ends. `get_task` shows the question
again (for agents that never reset). Needs `pip install 'mcpgym[reasoning]'`.
"""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from pydantic import Field

import mcpgym
from mcpgym.servers.reasoning._tasks import Mix, TaskIdError, score

__all__ = ["Mix", "Reasoning", "TaskIdError"]

DEFAULT_MIX = Mix((("chain_sum", 1.0), ("basic_arithmetic", 1.0), ("leg_counting", 1.0)), size=1000, seed=0)
MAX_ANSWER = 20_000


class Reasoning(mcpgym.Environment):
    """Solve one reasoning task. The first observation (and `get_task`) gives the question; think it
    through, then call `answer` once with only the final answer, in the format the question asks
    for. Reward 1.0 if it is right; the episode ends on the answer."""

    max_reward = 1.0
    max_steps = 8

    def __init__(self, mix: Mix = DEFAULT_MIX, partial_credit: bool = False, catalog_size: int = 100) -> None:
        self.mix = mix
        self.partial_credit = partial_credit
        self.catalog_size = catalog_size
        self.task_id: str | None = None

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> dict[str, str]:
        """Options: `task_id` (`DATASET/SEED/INDEX`) picks the task; otherwise one is drawn by weight."""
        task_id = str((options or {}).get("task_id") or self.mix.draw(self.rng))
        # A worker thread: some generators take tens of milliseconds (sudoku), which would
        # stall every other episode on the loop.
        self._dataset, self._entry = await anyio.to_thread.run_sync(self.mix.entry, task_id)
        self.task_id = task_id
        return self._brief()

    def _brief(self) -> dict[str, str]:
        assert self.task_id is not None
        return {"task_id": self.task_id, "question": self._entry["question"]}

    @mcpgym.tool(inline=True)
    def get_task(self) -> dict[str, str]:
        """Show this episode's task id and question."""
        return self._brief()

    @mcpgym.tool  # a worker thread: some scorers run sympy
    def answer(self, text: Annotated[str, Field(max_length=MAX_ANSWER)]) -> str:
        """Submit your final answer (only the answer, in the format the question asks for). It is
        graded at once and the episode ends."""
        value = score(self._dataset, self._entry, text)
        reward = value if self.partial_credit else float(value >= 1.0)
        self.finish(reward=reward)
        return "Correct." if value >= 1.0 else "Not correct." if value == 0 else f"Partly correct ({value:.2f})."

    def state_info(self) -> dict[str, Any]:
        return {"task_id": self.task_id}

    def catalog(self) -> list[mcpgym.Task]:
        """The first `catalog_size` entries of each dataset (questions only, never answers)."""
        tasks = []
        for name, _ in self.mix.weights:
            for index in range(min(self.catalog_size, self.mix.size)):
                task_id = f"{name}/{self.mix.seed}/{index}"
                _, entry = self.mix.entry(task_id)
                tasks.append(
                    mcpgym.Task(id=task_id, prompt=entry["question"], title=task_id, options={"task_id": task_id})
                )
        return tasks
