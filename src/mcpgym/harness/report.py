"""An evaluation report: what `mcpgym eval` writes as `report.json` and `report.md`.

Layer: plain data and arithmetic over trajectories (`harness.stats`); no I/O but the writers.

A report is built from the trajectories of `samples` episodes of each task. Definitions
(docs/evaluation.md):

- **Success** of an episode is decided by one `SuccessRule`: the environment's `success`
  reward component (> 0) when its rubric reports one, else reward >= threshold, the threshold
  being `--threshold` if given, else the environment's declared `max_reward`, else 1.0.
- An episode that **failed** (the endpoint or the environment raised, a timeout) is not a
  sample of the policy: it is left out of pass@k and the reward mean and counted under
  `failures` by kind. An unscored episode (reward NaN, a judge failed) is likewise left out.
- **pass@k** for k = 1..samples: per task the unbiased estimator over its n scored samples
  (tasks with n < k are left out for that k), averaged over tasks, with a bootstrap interval
  over tasks.
- **Mean reward**: the mean over tasks of each task's mean reward (every task weighs the same
  whatever its number of scored samples), with a 95% percentile bootstrap interval over tasks
  from a `random.Random(seed)`.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mcpgym.harness import stats
from mcpgym.harness.types import Trajectory

SUCCESS_COMPONENT = "success"
"""A rubric component of this name is the environment's own success signal (> 0: success)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SuccessRule(_Frozen):
    kind: Literal["threshold", "component"]
    threshold: float | None = None
    source: str
    """Where the rule came from: "--threshold", "environment max_reward", "success component", "default"."""

    def describe(self) -> str:
        if self.kind == "component":
            return f"the environment's `{SUCCESS_COMPONENT}` component > 0 ({self.source})"
        return f"reward >= {self.threshold:g} ({self.source})"

    def succeeded(self, trajectory: Trajectory) -> bool:
        if self.kind == "component":
            value = trajectory.components.get(SUCCESS_COMPONENT)
            return value is not None and value > 0
        assert self.threshold is not None
        return not math.isnan(trajectory.reward) and trajectory.reward >= self.threshold


class Estimate(_Frozen):
    value: float
    low: float
    high: float


class PassAtK(_Frozen):
    k: int
    value: float
    low: float
    high: float
    tasks: int
    """Tasks with at least k scored samples (the others are left out of this k)."""


class TaskResult(_Frozen):
    id: str
    seed: int | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    samples: int
    """Scored samples (failed and unscored episodes left out)."""
    successes: int
    failed: int = 0
    mean_reward: float
    rewards: list[float]
    pass_at_k: list[float]


class Failures(_Frozen):
    episodes: int = 0
    by_kind: dict[str, int] = Field(default_factory=dict)
    """Failed episodes by exception type (`TimeoutError`, `EndpointError`, ...)."""
    unscored: int = 0
    stops: dict[str, int] = Field(default_factory=dict)
    """Every episode by how it ended: done, truncated, max_turns, no_tool_calls, error."""
    tool_errors: int = 0
    """Tool results the environment marked as errors."""
    refused_calls: int = 0
    """Calls the harness answered itself: unknown tool, malformed arguments, after the end."""


class Usage(_Frozen):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    mean_per_episode: float = 0.0


class Timing(_Frozen):
    wall_seconds: float
    mean_episode_seconds: float


class RunConfig(_Frozen):
    """Exactly what was run: enough to run it again."""

    target: str
    model: str
    base_url: str
    sampling: dict[str, Any] = Field(default_factory=dict)
    """What every request carried besides the conversation (temperature, top_p, max_tokens, ...)."""
    seed: int
    """Seeds the environment seeds of catalog-less targets and the bootstrap."""
    samples: int
    tasks: list[str]
    max_turns: int
    system_prompt: str | None = None
    concurrency: int = 1
    mcpgym_version: str = ""
    started: float = 0.0


class Report(_Frozen):
    version: int = 1
    run: RunConfig
    success: SuccessRule
    pass_at_k: list[PassAtK]
    reward: Estimate
    components: dict[str, float] = Field(default_factory=dict)
    tasks: list[TaskResult]
    failures: Failures
    usage: Usage
    timing: Timing


