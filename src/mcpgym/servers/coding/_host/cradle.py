"""Episode memory cgroups made ahead, each with a server thread already inside it that forks the
episode's first worker: the worker is born in its cgroup instead of moving there.

Layer: OS plumbing over `_cgroups` and `_popen`. Moving a process into a cgroup (a write to
`cgroup.procs`, what `Group.join_argv` has a shell do) takes the kernel's cgroup threadgroup
lock for writing, which waits for an RCU grace period unless another move came just before:
6-14 ms of wall time (not CPU) on this project's 2-core machines, which every first `run_python`
paid. A process starts in the cgroup of the *thread* that forks it, and on cgroup v1 one thread
may be in another memory cgroup than the rest of its process. Pages a thread touches are charged
to the cgroup of the process's owner task (the server's), never to the thread's.

So a few forker threads (`STOCK`) each make a group, move in (paying the wait off any call's
path) and offer it as a `Cradle`; the first start of an episode takes a ready one, and the
forker starts the worker (`subprocess.Popen`, handed to the loop as `_popen.PopenProcess`); once
the worker is up (`release()`) it moves back to the server's cgroup and makes the next group (two
moves in a row: one wait). A forker
lives as long as the server: a process started with PR_SET_PDEATHSIG (`bwrap
--die-with-parent`) is killed when the thread that forked it ends, not only its process.

`prepare()` (at reset) starts the forkers; `take()` (at a first start) hands out a ready cradle,
or None (then the group is made on the spot and the worker moves itself in through `join_argv`;
also always on cgroup v2, where a thread cannot be in another memory cgroup than its process).
`close()` (at exit) ends the forkers and removes the groups nobody took; what a killed server
left is swept by the next one (`_cgroups.detect`).
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import Process

from mcpgym._isolation.cgroups import Group, Hierarchy
from mcpgym.servers.coding._host.popen import PopenProcess

logger = logging.getLogger("mcpgym.servers.coding")

STOCK = 2  # forker threads (and so cradles ready at once) per server process and episode limit
_LEAVE_SECONDS = 5.0  # how long an ended thread may take to leave its group (microseconds, in practice)
_SKIP = object()  # `release()`: the cradle's start is over (or never came): the forker moves on

_LOCK = threading.Lock()
_OFFERED = threading.Condition(_LOCK)  # notified when a forker offers a cradle
_FORKERS: dict[tuple[Hierarchy, int], list[_Forker]] = {}
_READY: dict[tuple[Hierarchy, int], list[Cradle]] = {}
_OWNER: list[int] = []  # the pid these are of (a forked child has none of the threads)


class Cradle:
    """One episode's memory cgroup, made ahead, with a forker thread inside it."""

    def __init__(self, forker: _Forker, group: Group) -> None:
        self.group = group
        self._forker = forker
        self.left = threading.Event()
        """The forker is out of the group (gone back to the server's cgroup, or ended)."""
        self._used = False
        self._released = False

    @property
    def forker_id(self) -> int:
        """The native id of the thread that forks in this cradle (it lives as long as the server)."""
        assert self._forker.thread.native_id is not None
        return self._forker.thread.native_id

    async def open_process(self, argv: Sequence[str], **popen: Any) -> Process:
        """`argv` started in the group by the forker (`subprocess.Popen` keywords; stdin and
        stdout piped). Once per cradle, then `release()` it once the process has started."""
        assert not self._used
        self._used = True

        def start() -> subprocess.Popen[bytes]:
            return subprocess.Popen(argv, **popen)

        return PopenProcess(await anyio.to_thread.run_sync(self._forker.run, start))

    def release(self) -> None:
        """The start this cradle was taken for is over (the process runs, or it failed, or it
        never came): the forker leaves the group. Idempotent; every taken cradle needs it."""
        if not self._released:
            self._released = self._used = True
            self._forker.jobs.put(_SKIP)

    async def wait_left(self) -> None:
        """Until the forker is out of the group (before the group can be removed)."""
        if not self.left.is_set():
            await anyio.to_thread.run_sync(self.left.wait)


