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
import errno
import fcntl
import logging
import os
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from mcpgym.servers.coding._host.workspace import remove_tree, unmount

logger = logging.getLogger("mcpgym.servers.coding")

_LOCK = ".lock"
_OPEN = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC
_guard = threading.Lock()
_own: tuple[int, Path] | None = None  # (pid, directory): a forked child makes its own
_held: list[int] = []  # lock descriptors kept open for the life of the process
_fallback: Path | None = None  # a private parent, when the shared one is not safe to use


def directory() -> Path:
    """This process's own directory, made (after `sweep()`) the first time it is asked for."""
    global _own
    with _guard:
        if _own is None or _own[0] != os.getpid():
            _own = (os.getpid(), _create(base()))
        return _own[1]


def base() -> Path:
    """The parent of every server's directory: one per user, private to that user.

    In a shared `/tmp` anyone may create the name first: a directory that is not ours alone is
    never used. Then this process works in a private directory of its own instead (said in a
    warning), and cleaning up after dead servers is off for it.
    """
    global _fallback
    path = Path(tempfile.gettempdir()) / f"mcpgym-coding-{os.geteuid()}"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    info = path.lstat()
    if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o022:
        if stat.S_IMODE(info.st_mode) != 0o711:
            path.chmod(0o711)  # sandboxes pass through to their workspace, never list; whatever the umask
        return path
    if _fallback is None:
        _fallback = Path(tempfile.mkdtemp(prefix="mcpgym-coding-"))
        _fallback.chmod(0o711)
        logger.warning(
            "%s is not a directory that only this user can change: working in %s instead; workspaces of "
            "a server killed outright are not cleaned up until %s is removed",
            path,
            _fallback,
            path,
        )
    return _fallback


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
    atexit.register(_tidy, own, os.getpid())
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
                # Its lock goes last (`_remove`) and is made under the parent's lock that we
                # hold: this is an empty directory on its way out, or one whose server died
                # making it. Only an empty one is removed.
                with contextlib.suppress(OSError):
                    path.rmdir()
                continue
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
            # Everything but the lock first: a removal that stops halfway leaves a directory
            # the next sweep still recognises as an orphan.
            with os.scandir(path) as listing:
                entries = [entry for entry in listing if entry.name != _LOCK]
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    remove_tree(Path(entry.path))  # logs what it cannot remove
                else:
                    os.unlink(entry.path)
            if os.listdir(path) != [_LOCK]:
                raise OSError(errno.ENOTEMPTY, "some of it is still there")
            (path / _LOCK).unlink()
            path.rmdir()
        except Exception as exc:  # one orphan that cannot go must not keep the others (or us) from starting
            logger.warning("could not remove %s, left by a server that is gone: %s", path, exc)
        else:
            logger.info("removed %s, left by a server that is gone", path)
            removed.append(path)
        finally:
            os.close(fd)
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


def _tidy(own: Path, pid: int) -> None:
    """At a normal exit: remove this process's directory if nothing is left in it. What is
    left (its workspaces are removed as episodes close) the next server's sweep removes."""
    if os.getpid() != pid:
        return  # a forked child inherits the hook, not the directory: its parent may still use it
    with contextlib.suppress(OSError):
        if os.listdir(own) == [_LOCK]:  # never unlock a directory with content: no sweep would take it
            (own / _LOCK).unlink()
            own.rmdir()
