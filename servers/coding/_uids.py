"""Sandbox uids, claimed host-wide: no two sandboxes on one host share a uid.

Layer: OS plumbing, imports nothing from the package. A root server gives each sandbox a
uid of its own (1 000 000 + n): that is what makes RLIMIT_NPROC count per sandbox and stops
sandboxes signalling one another. Every server process counts from the same base, so a
process-local counter is not enough (two replicas on one node would hand out the same uids):
a uid is claimed by an exclusive `flock` on `<lock dir>/<uid>`, held open until released
(or until the process dies, when the kernel drops the lock), and a uid that still runs
processes (left by a server that died) is skipped.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import tempfile
from pathlib import Path

_BASE, _SPAN = 1_000_000, 1_000_000
_NEXT = itertools.count()
_HELD: dict[int, int] = {}  # uid -> the descriptor holding its lock


def claim() -> int:
    """A uid no sandbox on this host uses; hold it until `release(uid)`."""
    directory = _lock_directory()
    for _ in range(_SPAN):
        uid = _BASE + next(_NEXT) % _SPAN
        if uid in _HELD:
            continue
        fd = os.open(directory / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)  # another server process holds it
            continue
        if _runs_processes(uid):
            os.close(fd)
            continue
        _HELD[uid] = fd
        return uid
    raise RuntimeError(f"every sandbox uid from {_BASE} to {_BASE + _SPAN - 1} is in use")


def release(uid: int) -> None:
    """Give `uid` back (once nothing of it runs any more). Unknown uids are ignored."""
    fd = _HELD.pop(uid, None)
    if fd is not None:
        os.close(fd)


def _lock_directory() -> Path:
    for directory in (Path("/run/mcpgym/uid"), Path(tempfile.gettempdir()) / "mcpgym-uid"):
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            continue
        info = directory.lstat()
        if info.st_uid == os.geteuid() and not info.st_mode & 0o022:  # nobody else can plant locks there
            return directory
    raise RuntimeError("no private directory for uid locks: /run/mcpgym/uid and $TMPDIR/mcpgym-uid are unusable")


def _runs_processes(uid: int) -> bool:
    with os.scandir("/proc") as entries:
        for entry in entries:
            if entry.name.isdigit():
                try:
                    if entry.stat(follow_symlinks=False).st_uid == uid:
                        return True
                except FileNotFoundError:
                    continue  # exited while we looked
    return False
