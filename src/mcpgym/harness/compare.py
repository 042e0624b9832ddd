"""`mcpgym eval --compare A B`: is B better than A, task by task?

Layer: arithmetic over two `Report`s (`harness.report`, `harness.stats`).

The comparison is paired: only tasks both reports evaluated count, and each contributes its
difference B - A (of the task's mean reward, and of its success rate, which is its pass@1).
The mean difference gets a 95% percentile bootstrap interval over those tasks, seeded; an
interval that excludes 0 is a difference, one that straddles it is not (yet: more samples or
tasks narrow it).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from mcpgym.harness import stats
from mcpgym.harness.report import Report, TaskResult


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Paired(_Frozen):
    id: str
    a: float
    b: float
    difference: float


class Difference(_Frozen):
    metric: str
    mean: float
    low: float
    high: float
    wins: int
    """Tasks where B is higher."""
    losses: int
    ties: int
    tasks: list[Paired]

    @property
    def verdict(self) -> str:
        if math.isnan(self.low):
            return "no tasks in common"
        if self.low > 0:
            return "B is better"
        if self.high < 0:
            return "A is better"
        return "no difference shown (the interval contains 0)"


class Comparison(_Frozen):
    a: str
    b: str
    common_tasks: int
    only_a: list[str]
    only_b: list[str]
    reward: Difference
    success: Difference


def compare(a: Report, b: Report, *, a_name: str = "A", b_name: str = "B", seed: int = 0) -> Comparison:
    first = {t.id: t for t in a.tasks if t.samples}
    second = {t.id: t for t in b.tasks if t.samples}
    common = [task_id for task_id in first if task_id in second]
    rng = random.Random(seed)
    return Comparison(
        a=a_name,
        b=b_name,
        common_tasks=len(common),
        only_a=[t for t in first if t not in second],
        only_b=[t for t in second if t not in first],
        reward=_difference("mean reward", common, first, second, lambda t: t.mean_reward, rng),
        success=_difference("success rate (pass@1)", common, first, second, _rate, rng),
    )


def _rate(task: TaskResult) -> float:
    return task.successes / task.samples


def _difference(
    metric: str,
    common: list[str],
    first: dict[str, TaskResult],
    second: dict[str, TaskResult],
    value: Callable[[TaskResult], float],
    rng: random.Random,
) -> Difference:
    paired = [
        Paired(id=t, a=value(first[t]), b=value(second[t]), difference=value(second[t]) - value(first[t]))
        for t in common
    ]
    diffs = [p.difference for p in paired]
    low, high = stats.bootstrap_interval(diffs, rng)
    return Difference(
        metric=metric,
        mean=stats.mean(diffs),
        low=low,
        high=high,
        wins=sum(d > 0 for d in diffs),
        losses=sum(d < 0 for d in diffs),
        ties=sum(d == 0 for d in diffs),
        tasks=paired,
    )


def markdown(comparison: Comparison) -> str:
    lines = [
        f"# Comparison: B = {comparison.b} against A = {comparison.a}",
        "",
        f"{comparison.common_tasks} tasks in common"
        + (f"; only in A: {len(comparison.only_a)}" if comparison.only_a else "")
        + (f"; only in B: {len(comparison.only_b)}" if comparison.only_b else "")
        + ".",
        "",
        "| metric | mean B - A | 95% interval | B higher / lower / tied | verdict |",
        "|---|---|---|---|---|",
    ]
    for d in (comparison.reward, comparison.success):
        interval = "-" if math.isnan(d.low) else f"[{d.low:+.3f}, {d.high:+.3f}]"
        mean = "-" if math.isnan(d.mean) else f"{d.mean:+.3f}"
        lines.append(f"| {d.metric} | {mean} | {interval} | {d.wins} / {d.losses} / {d.ties} | {d.verdict} |")
    lines += ["", "| task | A reward | B reward | B - A |", "|---|---|---|---|"]
    lines += [f"| {p.id} | {p.a:.3f} | {p.b:.3f} | {p.difference:+.3f} |" for p in comparison.reward.tasks]
    return "\n".join(lines) + "\n"
