"""A rubric for the filesystem tasks: the task's own checks gate the reward, and a solution that
takes fewer tool calls earns a little more (so a policy learns not to wander).

    mcpgym wrap --tasks examples/wrap_filesystem/tasks.jsonl --rubric examples.wrap_filesystem.rubric:tidy \\
        -- node_modules/.bin/mcp-server-filesystem {workspace}
"""

from __future__ import annotations

from mcpgym.wrapping import Check, Score, WrapContext
from mcpgym.wrapping import verify as task_checks

FREE_CALLS = 4
"""Calls a task may take before the efficiency component starts to fall."""


def tidy(ctx: WrapContext) -> Score:
    checks = task_checks(ctx.task, ctx.workspace)
    if not checks.solved:
        return Score(0.0, checks.checks)  # the gate: nothing for an unsolved task, however tidy
    extra = max(0, len(ctx.calls) - FREE_CALLS)
    efficiency = 1.0 / (1.0 + 0.25 * extra)
    checks_and_efficiency = [*checks.checks, Check("efficiency", extra == 0, f"{extra} extra calls")]
    return Score(0.8 + 0.2 * efficiency, checks_and_efficiency, done=True)
