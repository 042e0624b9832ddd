"""The default rubric of a wrapped server: a task's declarative checks over its final workspace.

Layer: pure function of a directory. A policy under RL pressure writes whatever earns reward,
so the checks never follow a symlink (a link to a file that happens to match is not the file),
never read outside the workspace, and refuse a file too large to read rather than cut it.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from mcpgym._wrap._tasks import FileCheck, TaskSpec

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
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


def verify(task: TaskSpec, workspace: Path) -> Score:
    """Score `workspace` against `task.verify`: 1.0 when every check passes, else 0.0 (or the
    fraction passed when `task.partial`)."""
    root = workspace.resolve()
    checks: list[Check] = []
    for path, spec in task.verify.files.items():
        checks.extend(_file_checks(root, path, spec))
    for path in task.verify.absent:
        checks.append(_absent(root, path))
    if task.verify.only is not None:
        try:
            listing = _listing(root)
        except OSError as exc:  # a directory the checks cannot read may hide anything
            checks.append(
                Check("no other files", False, f"cannot list {exc.filename or 'a directory'}: {exc.strerror}")
            )
        else:
            extra = [p for p in listing if not any(fnmatch.fnmatch(p, g) for g in task.verify.only)]
            detail = f"unexpected: {', '.join(extra[:5])}" if extra else ""
            checks.append(Check("no other files", not extra, detail))
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
    be a symlink, so nothing outside `root` is ever read. Each component is opened relative to
    the one before it and every test is made on the open file: the wrapped server's processes
    run on while the checks do, and may swap a name for a link or a FIFO between a test and a
    read; a FIFO is opened without blocking, then refused."""
    parts = PurePosixPath(path).parts
    if any(_is_link(root.joinpath(*parts[: i + 1])) for i in range(len(parts))):
        return None, f"{path} is (or goes through) a symlink"
    try:
        data = _read_regular(root, parts)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None, f"{path} is (or goes through) a symlink"
        return None, f"{path} does not exist or is not a regular file ({exc.strerror})"
    if data is None:
        return None, f"{path} is not a regular file"
    if len(data) > MAX_READ:
        return None, f"{path} is larger than {MAX_READ} bytes"
    try:
        return data.decode("utf-8"), ""
    except UnicodeDecodeError as exc:
        return None, f"{path} cannot be read as UTF-8 text: {exc}"


def _is_link(path: Path) -> bool:
    return path.is_symlink()  # for a clear message only: the opens below refuse links anyway


def _read_regular(root: Path, parts: tuple[str, ...]) -> bytes | None:
    """The first MAX_READ + 1 bytes of the regular file `root/parts...` (None: not a regular
    file), never following a link."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            flags = os.O_RDONLY | os.O_NOFOLLOW | (os.O_NONBLOCK if last else os.O_DIRECTORY)
            fd, parent = os.open(part, flags, dir_fd=fd), fd
            os.close(parent)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_READ:
            chunk = os.read(fd, MAX_READ + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _absent(root: Path, path: str) -> Check:
    """Absent only when the lookup says so: a path the checks cannot look up (a directory made
    unsearchable, say) is not thereby gone."""
    try:
        os.lstat(root / path)
    except (FileNotFoundError, NotADirectoryError):
        return Check(f"absent {path}", True)
    except OSError as exc:
        return Check(f"absent {path}", False, f"cannot tell: {exc.strerror}")
    return Check(f"absent {path}", False)


def _listing(root: Path) -> list[str]:
    """Every file under `root` (links included, never followed); raises OSError when a
    directory cannot be read rather than leave out what it holds. Iterative, one directory
    descriptor at a time: the wrapped server can nest directories deeper than Python's
    recursion limit and than PATH_MAX (`os.walk` recurses on 3.11 and joins whole paths)."""
    found: list[str] = []
    stack = [(os.open(root, _DIR_FLAGS), "")]
    try:
        while stack:
            fd, prefix = stack.pop()
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        name = prefix + entry.name
                        if entry.is_dir(follow_symlinks=False):
                            stack.append((os.open(entry.name, _DIR_FLAGS, dir_fd=fd), name + "/"))
                        else:
                            found.append(name)  # a file, or a link (to a directory too): never followed
            finally:
                os.close(fd)
    finally:
        for fd, _ in stack:
            os.close(fd)
    return sorted(found)
