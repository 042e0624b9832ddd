"""Where workspaces and grading directories live, and cleaning up after servers that died.

Layer: OS plumbing (uses `_workspace`'s mount and removal helpers). Every directory a server
makes for sandboxed code lives under one directory of its own, `<tmp>/mcpgym-coding-<euid>/<pid>-…`,
holding an exclusive `flock` on its `.lock` for as long as the process lives. The kernel drops
that lock however the process ends, SIGKILL and OOM kills included, which is what tells a later
server that the directory is an orphan: the first time a process asks for its directory, it
first removes every directory whose lock it can take (unmounting any workspace tmpfs left
inside, which would otherwise pin its RAM for the life of the host), and never one whose
owner still runs, so replicas on one host never clean up each other's live episodes.
Directories are created and orphans claimed under a lock on the parent, so nobody ever sees
a directory whose lock is not held yet.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import logging
import os
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from servers.coding._workspace import remove_tree, unmount

logger = logging.getLogger("servers.coding")

_LOCK = ".lock"
_OPEN = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC
_guard = threading.Lock()
_own: tuple[int, Path] | None = None  # (pid, directory): a forked child makes its own
_held: list[int] = []  # lock descriptors kept open for the life of the process


def directory() -> Path:
    """This process's own directory, made (after `sweep()`) the first time it is asked for."""
    global _own
    with _guard:
        if _own is None or _own[0] != os.getpid():
            _own = (os.getpid(), _create(base()))
        return _own[1]


def base() -> Path:
    """The parent of every server's directory: one per user, private to that user."""
    path = Path(tempfile.gettempdir()) / f"mcpgym-coding-{os.geteuid()}"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o711)  # others may pass through to their workspace, never list
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        # In a shared /tmp anyone may create this name first: never work under their directory.
        raise RuntimeError(f"{path} is not a directory that only this user can change; remove it and retry")
    return path


def sweep(parent: Path | None = None) -> list[Path]:
    """Remove what servers that are gone left under `parent` (default `base()`); returns what
    was removed. Directories of running servers are left alone."""
    parent = parent if parent is not None else base()
    with _locked(parent):
        orphans = _claim_orphans(parent)
    return _remove(orphans)


def _create(parent: Path) -> Path:
    with _locked(parent):
        orphans = _claim_orphans(parent)
        own = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=parent))
        own.chmod(0o711)
        fd = os.open(own / _LOCK, _OPEN | os.O_CREAT | os.O_EXCL, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        _held.append(fd)
    # Outside the parent's lock: the orphans' own locks, held until they are gone, keep other
    # sweepers off them, and a slow removal does not hold up other servers starting.
    _remove(orphans)
    atexit.register(_tidy, own)
    return own


@contextlib.contextmanager
def _locked(parent: Path) -> Iterator[None]:
    fd = os.open(parent / _LOCK, _OPEN | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _claim_orphans(parent: Path) -> list[tuple[Path, int]]:
    """Lock every directory under `parent` whose server is gone (its lock is free)."""
    claimed = []
    with os.scandir(parent) as entries:
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                continue
            path = Path(entry.path)
            try:
                fd = os.open(path / _LOCK, _OPEN)
            except FileNotFoundError:
                continue  # another sweeper is removing it
            except OSError as exc:
                logger.warning("cannot check %s: %s", path, exc)
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)  # its server runs (this process's own included)
                continue
            claimed.append((path, fd))
    return claimed


def _remove(orphans: list[tuple[Path, int]]) -> list[Path]:
    removed = []
    for path, fd in orphans:
        try:
            for mount in _mounts_under(path):
                try:
                    unmount(mount)
                except OSError as exc:
                    logger.warning("could not unmount %s: %s", mount, exc)
            remove_tree(path)
        finally:
            os.close(fd)
        if not path.exists():
            logger.info("removed %s, left by a server that is gone", path)
            removed.append(path)
    return removed


def _mounts_under(path: Path) -> list[Path]:
    """Mount points at or below `path` in this mount namespace, deepest first."""
    found = []
    prefix = os.path.join(os.path.realpath(path), "")
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as table:
        for line in table:
            point = _unescape(line.split(" ", 5)[4])
            if os.path.join(point, "").startswith(prefix):
                found.append(Path(point))
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def _unescape(field: str) -> str:
    # mountinfo writes space, tab, newline and backslash in a path as octal escapes.
    for code in ("\\040", "\\011", "\\012", "\\134"):
        field = field.replace(code, chr(int(code[1:], 8)))
    return field


def _tidy(own: Path) -> None:
    """At a normal exit: remove this process's directory if nothing is left in it. What is
    left (its workspaces are removed as episodes close) the next server's sweep removes."""
    with contextlib.suppress(OSError):
        if os.listdir(own) == [_LOCK]:  # never unlock a directory with content: no sweep would take it
            (own / _LOCK).unlink()
            own.rmdir()
