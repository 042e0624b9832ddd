"""Rescoring: run a rubric over recorded episodes, offline (no environment, no server).

Layer: top-adjacent (reads recordings, drives `EpisodeScore`; used by `mcpgym rescore`). The
recording keeps everything a rubric reads (each step's call, result, the environment's own
reward and signals), and rescoring feeds it through the same `EpisodeScore` the live episode
used, so the same rubric reproduces the recorded rewards exactly (tests/test_rubrics.py).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import statistics
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio

from mcpgym._core.types import Components
from mcpgym._episode.scoring import EpisodeScore
from mcpgym._recording.recording import Recording, read_recordings
from mcpgym.rubrics._core import Rubric


@dataclass
class Rescored:
    """One episode scored again: each step's reward and components, and the episode's."""

    episode_id: str
    rewards: list[float] = field(default_factory=list)
    components: list[Components] = field(default_factory=list)
    total: float = 0.0
    episode_components: Components = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "rewards": [_json_number(r) for r in self.rewards],
            "components": self.components,
            "total": _json_number(self.total),
            "episode_components": self.episode_components,
        }


async def rescore(recording: Recording, rubric: Rubric) -> Rescored:
    """Score a recorded episode with `rubric`, as the live episode would have been scored.
    Calls made after the episode ended earn nothing, as live; an episode that ended on a step
    gets its trajectory score on that step, one closed early at close, one cut off by a dead
    server none (as live)."""
    score = EpisodeScore(rubric, recording.observation)
    out = Rescored(recording.episode_id)
    ended = False
    for record in recording.steps:
        if ended:
            out.rewards.append(0.0)
            out.components.append({})
            continue
        reward, values = score.step(
            record.tool,
            record.arguments,
            record.result,
            record.own_reward,
            record.signals or None,
            record.step,
            record.terminated,
            record.truncated,
        )
        if record.done:
            ended = True
            added, final = await score.finish(
                recording.environment, recording.seed, record.terminated, record.truncated
            )
            reward, values = reward + added, {**values, **final}
        out.rewards.append(reward)
        out.components.append(values)
    if not ended and recording.closed:
        truncated = bool(recording.steps) and recording.steps[-1].truncated
        await score.finish_on_close(recording.environment, recording.seed, truncated)
    out.total = score.total
    out.episode_components = dict(score.components)
    return out


def load_rubric(path: str) -> Rubric:
    """`module:name`: a `Rubric`, an Environment class with a `rubric`, or a function returning one."""
    module_name, _, attr = path.partition(":")
    if not attr:
        raise ValueError(f"--rubric takes module:name, got {path!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if isinstance(obj, type) and isinstance(owned := getattr(obj, "rubric", None), Rubric):
        obj = owned
    elif callable(obj) and not isinstance(obj, Rubric):
        obj = obj()
    if not isinstance(obj, Rubric):
        raise TypeError(f"{path} is not a mcpgym.rubrics.Rubric (nor a class or function giving one)")
    return obj


def summary(results: Iterable[Rescored]) -> dict[str, dict[str, float]]:
    """Mean and distribution (min, quartiles, max) of the total and each episode component;
    unscored values are counted apart, never averaged in."""
    columns: dict[str, list[float | None]] = {}
    for r in results:
        columns.setdefault("total", []).append(None if math.isnan(r.total) else r.total)
        for name, value in r.episode_components.items():
            columns.setdefault(name, []).append(value)
    return {name: _describe(values) for name, values in columns.items()}


def _describe(values: list[float | None]) -> dict[str, float]:
    scored = sorted(v for v in values if v is not None)
    out: dict[str, float] = {"n": len(scored), "unscored": len(values) - len(scored)}
    if scored:
        quartiles = statistics.quantiles(scored, n=4) if len(scored) > 1 else [scored[0]] * 3
        out.update(mean=statistics.fmean(scored), min=scored[0], p25=quartiles[0], p50=quartiles[1])
        out.update(p75=quartiles[2], max=scored[-1])
    return out


def _json_number(value: float) -> float | None:
    return None if math.isnan(value) else value


# -- the `mcpgym rescore` command ---------------------------------------------------------------


def register(sub: Any) -> None:
    parser = sub.add_parser("rescore", help="re-score recorded episodes with a rubric (offline)")
    parser.add_argument("runs", nargs="+", metavar="RUNS", help="recording directories (from serve --record)")
    parser.add_argument("--rubric", required=True, metavar="MODULE:NAME", help="a Rubric (or a class with one)")
    parser.add_argument("--out", default=None, metavar="FILE", help="write one JSON line per episode here")


def command(args: argparse.Namespace, progress: TextIO | None = None) -> int:
    rubric = load_rubric(args.rubric)
    recordings = [r for run in args.runs for r in _read(run)]
    tick = _printer(progress or sys.stderr, len(recordings))
    results = anyio.run(_rescore_all, recordings, rubric, tick)
    if args.out is not None:
        with Path(args.out).open("w", encoding="utf-8") as out:
            for r in results:
                out.write(json.dumps(r.as_json()) + "\n")
    print(json.dumps(summary(results), indent=2))
    return 0


def _read(run: str) -> list[Recording]:
    if not Path(run).is_dir():
        raise SystemExit(f"mcpgym: {run} is not a recording directory")
    return read_recordings(run)


async def _rescore_all(recordings: list[Recording], rubric: Rubric, tick: Callable[[int], None]) -> list[Rescored]:
    results = []
    for i, recording in enumerate(recordings, 1):
        results.append(await rescore(recording, rubric))
        tick(i)
    return results


def _printer(stream: TextIO, total: int) -> Callable[[int], None]:
    def tick(done: int) -> None:
        if done == total or done % 100 == 0:
            print(f"rescored {done}/{total} episodes", file=stream)

    return tick
