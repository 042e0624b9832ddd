"""A memory cgroup per episode: memory the kernel counts (memfd, tmpfs pages, every process), and
the exact list of an episode's processes.

Layer: OS plumbing, imports nothing from the package. RLIMIT_AS bounds one process's address
space; it does not see `memfd_create` pages, tmpfs writes or the sum over processes. A memory
cgroup does: past its limit the kernel reclaims, then OOM-kills inside the group only. Its
`cgroup.procs` also lists every process of the episode, whatever they did (`setsid()`, double
forks): what `_process` uses to kill what a `run_python` call left running.

cgroup v1 (`<mount>/memory`, `memory.limit_in_bytes` and `memory.memsw.limit_in_bytes`) or v2
(`memory.max`, `memory.swap.max`), below the server's own cgroup, one directory per server
process (`mcpgym-<pid>`), so groups left by a server killed outright are found and removed
by the next one. Needs a root server with the hierarchy writable; otherwise `detect()` says
why and the sandbox reports it.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import logging
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger("mcpgym.isolation")

_MOUNT = Path("/sys/fs/cgroup")
_NEXT = itertools.count()


@dataclass(frozen=True)
class Hierarchy:
    version: int  # 1 or 2
    parent: Path  # this server process's directory, holding one group per episode

    @property
    def limit_file(self) -> str:
        return "memory.limit_in_bytes" if self.version == 1 else "memory.max"

    def bring_back_thread(self) -> None:
        """Move the calling thread (alone) back into the server's own cgroup (v1; see `Group.join_thread`)."""
        (self.parent.parent / "tasks").write_text(str(threading.get_native_id()))

    def describe(self, limit: int) -> str:
        return f"memory cgroup per episode (v{self.version} {self.limit_file} = {limit} bytes)"


@functools.cache
def detect() -> Hierarchy | str:
    """The hierarchy to use, or why there is none (probed once per process)."""
    if os.geteuid() != 0:
        return "the server is not root"
    problem = "no memory cgroup hierarchy is mounted"
    for version, base, own in _candidates():
        try:
            parent = base / own.lstrip("/") / f"mcpgym-{os.getpid()}"
            _sweep(parent.parent)
            parent.mkdir(exist_ok=True)
            if version == 2:
                (parent.parent / "cgroup.subtree_control").write_text("+memory")
                (parent / "cgroup.subtree_control").write_text("+memory")
            hierarchy = Hierarchy(version, parent)
            Group(hierarchy, 1 << 30).remove()  # can we make, limit and remove one?
            atexit.register(_remove_parent, parent, os.getpid())
            return hierarchy
        except OSError as exc:
            problem = f"cgroup v{version} at {base}: {exc.strerror or exc}"
    return problem


def _remove_parent(parent: Path, pid: int) -> None:
    if os.getpid() == pid:  # not in a forked child
        with contextlib.suppress(OSError):
            parent.rmdir()  # fails while an episode's group is still there: the next server sweeps it


def _candidates() -> list[tuple[int, Path, str]]:
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if "memory" in controllers.split(",") and (_MOUNT / "memory").is_dir():
                found.append((1, _MOUNT / "memory", path))
            elif controllers == "" and "memory" in _read(_MOUNT / "cgroup.controllers").split():
                found.append((2, _MOUNT, path))
    return found


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _sweep(directory: Path) -> None:
    """Remove the groups of servers that are gone (`mcpgym-<pid>` whose pid no longer runs)."""
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            pid = entry.name.removeprefix("mcpgym-")
            if entry.is_dir() and entry.name.startswith("mcpgym-") and pid.isdigit() and not _alive(int(pid)):
                for group in Path(entry.path).iterdir():
                    if group.is_dir():
                        _empty(group)
                with contextlib.suppress(OSError):
                    Path(entry.path).rmdir()


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def _empty(group: Path) -> None:
    """Kill every process in `group` until none is left, then remove it."""
    for _ in range(1000):
        pids = _pids(group)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        os.sched_yield()
    try:
        group.rmdir()
    except OSError as exc:
        logger.warning("could not remove cgroup %s: %s", group, exc)


def _pids(group: Path) -> set[int]:
    """The processes in `group`, never this server itself: on cgroup v1 `cgroup.procs` lists a
    process when any of its threads is in the group, and a `_cradle` thread may still be there."""
    return {int(pid) for pid in _read(group / "cgroup.procs").split()} - {os.getpid()}


class Group:
    """One episode's memory cgroup: processes start in it (forked by a thread already inside,
    `join_thread` and `_cradle`, or moving in before exec, `join_argv`), leave when killed."""

    def __init__(self, hierarchy: Hierarchy, limit: int) -> None:
        self.path = hierarchy.parent / str(next(_NEXT))
        self.path.mkdir()
        try:
            if hierarchy.version == 1:
                # memsw (memory + swap) must never be below the memory limit: set after it.
                (self.path / "memory.limit_in_bytes").write_text(str(limit))
                with contextlib.suppress(FileNotFoundError):  # no swap accounting in this kernel
                    (self.path / "memory.memsw.limit_in_bytes").write_text(str(limit))
            else:
                (self.path / "memory.max").write_text(str(limit))
                with contextlib.suppress(FileNotFoundError):
                    (self.path / "memory.swap.max").write_text("0")
        except OSError:
            self.path.rmdir()
            raise

    def join_argv(self, argv: list[str]) -> list[str]:
        """`argv` run so that it is in this group before it starts (`0` moves the writer itself)."""
        return ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', str(self.path / "cgroup.procs"), *argv]

    def join_thread(self) -> None:
        """Move the calling thread (alone) into this group: cgroup v1 only, where a thread may be in
        another memory cgroup than its process. What it forks from then on is born in the group."""
        (self.path / "tasks").write_text(str(threading.get_native_id()))

    def holds_this_server(self) -> bool:
        """Whether a thread of this server process is in the group (`pids()` leaves it out)."""
        return str(os.getpid()) in _read(self.path / "cgroup.procs").split()

    def pids(self) -> set[int]:
        return _pids(self.path)

    def kill_all_but(self, keep: set[int]) -> int:
        """SIGKILL every process of the group not in `keep`, until none is left; how many there were."""
        killed: set[int] = set()
        for _ in range(1000):
            extra = self.pids() - keep
            if not extra:
                break
            for pid in extra:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            killed |= extra
            os.sched_yield()
        return len(killed)

    def remove(self) -> None:
        _empty(self.path)
