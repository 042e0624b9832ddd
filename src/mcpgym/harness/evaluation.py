"""`harness.evaluate`: play `samples` episodes of each task with a policy and report on them.

Layer: harness, over `rollout` (the episodes), `mcpgym.list_tasks` (which tasks) and
`harness.report` (what the numbers mean). The CLI (`mcpgym eval`) is `harness.eval_cli`.

Tasks are the environment's task catalog (the first `episodes`, or those named by id); an
environment without one is evaluated on seeds `seed, seed+1, ...` (task ids `seed/N`). Before
the run one reset (no step) reads what the environment declares about success: its
`max_reward` (`io.mcpgym/success` in the reset info) and whether its rubric reports a `success`
component. Every episode is appended to `OUT/trajectories.jsonl` as it finishes (what
`mcpgym view` shows), so an interrupted evaluation keeps what it played.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mcpgym
from mcpgym import RUBRIC_KEY
from mcpgym._core.protocol import SUCCESS_KEY
from mcpgym.harness import target as targets
from mcpgym.harness.errors import HarnessError
from mcpgym.harness.policy import Policy
from mcpgym.harness.report import SUCCESS_COMPONENT, Report, RunConfig, SuccessRule, build, write
from mcpgym.harness.rollout import SYSTEM_PROMPT, rollout

DEFAULT_SEED_TASKS = 10
TRAJECTORIES = "trajectories.jsonl"


class EvalError(HarnessError):
    """An evaluation that cannot start: unknown task ids, an output directory already used, ..."""


async def evaluate(
    target: mcpgym.Target,
    policy: Policy,
    *,
    model: str = "",
    base_url: str = "",
    sampling: dict[str, Any] | None = None,
    task_ids: Sequence[str] | None = None,
    episodes: int | None = None,
    samples: int = 1,
    seed: int = 0,
    threshold: float | None = None,
    max_turns: int = 20,
    concurrency: int = 8,
    system_prompt: str | None = SYSTEM_PROMPT,
    episode_timeout: float | None = None,
    out: str | Path | None = None,
    progress: bool = False,
    headers: dict[str, str] | None = None,
) -> Report:
    """Evaluate `policy` on `target`: `samples` episodes of each task; the report is written to
    `out` (report.json, report.md, trajectories.jsonl) when given, and returned."""
    if samples < 1:
        raise EvalError("samples must be at least 1")
    out_dir = _fresh(Path(out)) if out is not None else None
    resolved = targets.resolve(target)
    tasks = await _tasks(resolved, task_ids, episodes, seed, headers)
    rule = await _success_rule(resolved, tasks[0], threshold, headers)
    run = RunConfig(
        target=str(target),
        model=model,
        base_url=base_url,
        sampling=dict(sampling or {}),
        seed=seed,
        samples=samples,
        tasks=[t.id for t in tasks],
        max_turns=max_turns,
        system_prompt=system_prompt,
        concurrency=concurrency,
        mcpgym_version=mcpgym.__version__,
        started=time.time(),
    )
    started = time.monotonic()
    played = await rollout(
        resolved,
        policy,
        episodes=len(tasks) * samples,
        concurrency=concurrency,
        max_turns=max_turns,
        system_prompt=system_prompt,
        episode_timeout=episode_timeout,
        out=out_dir / TRAJECTORIES if out_dir is not None else None,
        progress=progress,
        tasks=[task for task in tasks for _ in range(samples)],  # a task's samples are consecutive episodes
        headers=headers,
    )
    listed = [(t.id, t.seed, dict(t.options)) for t in tasks]
    report = build(run, rule, listed, played, time.monotonic() - started)
    if out_dir is not None:
        write(report, out_dir)
    return report


def _fresh(out: Path) -> Path:
    if (out / TRAJECTORIES).exists() or (out / "report.json").exists():
        raise EvalError(f"{out} already holds an evaluation: give another --out (runs are never mixed)")
    return out


async def _tasks(
    target: mcpgym.Target,
    task_ids: Sequence[str] | None,
    episodes: int | None,
    seed: int,
    headers: dict[str, str] | None,
) -> list[mcpgym.Task]:
    catalog = await mcpgym.list_tasks(target, prompts=False, headers=headers)
    if task_ids:
        if not catalog:
            raise EvalError(f"{target!r} lists no tasks, so --tasks cannot name any: use --episodes (seeds)")
        by_id = {t.id: t for t in catalog}
        unknown = [t for t in task_ids if t not in by_id]
        if unknown:
            known = ", ".join(t.id for t in catalog[:5])
            raise EvalError(f"unknown task ids: {', '.join(unknown)} (the catalog has {len(catalog)}, e.g. {known})")
        return [by_id[t] for t in task_ids]
    if catalog:
        return list(catalog[:episodes])
    count = episodes if episodes is not None else DEFAULT_SEED_TASKS
    return [mcpgym.Task(id=f"seed/{seed + i}", prompt="", seed=seed + i) for i in range(count)]


async def _success_rule(
    target: mcpgym.Target, task: mcpgym.Task, threshold: float | None, headers: dict[str, str] | None
) -> SuccessRule:
    if threshold is not None:
        return SuccessRule(kind="threshold", threshold=threshold, source="--threshold")
    async with mcpgym.connect(target, headers=headers) as env:
        first = await env.reset(seed=task.seed, options=dict(task.options))
    rubric = first.info.get(RUBRIC_KEY)
    if isinstance(rubric, dict) and SUCCESS_COMPONENT in (rubric.get("components") or []):
        return SuccessRule(kind="component", source="success component")
    declared = first.info.get(SUCCESS_KEY)
    if isinstance(declared, dict) and isinstance(declared.get("max_reward"), int | float):
        return SuccessRule(kind="threshold", threshold=float(declared["max_reward"]), source="environment max_reward")
    return SuccessRule(kind="threshold", threshold=1.0, source="default: the environment declares no max_reward")
