"""Trajectory recording: every episode as an append-only JSONL file, readable back as types.

Layer: beside the episode core (the core calls it; it imports nothing from transports). Any
server records the same way whoever drives it (an RL client, Claude Code, a person), because
the hooks sit in the one place every tool call passes through.

Format: `DIR/<episode_id>.jsonl`, one JSON object per line, flushed as each line is written
so a killed server leaves every completed step on disk:

    {"event": "reset", "schema", "episode_id", "environment", "seed", "options", "observation", "implicit", "time"}
    {"event": "step", "tool", "arguments", "result", "reward", "done", "terminated", "truncated", "step",
     "time", "duration", ["components", "env_reward", "signals"]}
    {"event": "close", "step_count", "total_reward", "done", "terminated", "truncated", "time", ["components"]}

`schema` is `SCHEMA` ("io.mcpgym/recording@2"). Recordings without it (schema 1, before
rubrics) read the same: `terminated` is `done and not truncated`, no components. With a rubric,
`reward` is the rubric's total, `env_reward` and `signals` what the environment itself reported
(all a rubric reads: `mcpgym rescore` re-scores from them), `components` the step's named parts.
A reward that is NaN (unscored) is written as null.

Images and audio are stored once each under `DIR/blobs/` and referenced from the line
(`_blobs`); `read_trajectories` puts them back.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import IO, Any, Literal

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field, model_validator

from mcpgym._blobs import BlobStore, restore
from mcpgym._types import Components, Score, ToolStep

SCHEMA = "io.mcpgym/recording@2"


class StepRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    tool: str
    arguments: dict[str, Any]
    result: types.CallToolResult
    reward: Score
    done: bool
    truncated: bool
    step: int
    time: float
    duration: float
    terminated: bool = False
    components: Components = Field(default_factory=dict)
    env_reward: float | None = None
    """The environment's own reward for the step (None: no rubric, `reward` is it)."""
    signals: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _schema_1(cls, data: Any) -> Any:
        # Schema 1 had no `terminated`: the core never sets it together with `truncated`.
        if isinstance(data, dict) and "terminated" not in data:
            return {**data, "terminated": bool(data.get("done")) and not data.get("truncated")}
        return data

    @property
    def own_reward(self) -> float:
        """What the environment itself gave this step (the rubric's input)."""
        return self.reward if self.env_reward is None else self.env_reward


class Trajectory(BaseModel):
    """One recorded episode, as `read_trajectories` returns it."""

    model_config = ConfigDict(frozen=True)

    episode_id: str
    environment: str
    seed: int | None = None
    options: dict[str, Any] | None = None
    observation: Any = None
    implicit: bool = False
    started: float = 0.0
    steps: list[StepRecord] = Field(default_factory=list)
    closed: bool = False
    """False when the server stopped (or was killed) before the episode ended."""
    final_reward: float | None = None
    """The return recorded at close (with a rubric, it includes a trajectory score computed
    when the episode was closed unfinished); None if the episode was never closed."""
    components: Components = Field(default_factory=dict)
    """The episode's sum of each rubric component, as recorded at close."""

    @property
    def total_reward(self) -> float:
        if self.final_reward is not None:
            return self.final_reward
        return sum(s.reward for s in self.steps)

    @property
    def done(self) -> bool:
        return bool(self.steps) and self.steps[-1].done


class Recorder:
    """Writes one JSONL file per episode under `directory`."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def open(
        self, episode_id: str, environment: str, seed: int | None, options: dict[str, Any] | None, implicit: bool
    ) -> EpisodeLog:
        # A reset that reuses a live id (a client retrying) is a new episode: a new file, never
        # appended to the last one's.
        path = self.directory / f"{episode_id}.jsonl"
        retry = 1
        while path.exists():
            path = self.directory / f"{episode_id}.{retry}.jsonl"
            retry += 1
        return EpisodeLog(path, episode_id, environment, seed, options, implicit, BlobStore(self.directory))


class EpisodeLog:
    def __init__(
        self,
        path: Path,
        episode_id: str,
        environment: str,
        seed: int | None,
        options: dict[str, Any] | None,
        implicit: bool,
        blobs: BlobStore | None = None,
    ) -> None:
        self._blobs = blobs if blobs is not None else BlobStore(path.parent)
        self._file: IO[str] | None = path.open("a", encoding="utf-8")
        self._header = {
            "episode_id": episode_id,
            "environment": environment,
            "seed": seed,
            "options": options,
            "implicit": implicit,
        }

    def reset(self, observation: Any) -> None:
        self._write(
            {"event": "reset", "schema": SCHEMA, **self._header, "observation": self._blobs.externalize(observation)}
        )

    def step(
        self,
        tool: str,
        arguments: dict[str, Any],
        outcome: ToolStep,
        env_reward: float | None,
        signals: dict[str, Any] | None,
        *,
        started: float,
    ) -> None:
        now = time.time()
        result = outcome.observation.model_dump(mode="json", by_alias=True, exclude_none=True)
        record = {
            "event": "step",
            "tool": tool,
            "arguments": arguments,
            "result": self._blobs.externalize(result),
            "reward": _finite_or_none(outcome.reward),
            "done": outcome.done,
            "terminated": outcome.terminated,
            "truncated": outcome.truncated,
            "step": outcome.info["step"],
            "time": started,
            "duration": now - started,
        }
        if outcome.components:
            record["components"] = outcome.components
        if env_reward is not None:
            record["env_reward"] = env_reward
        if signals:
            record["signals"] = signals
        self._write(record)

    def close(
        self, step_count: int, total_reward: float, done: bool, truncated: bool, components: Components | None = None
    ) -> None:
        record = {
            "event": "close",
            "step_count": step_count,
            "total_reward": _finite_or_none(total_reward),
            "done": done,
            "terminated": done and not truncated,
            "truncated": truncated,
        }
        if components is not None:
            record["components"] = components
        self._write(record)
        if self._file is not None:
            self._file.close()
            self._file = None

    def _write(self, record: dict[str, Any]) -> None:
        if self._file is None:
            return
        record.setdefault("time", time.time())
        # default=str: a recording must never fail a step over an odd argument value.
        self._file.write(json.dumps(record, default=str) + "\n")
        self._file.flush()


def _finite_or_none(value: float) -> float | None:
    return None if math.isnan(value) else value


def read_trajectories(directory: str | Path) -> list[Trajectory]:
    """Every episode recorded under `directory`, oldest first. A line cut short by a kill is ignored."""
    trajectories = [_read(path) for path in Path(directory).glob("*.jsonl")]
    return sorted((t for t in trajectories if t is not None), key=lambda t: t.started)


def _read(path: Path) -> Trajectory | None:
    header: dict[str, Any] | None = None
    steps: list[StepRecord] = []
    closed = False
    ending: dict[str, Any] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = restore(json.loads(line), path.parent)
        except json.JSONDecodeError:
            break  # the server died mid-write: everything before this line is intact
        kind: Literal["reset", "step", "close"] = record.pop("event")
        if kind == "reset":
            record["started"] = record.pop("time", 0.0)
            header = record
        elif kind == "step":
            steps.append(StepRecord.model_validate(record))
        else:
            closed = True
            ending = {"final_reward": record.get("total_reward"), "components": record.get("components") or {}}
            if ending["final_reward"] is None and "total_reward" in record:
                ending["final_reward"] = math.nan  # recorded as null: unscored
    if header is None:
        return None
    header.pop("schema", None)
    return Trajectory(**header, steps=steps, closed=closed, **ending)
