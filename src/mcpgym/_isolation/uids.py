"""Sandbox uids, claimed host-wide: no two sandboxes on one host share a uid.

Layer: OS plumbing, imports nothing from the package. A root server gives each sandbox a
uid of its own (1 000 000 + n): that is what makes RLIMIT_NPROC count per sandbox and stops
sandboxes signalling one another. Every server process counts from the same base, so a
process-local counter is not enough (two replicas on one node would hand out the same uids):
a uid is claimed by an exclusive `flock` on `<lock dir>/<uid>`, held open until released
(or until the process dies, when the kernel drops the lock), and a uid that still runs
processes (left by a server that died) is skipped.

Finding those processes means reading every entry of /proc (0.3 ms with ~100 processes), so
uids are claimed `_BATCH` at a time with one scan, and handed out from that reserve: a reserved
uid stays locked, so nothing can start under it meanwhile. A uid is never reused by the same
process: kernel state keyed by uid (keyrings, message-queue quotas) must not carry anything
from one submission to the next.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import itertools
import os
import tempfile
import threading
from collections import deque
from pathlib import Path

_BASE, _SPAN = 1_000_000, 1_000_000
_NEXT = itertools.count()
_BATCH = 8
_HELD: dict[int, tuple[int, Path]] = {}  # uid -> the descriptor holding its lock, and its path
_RESERVE: deque[int] = deque()  # held, checked free, not handed out yet
_LOCK = threading.Lock()  # event loops in several threads claim too
_OWNER = os.getpid()  # the process the reserve is of


def claim() -> int:
    """A uid no sandbox on this host uses; hold it until `release(uid)`."""
    global _OWNER
    with _LOCK:
        if os.getpid() != _OWNER:  # a forked child: the reserve it copied is its parent's to hand out
            for uid in _RESERVE:
                os.close(_HELD.pop(uid)[0])  # a copy: the parent's descriptor keeps the lock
            _RESERVE.clear()
            _OWNER = os.getpid()
        if not _RESERVE:
            _reserve(_BATCH)
        return _RESERVE.popleft()


def _reserve(count: int) -> None:
    """Lock `count` uids that no other process holds, then keep those that run no process."""
    directory = _lock_directory()
    locked: dict[int, tuple[int, Path]] = {}
    for _ in range(_SPAN):
        if len(locked) == count:
            running = _uids_running()
            for uid in set(locked) & running:
                os.close(locked.pop(uid)[0])  # still in use: not ours to unlink
            if len(locked) == count:
                break
        uid = _BASE + next(_NEXT) % _SPAN
        if uid in _HELD or uid in locked:
            continue
        path = directory / str(uid)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)  # another server process holds it
            continue
        if not _still_linked(fd, path):
            os.close(fd)  # released (and unlinked) while we opened it
            continue
        locked[uid] = (fd, path)
    else:
        for fd, _ in locked.values():
            os.close(fd)
        raise RuntimeError(f"every sandbox uid from {_BASE} to {_BASE + _SPAN - 1} is in use")
    _HELD.update(locked)
    _RESERVE.extend(sorted(locked))


@atexit.register
def _release_reserve() -> None:
    """Unlink the lock files of uids reserved but never handed out (the kernel drops the locks).
    Not in a forked child: its copy of the reserve is its parent's, whose locks hold on."""
    if os.getpid() != _OWNER:
        return
    with _LOCK:
        while _RESERVE:
            release(_RESERVE.popleft())


def release(uid: int) -> None:
    """Give `uid` back (once nothing of it runs any more). Unknown uids are ignored."""
    held = _HELD.pop(uid, None)
    if held is not None:
        fd, path = held
        # Unlinked while still locked, so no lock file is left per uid. Whoever opened the old
        # file meanwhile finds it unlinked once it has the lock (`_still_linked`) and moves on.
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        os.close(fd)


def _still_linked(fd: int, path: Path) -> bool:
    """The locked file is the one `path` names now (not one a releaser unlinked meanwhile)."""
    try:
        named = path.stat(follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


LOCK_DIRECTORY_VARIABLE = "MCPGYM_UID_LOCK_DIR"
"""Names the lock directory instead (tests: their claims and lock files stay out of the host's)."""


def _lock_directory() -> Path:
    override = os.environ.get(LOCK_DIRECTORY_VARIABLE)
    candidates = [Path(override)] if override else [Path("/run/mcpgym/uid"), Path(tempfile.gettempdir()) / "mcpgym-uid"]
    for directory in candidates:
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            continue
        info = directory.lstat()
        if info.st_uid == os.geteuid() and not info.st_mode & 0o022:  # nobody else can plant locks there
            return directory
    raise RuntimeError(f"no private directory for uid locks: {', '.join(map(str, candidates))} unusable")


def _uids_running() -> set[int]:
    """The uids of every process (as /proc shows each one's owner)."""
    found = set()
    with os.scandir("/proc") as entries:
        for entry in entries:
            if entry.name.isdigit():
                try:
                    found.add(entry.stat(follow_symlinks=False).st_uid)
                except FileNotFoundError:
                    continue  # exited while we looked
    return found
