"""Recordings: every episode as an append-only JSONL file, readable back as `Recording`s.

Layer: beside the episode core (the core calls it; it imports nothing from transports). Any
server records the same way whoever drives it (an RL client, Claude Code, a person), because
the hooks sit in the one place every tool call passes through.

Format: `DIR/<episode_id>.jsonl`, one JSON object per line, each written before the step's
result is sent (off the event loop, with a bounded number of open files), so a killed server
leaves every completed step on disk:

    {"event": "reset", "schema", "episode_id", "environment", "seed", "options", ["task_id"], "observation",
     "implicit", "time", ["render"]}
    {"event": "step", "tool", "arguments", "result", "reward", "done", "terminated", "truncated", "step",
     "time", "duration", ["components", "env_reward", "signals", "render"]}
    {"event": "close", "step_count", "total_reward", "done", "terminated", "truncated", "time", ["components"]}

`schema` is `SCHEMA` ("io.mcpgym/recording@2"). Recordings without it (schema 1, before
rubrics) read the same: `terminated` is `done and not truncated`, no components. With a rubric,
`reward` is the rubric's total, `env_reward` and `signals` what the environment itself reported
(all a rubric reads: `mcpgym rescore` re-scores from them), `components` the step's named parts.
A reward that is NaN (unscored) is written as null. `render` is the environment's `render()` of
the state after the reset or step (`{"text", "markdown", "image": an image block}`, parts it
gave), for the viewer; an environment without one records none. A call refused because the
episode was over is not a step and is not recorded.

Images and audio are stored once each under `DIR/blobs/` and referenced from the line
(`_blobs`); `read_recordings` puts them back.

Names: a `Recording` is the server's record of one episode (whoever drove it); a rollout's
`harness.Trajectory` is the policy side's (the conversation, turns, token usage). The JSON
format above is unchanged by the rename from `Trajectory`.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Literal

import anyio
import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field, model_validator

from mcpgym._core.types import Components, Score, ToolStep
from mcpgym._recording.blobs import BlobStore, restore

SCHEMA = "io.mcpgym/recording@2"

logger = logging.getLogger("mcpgym")


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


class Recording(BaseModel):
    """One episode as the server recorded it, as `read_recordings` returns it.

    Not `harness.Trajectory`: that is the policy's side of a rollout episode (conversation,
    turns, usage). A recording is what the server saw: every tool call, result and reward.
    """

    model_config = ConfigDict(frozen=True)

    episode_id: str
    environment: str
    seed: int | None = None
    options: dict[str, Any] | None = None
    task_id: str | None = None
    """The catalog task the episode played, when the server knew it (recorded since #27)."""
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
    """Writes one JSONL file per episode under `directory`.

    Files are not held open per episode (a server holds up to `max_episodes` of them, far past
    the open-file limit): one `_Writer` appends every line, keeping at most `max_open_files`
    descriptors, in a worker thread. A step's result is sent only once its line is written
    (to the OS, as `flush` did), so a killed server still keeps every completed step; steps
    that finish together share one write round.
    """

    def __init__(self, directory: str | Path, *, max_open_files: int = 32) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._writer = _Writer(max_open_files)

    def open(
        self,
        episode_id: str,
        environment: str,
        seed: int | None,
        options: dict[str, Any] | None,
        implicit: bool,
        *,
        task_id: str | None = None,
    ) -> EpisodeLog:
        file = _File(self.directory, episode_id)
        blobs = BlobStore(self.directory)
        return EpisodeLog(file, self._writer, episode_id, environment, seed, options, implicit, blobs, task_id=task_id)


class _File:
    """One episode's file. Its name is chosen on the first write (in the writer's thread): a reset
    that reuses a live id (a client retrying) is a new episode, so a new file, never appended
    to the last one's."""

    __slots__ = ("base", "directory", "path")

    def __init__(self, directory: Path, base: str) -> None:
        self.directory, self.base = directory, base
        self.path: Path | None = None

    def resolve(self) -> Path:
        if self.path is None:
            path, retry = self.directory / f"{self.base}.jsonl", 1
            while path.exists():
                path = self.directory / f"{self.base}.{retry}.jsonl"
                retry += 1
            path.touch()  # claimed now: a concurrent episode with the same id picks the next name
            self.path = path
        return self.path


class _Round:
    """The lines written together in one trip to the worker thread."""

    __slots__ = ("closing", "done", "lines")

    def __init__(self) -> None:
        self.lines: list[tuple[_File, bytes]] = []
        self.closing: list[_File] = []
        self.done = False


class _Writer:
    """Appends lines off the event loop with a bounded set of open files.

    Whoever needs a line written waits until the round holding it is done. When no round is
    running, a waiter runs the next one itself (every line queued so far, in one worker-thread
    call): no background task, and under load one thread trip serves many steps.
    """

    def __init__(self, max_open_files: int) -> None:
        self.max_open_files = max(1, max_open_files)
        self._next = _Round()
        self._running = False
        self._finished: anyio.Event | None = None  # made on demand: the writer outlives event loops
        self._open: OrderedDict[Path, int] = OrderedDict()  # touched only by the round's thread
        self._failed = False

    async def write(self, file: _File, line: bytes, *, last: bool = False) -> None:
        mine = self._next
        mine.lines.append((file, line))
        if last:
            mine.closing.append(file)
        while not mine.done:
            if self._running:
                if self._finished is None:
                    self._finished = anyio.Event()
                await self._finished.wait()
            else:
                await self._run_round()

    async def _run_round(self) -> None:
        current, self._next = self._next, _Round()
        self._running = True
        try:
            with anyio.CancelScope(shield=True):  # a round serves other steps too: it always completes
                # Its own token: hung sync tools holding the shared thread limiter must not stall recording.
                await anyio.to_thread.run_sync(self._write_round, current, limiter=anyio.CapacityLimiter(1))
        finally:
            current.done = True
            self._running = False
            finished, self._finished = self._finished, None
            if finished is not None:
                finished.set()

    def _write_round(self, current: _Round) -> None:
        grouped: dict[int, tuple[_File, list[bytes]]] = {}
        for file, line in current.lines:
            grouped.setdefault(id(file), (file, []))[1].append(line)
        try:
            for file, lines in grouped.values():
                _write_all(self._descriptor(file.resolve()), b"".join(lines))
        except OSError:
            # A recording must never fail a step: say so once, and keep serving.
            if not self._failed:
                self._failed = True
                logger.exception("mcpgym: writing a recording failed; later failures are not logged")
        for file in current.closing:
            if file.path is not None and (fd := self._open.pop(file.path, None)) is not None:
                os.close(fd)

    def _descriptor(self, path: Path) -> int:
        fd = self._open.get(path)
        if fd is not None:
            self._open.move_to_end(path)
            return fd
        while len(self._open) >= self.max_open_files:
            os.close(self._open.popitem(last=False)[1])
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._open[path] = fd
        return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class EpisodeLog:
    def __init__(
        self,
        file: _File,
        writer: _Writer,
        episode_id: str,
        environment: str,
        seed: int | None,
        options: dict[str, Any] | None,
        implicit: bool,
        blobs: BlobStore | None = None,
        *,
        task_id: str | None = None,
    ) -> None:
        self._file = file
        self._writer = writer
        self._closed = False
        self._blobs = blobs if blobs is not None else BlobStore(file.directory)
        self._header = {
            "episode_id": episode_id,
            "environment": environment,
            "seed": seed,
            "options": options,
            "implicit": implicit,
        }
        if task_id is not None:  # the catalog task the server attributed the episode to
            self._header["task_id"] = task_id

    async def reset(self, observation: Any, *, render: dict[str, Any] | None = None) -> None:
        observation = self._blobs.externalize(observation)
        record = {"event": "reset", "schema": SCHEMA, **self._header, "observation": observation}
        if render is not None:
            record["render"] = self._blobs.externalize(render)
        await self._write(record)

    async def step(
        self,
        tool: str,
        arguments: dict[str, Any],
        outcome: ToolStep,
        env_reward: float | None,
        signals: dict[str, Any] | None,
        *,
        started: float,
        render: dict[str, Any] | None = None,
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
        if render is not None:
            record["render"] = self._blobs.externalize(render)  # the environment's render() after the step
        await self._write(record)

    async def close(
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
        await self._write(record, last=True)
        self._closed = True

    async def _write(self, record: dict[str, Any], *, last: bool = False) -> None:
        if self._closed:
            return
        record.setdefault("time", time.time())
        # default=str: a recording must never fail a step over an odd argument value.
        line = (json.dumps(record, default=str) + "\n").encode()
        await self._writer.write(self._file, line, last=last)


def _finite_or_none(value: float) -> float | None:
    return None if math.isnan(value) else value


def read_recordings(directory: str | Path) -> list[Recording]:
    """Every episode recorded under `directory`, oldest first. A line cut short by a kill is ignored."""
    recordings = [_read(path) for path in Path(directory).glob("*.jsonl")]
    return sorted((r for r in recordings if r is not None), key=lambda r: r.started)


def _read(path: Path) -> Recording | None:
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
    return Recording(**header, steps=steps, closed=closed, **ending)