class _Forker:
    """A server thread that waits in a fresh group to fork one process, then makes the next."""

    def __init__(self, hierarchy: Hierarchy, limit: int, ready: list[Cradle]) -> None:
        self._hierarchy, self._limit, self._ready = hierarchy, limit, ready
        self.jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()  # a start function, _SKIP, or None: end
        self._results: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
        self.cradle: Cradle | None = None  # the group it is in, if any
        self.thread = threading.Thread(target=self._run, name="mcpgym-cgroup-forker", daemon=True)
        self.thread.start()

    def run(self, start: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
        """Have the thread call `start` in its group (blocking: called from a worker thread)."""
        self.jobs.put(start)
        ok, value = self._results.get()
        if not ok:
            raise value
        assert isinstance(value, subprocess.Popen)
        return value

    def _run(self) -> None:
        while True:
            cradle = self.cradle = self._enter()
            if cradle is None:  # no group to offer: wait at home to be ended
                while self.jobs.get() is not None:
                    pass
                return
            with _OFFERED:
                self._ready.append(cradle)
                _OFFERED.notify_all()
            job = self.jobs.get()
            if job is None:  # the server closes: the thread ends, which takes it out of the group
                return
            if job is not _SKIP:  # a start: then wait for release()
                try:
                    self._results.put((True, job()))
                except BaseException as exc:  # handed to the caller, raised there
                    self._results.put((False, exc))
                # Out of the group once the process has started, not while it starts: the move
                # waits for a grace period that slows the forks of its start-up (~1 ms).
                if self.jobs.get() is None:
                    return
            try:  # out of the episode's group: the episode may end any time now
                self._hierarchy.bring_back_thread()
            except OSError as exc:  # then the group cannot be removed; this thread offers no more
                logger.warning("a cgroup forker thread could not leave %s: %s", cradle.group.path, exc)
                cradle.left.set()
                while self.jobs.get() is not None:
                    pass
                return
            self.cradle = None
            cradle.left.set()

    def _enter(self) -> Cradle | None:
        try:
            group = Group(self._hierarchy, self._limit)
        except OSError as exc:
            logger.warning("could not make a cgroup ahead: %s", exc)
            return None
        try:
            group.join_thread()
        except OSError as exc:
            logger.warning("could not move a thread into %s: %s", group.path, exc)
            group.remove()
            return None
        return Cradle(self, group)

    def end(self) -> None:
        """End the thread (blocking) and remove the group it waited in, if nobody took it."""
        self.jobs.put(None)
        self.thread.join()
        cradle = self.cradle
        if cradle is not None:
            # join() returns once Python is done with the thread; the kernel ends it a moment later.
            deadline = time.monotonic() + _LEAVE_SECONDS
            while cradle.group.holds_this_server() and time.monotonic() < deadline:
                os.sched_yield()
            cradle.left.set()
            if not cradle._used:
                cradle.group.remove()


def prepare(hierarchy: Hierarchy, limit: int) -> None:
    """Start the forkers for episodes of `limit` bytes, if not yet (cgroup v1 only)."""
    if hierarchy.version != 1:
        return
    with _LOCK:
        if _OWNER != [os.getpid()]:  # first use, or a forked child: the parent's threads are not here
            _FORKERS.clear()
            _READY.clear()
            _OWNER[:] = [os.getpid()]
            atexit.register(close)
        forkers = _FORKERS.setdefault((hierarchy, limit), [])
        ready = _READY.setdefault((hierarchy, limit), [])
        while len(forkers) < STOCK:
            forkers.append(_Forker(hierarchy, limit, ready))


def take(hierarchy: Hierarchy, limit: int) -> Cradle | None:
    """A ready cradle for an episode of `limit` bytes, or None (none made, or all in use)."""
    with _LOCK:
        if _OWNER != [os.getpid()]:
            return None
        ready = _READY.get((hierarchy, limit))
        return ready.pop(0) if ready else None


def wait_ready(hierarchy: Hierarchy, limit: int, timeout: float) -> bool:
    """Block until a cradle is ready for an episode of `limit` bytes (tests, benchmarks)."""
    with _OFFERED:
        return _OFFERED.wait_for(lambda: bool(_READY.get((hierarchy, limit))), timeout)


def close() -> None:
    """End the forkers and remove the groups nobody took (at exit; tests). A worker a forker
    started dies with it (`--die-with-parent`): call it once no episode runs."""
    with _LOCK:
        if _OWNER != [os.getpid()]:
            return
        forkers = [forker for group in _FORKERS.values() for forker in group]
        _FORKERS.clear()
        _READY.clear()
    for forker in forkers:
        try:
            forker.end()
        except OSError as exc:
            logger.warning("could not remove a cgroup made ahead: %s", exc)
