"""The curriculum's wire vocabulary: drawing a task from the server's sampler, and reading
its per-task statistics (rfcs/0020-catalog-evaluation-curriculum.md, docs/curriculum.md).

Layer: protocol vocabulary only, beside `protocol.py` (imported by the server and by clients).

- A reset whose options hold `CURRICULUM_KEY: {"group": G, "size": N}` plays the task the
  server's sampler draws: the first reset naming group G draws it, the next N-1 resets naming
  G get the same task and seed (one GRPO group, one start state), then G is forgotten. Every
  other option is ignored for such a reset.
- A reset the server attributes to a catalog task (drawn, or reset to the task's own seed and
  options) answers `info[TASK_INFO_KEY] = {"id", "seed", "options"}`.
- `mcpgym/tasks/stats` (an extension request method, not a tool) answers the sampler's
  configuration and per-task statistics, to clients that advertise the mcpgym extension
  (operators: trainers, dashboards); a plain agent gets an error, so the policy being trained
  cannot read which tasks it is failing.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import mcp_types as types
from pydantic import Field

CURRICULUM_KEY: Final = "io.mcpgym/curriculum"
TASK_INFO_KEY: Final = "io.mcpgym/task"
TASK_STATS_METHOD: Final = "mcpgym/tasks/stats"
MAX_GROUP_SIZE: Final = 4096


class TaskStatsParams(types.RequestParams):
    """No parameters: the statistics of every task."""


class TaskStatsResult(types.Result):
    sampler: dict[str, Any] = Field(default_factory=dict)
    """The sampler's configuration (`sampler`, `explore`, `decay`, `seed`)."""
    tasks: list[dict[str, Any]] = Field(default_factory=list)
    """Per task: `id`, `episodes`, `successes`, `success_rate`, `learnability`, `drawn`."""


class TaskStatsRequest(types.Request[TaskStatsParams, Literal["mcpgym/tasks/stats"]]):
    method: Literal["mcpgym/tasks/stats"] = "mcpgym/tasks/stats"
    params: TaskStatsParams
