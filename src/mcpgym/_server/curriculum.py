"""The server's curriculum: which task a reset plays, and what the server saw of each task.

Layer: transport helper, used by `gym_server` only (the sampling itself is `_episode.sampler`).
The wire contract is `mcpgym._core.tasks`.

The sampler is built from the environment's task catalog the first time it is needed: a reset
that asks for a drawn task, any reset once the sampler is `learnability` (it must see every
episode to learn from), or any reset once the catalog has been read (a listing). Every episode
that took at least one step and is attributed to a task counts, when it closes, as a success
or not by the rule `mcpgym eval` uses: the rubric's `success` component when it reports one,
else total reward >= the environment's `max_reward` (1.0 when it declares none).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

import anyio

from mcpgym._core.errors import INVALID_PARAMS, INVALID_REQUEST, MCPError
from mcpgym._core.protocol import EXTENSION_ID
from mcpgym._core.tasks import CURRICULUM_KEY, MAX_GROUP_SIZE, TASK_INFO_KEY, TaskStatsResult
from mcpgym._core.types import EpisodeState
from mcpgym._episode.catalog import Task
from mcpgym._episode.episode import Episode
from mcpgym._episode.sampler import Sampler, SamplerConfig, make_sampler
from mcpgym._server.catalog import CatalogHandlers

_GROUPS_KEPT = 65_536
"""Groups remembered at most (the oldest is forgotten first: a trainer that never finishes one)."""


class Curriculum:
    def __init__(self, catalog: CatalogHandlers, config: SamplerConfig, max_reward: float | None) -> None:
        self.config = config
        self._catalog = catalog
        self._threshold = 1.0 if max_reward is None else max_reward
        self._sampler: Sampler | None = None
        self._empty = False
        self._lock = anyio.Lock()
        self._groups: OrderedDict[str, list[Any]] = OrderedDict()  # group -> [task, resets left]

    async def sampler(self) -> Sampler | None:
        """The sampler over the catalog (None: the environment lists no tasks)."""
        async with self._lock:
            if self._sampler is None and not self._empty:
                tasks = (await self._catalog.catalog()).tasks
                self._empty = not tasks
                if tasks:
                    self._sampler = make_sampler(tasks, self.config)
            return self._sampler

    async def resolve(
        self, seed: int | None, options: dict[str, Any] | None
    ) -> tuple[int | None, dict[str, Any] | None, Task | None]:
        """The (seed, options) a reset really plays, and the catalog task it is, if known."""
        request = (options or {}).get(CURRICULUM_KEY)
        if request is not None:
            task = await self._draw(request)
            return task.seed, dict(task.options), task
        # A uniform sampler learns nothing from plain resets, so it does not build an instance to read
        # the catalog for them; once the catalog is read anyway (a client listed the tasks, as the
        # harness and `mcpgym eval` do), a reset to a task's own seed and options is named too.
        lazy = self.config.sampler == "uniform" and not self._catalog.loaded
        sampler = self._sampler if lazy else await self.sampler()
        return seed, options, sampler.task_of(seed, options) if sampler is not None else None

    async def _draw(self, request: object) -> Task:
        group, size = _group_request(request)
        sampler = await self.sampler()
        if sampler is None:
            raise MCPError(INVALID_PARAMS, f"{CURRICULUM_KEY}: this environment has no task catalog to draw from")
        held = self._groups.get(group)
        if held is None:
            held = self._groups[group] = [sampler.draw(), size]
            while len(self._groups) > _GROUPS_KEPT:
                self._groups.popitem(last=False)
        held[1] -= 1
        if held[1] <= 0:
            del self._groups[group]
        task: Task = held[0]
        return task

    def observe(self, episode: Episode) -> None:
        """Count a closed episode towards its task (called by the registry for every close)."""
        if self._sampler is None or episode.task_id is None or episode.step_count == 0:
            return  # nothing played (a probe reset), or not a catalog task
        state = episode.final
        unscored = (
            state is not None
            and "success" not in state.components
            and state.total_reward is not None
            and math.isnan(state.total_reward)
        )
        if state is not None and not unscored:  # unknown is not a failure (mcpgym eval leaves it out too)
            self._sampler.observe(episode.task_id, self.succeeded(state))

    def succeeded(self, state: EpisodeState) -> bool:
        success = state.components.get("success")
        if success is not None:
            return success > 0
        return state.total_reward is not None and state.total_reward >= self._threshold

    async def stats(self, capabilities: Any) -> TaskStatsResult:
        if not _operator(capabilities):
            raise MCPError(
                INVALID_REQUEST,
                "Task statistics are for operators: clients that advertise the mcpgym extension "
                f"({EXTENSION_ID}), such as mcpgym.task_stats",
            )
        sampler = await self.sampler()
        return TaskStatsResult(sampler=self.config.model_dump(), tasks=sampler.report() if sampler is not None else [])


def task_info(task: Task) -> dict[str, Any]:
    return {"id": task.id, "seed": task.seed, "options": dict(task.options)}


def _group_request(request: object) -> tuple[str, int]:
    if not isinstance(request, dict):
        raise MCPError(INVALID_PARAMS, f'{CURRICULUM_KEY} must be an object: {{"group": "...", "size": N}}')
    group, size = request.get("group"), request.get("size", 1)
    if not isinstance(group, str) or not 0 < len(group) <= 256:
        raise MCPError(INVALID_PARAMS, f"{CURRICULUM_KEY}.group must be a string of 1-256 characters")
    if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= MAX_GROUP_SIZE:
        raise MCPError(INVALID_PARAMS, f"{CURRICULUM_KEY}.size must be a whole number from 1 to {MAX_GROUP_SIZE}")
    return group, size


def _operator(capabilities: Any) -> bool:
    extensions = getattr(capabilities, "extensions", None)
    return isinstance(extensions, dict) and EXTENSION_ID in extensions


__all__ = ["TASK_INFO_KEY", "Curriculum", "task_info"]
