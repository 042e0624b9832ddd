"""The task file of a wrapped server: one JSON object per line, validated with line numbers.

Layer: plain data (pydantic), no I/O beyond reading the file. The schema is documented in
rfcs/0015-wrapping-mcp-servers.md and `mcpgym wrap --help`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


class FileCheck(BaseModel):
    """What one workspace file must hold when the task is done (every given test must pass)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    equals: str | None = None
    """The whole file, exactly (a trailing newline is ignored on both sides)."""
    contains: list[str] = Field(default_factory=list)
    """Substrings that must all appear."""
    excludes: list[str] = Field(default_factory=list)
    """Substrings that must not appear."""
    matches: str | None = None
    """A regular expression the file must match somewhere (Python `re.search`, multiline)."""


class Verify(BaseModel):
    """The declarative verifier over the episode's final workspace (the default rubric)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    files: dict[str, FileCheck] = Field(default_factory=dict)
    """Files that must exist (regular files, not symlinks), with what they must hold."""
    absent: list[str] = Field(default_factory=list)
    """Paths that must not exist (files or directories)."""
    only: list[str] | None = None
    """If given, the complete list of files the workspace may hold at the end (glob patterns)."""

    @field_validator("files", "absent", "only", mode="after")
    @classmethod
    def _relative(cls, value: Any) -> Any:
        for path in value or ():
            check_relative(path)
        return value


class TaskSpec(BaseModel):
    """One task, as a task file defines it: what the agent is asked, the files its workspace
    starts with, and how it is scored. Only `id` and `prompt` are ever shown (as an
    `mcpgym.Task` in the catalog); `files`, `verify` and `data` stay with the grader."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    prompt: str
    files: dict[str, str] = Field(default_factory=dict)
    """Workspace files to create before the episode starts (relative path -> text)."""
    setup: list[str] = Field(default_factory=list)
    """Shell commands run in the workspace after the files are placed and before the server
    starts, each under the sandbox as the server will run (e.g. `git init`); a failure fails the
    reset, saying which command and what it printed."""
    verify: Verify = Field(default_factory=Verify)
    partial: bool = False
    """Score the fraction of checks passed instead of all-or-nothing."""
    network: bool = False
    """Let the wrapped server reach the network in this task's episodes (off by default)."""
    data: dict[str, Any] = Field(default_factory=dict)
    """Anything a custom rubric needs (never shown to the agent)."""

    @field_validator("files", mode="after")
    @classmethod
    def _relative(cls, value: dict[str, str]) -> dict[str, str]:
        for path in value:
            check_relative(path)
        return value


def check_relative(path: str) -> str:
    """A workspace path must stay in the workspace: relative, no `..`, not empty."""
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or ".." in pure.parts or "\x00" in path:
        raise ValueError(f"{path!r} is not a relative path inside the workspace")
    return path


class TaskFileError(ValueError):
    """A task file that cannot be used, with where and why."""


def load_tasks(path: str | Path) -> list[TaskSpec]:
    """Read a JSONL task file; an error names the file, the line and the field."""
    source = Path(path)
    try:
        lines = source.read_text(encoding="utf-8-sig").splitlines()  # a BOM (some editors write one) is not JSON
    except OSError as exc:
        raise TaskFileError(f"{source}: cannot read the task file: {exc.strerror or exc}") from exc
    tasks = list(_parse(source, enumerate(lines, 1)))
    if not tasks:
        raise TaskFileError(f"{source}: no tasks (one JSON object per line)")
    seen: set[str] = set()
    for task in tasks:
        if task.id in seen:
            raise TaskFileError(f"{source}: task id {task.id!r} appears twice")
        seen.add(task.id)
    return tasks


def _parse(source: Path, lines: Iterable[tuple[int, str]]) -> Iterable[TaskSpec]:
    for number, line in lines:
        if not line.strip():
            continue
        try:
            yield TaskSpec.model_validate(json.loads(line))
        except json.JSONDecodeError as exc:
            raise TaskFileError(f"{source}:{number}: not JSON: {exc.msg} (column {exc.colno})") from None
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"]) or "task"
            raise TaskFileError(f"{source}:{number}: {where}: {first['msg']}") from None
