"""The default rubric of a wrapped server: a task's declarative checks over its final workspace.

Layer: pure function of a directory. A policy under RL pressure writes whatever earns reward,
so the checks never follow a symlink (a link to a file that happens to match is not the file),
never read outside the workspace, and refuse a file too large to read rather than cut it.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from mcpgym._wrap._tasks import FileCheck, Task

MAX_READ = 8 << 20
"""Largest file a check reads (bytes); a larger one fails its checks, it is never truncated."""


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str = ""


@dataclass(frozen=True)
class Score:
    """A rubric's verdict: the score in [0, 1] and the checks behind it."""

    value: float
    checks: list[Check] = field(default_factory=list)
    done: bool | None = None
    """Whether the task is complete (the episode ends); None: when every check passed."""

    @property
    def solved(self) -> bool:
        if self.done is not None:
            return self.done
        return bool(self.checks) and all(c.passed for c in self.checks)


def verify(task: Task, workspace: Path) -> Score:
    """Score `workspace` against `task.verify`: 1.0 when every check passes, else 0.0 (or the
    fraction passed when `task.partial`)."""
    root = workspace.resolve()
    checks: list[Check] = []
    for path, spec in task.verify.files.items():
        checks.extend(_file_checks(root, path, spec))
    for path in task.verify.absent:
        target = root / path
        checks.append(Check(f"absent {path}", not os.path.lexists(target)))
    if task.verify.only is not None:
        extra = [p for p in _listing(root) if not any(fnmatch.fnmatch(p, g) for g in task.verify.only)]
        checks.append(Check("no other files", not extra, f"unexpected: {', '.join(extra[:5])}" if extra else ""))
    if not checks:
        return Score(0.0, [Check("task has checks", False, "the task's verify section is empty")])
    passed = sum(c.passed for c in checks)
    if task.partial:
        return Score(passed / len(checks), checks)
    return Score(1.0 if passed == len(checks) else 0.0, checks)


def _file_checks(root: Path, path: str, spec: FileCheck) -> list[Check]:
    text, problem = read_inside(root, path)
    if text is None:
        return [Check(f"file {path}", False, problem)]
    checks = [Check(f"file {path}", True)]
    if spec.equals is not None:
        checks.append(Check(f"{path} equals", text.rstrip("\n") == spec.equals.rstrip("\n")))
    checks.extend(Check(f"{path} contains {s!r}", s in text) for s in spec.contains)
    checks.extend(Check(f"{path} excludes {s!r}", s not in text) for s in spec.excludes)
    if spec.matches is not None:
        checks.append(
            Check(f"{path} matches {spec.matches!r}", re.search(spec.matches, text, re.MULTILINE) is not None)
        )
    return checks


def read_inside(root: Path, path: str) -> tuple[str | None, str]:
    """The text of the regular file `path` under `root`, or None and why not. No component may
    be a symlink, so nothing outside `root` is ever read."""
    target = root
    for part in Path(path).parts:
        target = target / part
        if target.is_symlink():
            return None, f"{path} is (or goes through) a symlink"
    if not target.is_file():
        return None, f"{path} does not exist or is not a regular file"
    if target.stat().st_size > MAX_READ:
        return None, f"{path} is larger than {MAX_READ} bytes"
    try:
        return target.read_text(encoding="utf-8"), ""
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"{path} cannot be read as UTF-8 text: {exc}"


def _listing(root: Path) -> list[str]:
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):  # os.walk never follows symlinked dirs
        rel = Path(dirpath).relative_to(root)
        found.extend(str(rel / name) if rel.parts else name for name in filenames)
        found.extend(str(rel / name) for name in dirnames if (Path(dirpath) / name).is_symlink())
    return sorted(found)
