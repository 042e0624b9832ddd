"""Trajectory recording: every episode as an append-only JSONL file, readable back as types.

Layer: beside the episode core (the core calls it; it imports nothing from transports). Any
server records the same way whoever drives it (an RL client, Claude Code, a person), because
the hooks sit in the one place every tool call passes through.

Format: `DIR/<episode_id>.jsonl`, one JSON object per line, flushed as each line is written
so a killed server leaves every completed step on disk:

    {"event": "reset", "episode_id", "environment", "seed", "options", "observation", "implicit", "time"}
    {"event": "step", "tool", "arguments", "result", "reward", "done", "truncated", "step", "time", "duration"}
    {"event": "close", "step_count", "total_reward", "done", "truncated", "time"}

Images and audio are stored once each under `DIR/blobs/` and referenced from the line
(`_blobs`); `read_trajectories` puts them back.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import IO, Any, Literal

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field

from mcpgym._blobs import BlobStore, restore


class StepRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    tool: str
    arguments: dict[str, Any]
    result: types.CallToolResult
    reward: float
    done: bool
    truncated: bool
    step: int
    time: float
    duration: float


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

    @property
    def total_reward(self) -> float:
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
        self._write({"event": "reset", **self._header, "observation": self._blobs.externalize(observation)})

    def step(
        self,
        tool: str,
        arguments: dict[str, Any],
        result: types.CallToolResult,
        reward: float,
        done: bool,
        truncated: bool,
        step: int,
        *,
        started: float,
    ) -> None:
        now = time.time()
        self._write(
            {
                "event": "step",
                "tool": tool,
                "arguments": arguments,
                "result": self._blobs.externalize(result.model_dump(mode="json", by_alias=True, exclude_none=True)),
                "reward": reward,
                "done": done,
                "truncated": truncated,
                "step": step,
                "time": started,
                "duration": now - started,
            }
        )

    def close(self, step_count: int, total_reward: float, done: bool, truncated: bool) -> None:
        self._write(
            {
                "event": "close",
                "step_count": step_count,
                "total_reward": total_reward,
                "done": done,
                "truncated": truncated,
            }
        )
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


def read_trajectories(directory: str | Path) -> list[Trajectory]:
    """Every episode recorded under `directory`, oldest first. A line cut short by a kill is ignored."""
    trajectories = [_read(path) for path in Path(directory).glob("*.jsonl")]
    return sorted((t for t in trajectories if t is not None), key=lambda t: t.started)


def _read(path: Path) -> Trajectory | None:
    header: dict[str, Any] | None = None
    steps: list[StepRecord] = []
    closed = False
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
    if header is None:
        return None
    return Trajectory(**header, steps=steps, closed=closed)