def build(
    run: RunConfig,
    rule: SuccessRule,
    tasks: Sequence[tuple[str, int | None, dict[str, Any]]],
    played: Sequence[Trajectory],
    wall_seconds: float,
) -> Report:
    """The report of `played`, episode i having played `tasks[i // run.samples]`."""
    rng = random.Random(run.seed)
    by_task: list[list[Trajectory]] = [[] for _ in tasks]
    for trajectory in played:
        by_task[trajectory.index // run.samples].append(trajectory)
    results = [_task(task, group, rule, run.samples) for task, group in zip(tasks, by_task, strict=True)]
    scored = [r for r in results if r.samples]
    return Report(
        run=run,
        success=rule,
        pass_at_k=[_pass_at(k, scored, rng) for k in range(1, run.samples + 1)],
        reward=_estimate([r.mean_reward for r in scored], rng),
        components=_components(played),
        tasks=results,
        failures=_failures(played),
        usage=_usage(played),
        timing=Timing(
            wall_seconds=wall_seconds, mean_episode_seconds=stats.mean([t.duration for t in played]) if played else 0.0
        ),
    )


def _scored(trajectory: Trajectory) -> bool:
    return not trajectory.failed and not math.isnan(trajectory.reward)


def _task(
    task: tuple[str, int | None, dict[str, Any]], group: list[Trajectory], rule: SuccessRule, samples: int
) -> TaskResult:
    task_id, seed, options = task
    ok = sorted((t for t in group if _scored(t)), key=lambda t: t.index)
    n, c = len(ok), sum(rule.succeeded(t) for t in ok)
    return TaskResult(
        id=task_id,
        seed=seed,
        options=options,
        samples=n,
        successes=c,
        failed=sum(t.failed for t in group),
        mean_reward=stats.mean([t.reward for t in ok]),
        rewards=[t.reward for t in ok],
        pass_at_k=[stats.pass_at_k(n, c, k) for k in range(1, min(n, samples) + 1)],
    )


def _pass_at(k: int, results: list[TaskResult], rng: random.Random) -> PassAtK:
    values = [r.pass_at_k[k - 1] for r in results if len(r.pass_at_k) >= k]
    estimate = _estimate(values, rng)
    return PassAtK(k=k, value=estimate.value, low=estimate.low, high=estimate.high, tasks=len(values))


def _estimate(values: list[float], rng: random.Random) -> Estimate:
    low, high = stats.bootstrap_interval(values, rng)
    return Estimate(value=stats.mean(values), low=low, high=high)


def _components(played: Sequence[Trajectory]) -> dict[str, float]:
    sums: dict[str, list[float]] = {}
    for trajectory in (t for t in played if not t.failed):
        for name, value in trajectory.components.items():
            if value is not None and not math.isnan(value):
                sums.setdefault(name, []).append(value)
    return {name: stats.mean(values) for name, values in sorted(sums.items())}


def _failures(played: Sequence[Trajectory]) -> Failures:
    failed = [t for t in played if t.failed]
    steps = [s for t in played for turn in t.turns for s in turn.steps]
    return Failures(
        episodes=len(failed),
        by_kind=dict(Counter((t.error or "unknown").partition(":")[0] for t in failed).most_common()),
        unscored=sum(1 for t in played if not t.failed and math.isnan(t.reward)),
        stops=dict(Counter(t.stop for t in played).most_common()),
        tool_errors=sum(1 for s in steps if s.is_error and s.stepped),
        refused_calls=sum(1 for s in steps if not s.stepped),
    )


def _usage(played: Sequence[Trajectory]) -> Usage:
    prompt = sum(t.usage.prompt_tokens for t in played)
    completion = sum(t.usage.completion_tokens for t in played)
    total = sum(t.usage.total_tokens for t in played)
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total,
        mean_per_episode=total / len(played) if played else 0.0,
    )


# --- writing -----------------------------------------------------------------------------------


def write(report: Report, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (out / "report.md").write_text(markdown(report), encoding="utf-8")


def read(path: str | Path) -> Report:
    """A report from its `report.json`, or from the directory holding it."""
    where = Path(path)
    if where.is_dir():
        where = where / "report.json"
    return Report.model_validate_json(where.read_text(encoding="utf-8"))


def _num(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.3f}"


def _ci(low: float, high: float) -> str:
    return "-" if math.isnan(low) else f"[{low:.3f}, {high:.3f}]"


def markdown(report: Report) -> str:
    run = report.run
    lines = [
        f"# Evaluation: {run.target}",
        "",
        f"Model `{run.model}` at `{run.base_url}`; {len(run.tasks)} tasks x {run.samples} samples; "
        f"success: {report.success.describe()}.",
        "",
        "| metric | value | 95% interval |",
        "|---|---|---|",
        f"| mean reward | {_num(report.reward.value)} | {_ci(report.reward.low, report.reward.high)} |",
        *(f"| pass@{p.k} ({p.tasks} tasks) | {_num(p.value)} | {_ci(p.low, p.high)} |" for p in report.pass_at_k),
        "",
    ]
    if report.components:
        lines += ["## Reward components (mean per episode)", "", "| component | mean |", "|---|---|"]
        lines += [f"| {name} | {_num(value)} |" for name, value in report.components.items()]
        lines.append("")
    lines += [
        "## Tasks",
        "",
        "| task | samples | successes | failed | mean reward | pass@1 |",
        "|---|---|---|---|---|---|",
    ]
    for t in report.tasks:
        first = _num(t.pass_at_k[0]) if t.pass_at_k else "-"
        lines.append(f"| {t.id} | {t.samples} | {t.successes} | {t.failed} | {_num(t.mean_reward)} | {first} |")
    f = report.failures
    lines += [
        "",
        "## Failures and errors",
        "",
        f"- failed episodes: {f.episodes}" + (f" ({_counts(f.by_kind)})" if f.by_kind else ""),
        f"- unscored episodes: {f.unscored}",
        f"- how episodes ended: {_counts(f.stops)}",
        f"- tool errors: {f.tool_errors}; calls refused by the harness: {f.refused_calls}",
        "",
        "## Usage",
        "",
        f"- tokens: {report.usage.total_tokens:,} ({report.usage.prompt_tokens:,} prompt, "
        f"{report.usage.completion_tokens:,} completion; {report.usage.mean_per_episode:,.1f} per episode)",
        f"- wall time: {report.timing.wall_seconds:.1f}s; mean episode {report.timing.mean_episode_seconds:.2f}s",
        "",
        "## Run",
        "",
        "```json",
        run.model_dump_json(indent=2),
        "```",
        "",
    ]
    return "\n".join(lines)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in counts.items()) or "none"
