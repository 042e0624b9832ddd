"""Grading submissions on a sandboxed grader zygote (`_zygote.py`), one per sandbox.

Layer: process plumbing over `_sandbox` (the command line) and `_zygote` (the protocol).

When the server is root (each submission gets a uid of its own) one long-lived zygote per
sandbox and event loop forks a child per submission: no namespace set-up and no interpreter
start-up per submission, and the per-uid reaper makes the process-tree kill exact. It is
started on first use and restarted when it dies (a submission in flight when it died is
retried once on the new one). Without a uid per submission, children could signal one
another, so every submission gets a fresh zygote in fresh namespaces instead, killed after
its one answer (the slower, equally strict path).

Every submission gets a private directory, created here (0700, owned by its uid) under a
directory only the zygote can list, and removed after the answer.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import tempfile
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.lowlevel

from mcpgym._isolation.cgroups import Group
from mcpgym.servers.coding._host import scratch as scratch
from mcpgym.servers.coding._host.process import _children, _signal
from mcpgym.servers.coding._host.sandbox import Limits, Sandbox
from mcpgym.servers.coding._host.workspace import make_shared, mount_tmpfs, remove_tree, unmount

_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"}
_GRACE = 5.0  # seconds past the zygote's own timeout before the server gives up on it
_IDS = itertools.count()
_SOLUTION_KEYS = ("code", "entry_point")  # what the solution's process gets; the rest is the test process's


@dataclass
class _Zygote:
    """One running zygote process, bound to the event loop that started it."""

    process: subprocess.Popen[bytes]
    root: Path  # host directory holding the per-submission directories
    inside: str  # the same directory as seen in the sandbox
    loop: object
    group: Group | None
    pending: dict[int, anyio.Event] = field(default_factory=dict)
    answers: dict[int, str] = field(default_factory=dict)
    buffer: bytes = b""
    reading: bool = False
    dead: bool = False
    isolated: bool | None = None  # each submission in its own pid and IPC namespaces
    spares: int = 0  # trials the zygote has forked ahead, as far as read (each is used by one submission)

    @classmethod
    def start(cls, sandbox: Sandbox, loop: object) -> _Zygote:
        root = Path(tempfile.mkdtemp(prefix="grade-", dir=scratch.directory()))
        if sandbox.protections.workspace_quota:
            # What submissions write is bounded in total (shared by the zygote's concurrent children).
            limits = sandbox.limits
            mount_tmpfs(root, (limits.workspace_bytes, limits.workspace_files), "mode=0711")
            make_shared(root)  # each submission's own tmpfs, mounted below later, shows in the sandbox
        root.chmod(0o711)  # children may enter their own directory, never list the others
        argv = sandbox.command(root, None, program="zygote")
        hierarchy = sandbox.protections.cgroups
        # All gradings of a sandbox share one memory cgroup (memfd and tmpfs pages counted): room
        # for one full episode's memory per core; past it the kernel OOM-kills the largest.
        group = None if hierarchy is None else Group(hierarchy, grading_memory(sandbox.limits))
        process = subprocess.Popen(
            argv if group is None else group.join_argv(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=root,
            env=_ENV,
            start_new_session=True,
        )
        assert process.stdin is not None and process.stdout is not None
        os.set_blocking(process.stdin.fileno(), False)
        os.set_blocking(process.stdout.fileno(), False)
        inside = sandbox.workdir(root)
        return cls(process, root, inside, loop, group)

    async def ask(self, request: dict[str, object]) -> str:
        """Send one request and wait for its answer (`crashed` if the zygote dies first)."""
        ident = next(_IDS)
        self.pending[ident] = anyio.Event()
        try:
            self._send(json.dumps({**request, "id": ident}).encode() + b"\n")
            while ident not in self.answers and not self.dead:
                if self.reading:
                    await self.pending[ident].wait()  # set when the reader stops: answered, or take over
                    self.pending[ident] = anyio.Event()
                else:
                    await self._read()
            return self.answers.pop(ident, "crashed")
        finally:
            self.pending.pop(ident, None)

    def _send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        # A short line (under PIPE_BUF) is written whole or not at all. A pipe full of unread
        # requests means the zygote is stuck: it is treated as dead, then replaced.
        try:
            os.write(self.process.stdin.fileno(), line)
        except OSError:  # BlockingIOError, BrokenPipeError
            self.dead = True

    async def _read(self) -> None:
        """Read what answers are there (one task reads at a time; the others wait on their event)."""
        assert self.process.stdout is not None
        self.reading = True
        try:
            await anyio.wait_readable(self.process.stdout.fileno())
            try:
                data = os.read(self.process.stdout.fileno(), 1 << 16)
            except BlockingIOError:
                return
            if not data:
                self.dead = True
            self.buffer += data
            *lines, self.buffer = self.buffer.split(b"\n")
            for line in lines:
                ident, _, status = line.decode(errors="replace").partition(" ")
                if ident.startswith("isolated="):  # the zygote's first line: can it isolate each submission?
                    self.isolated = ident == "isolated=1"
                elif ident == "spare":
                    self.spares += 1
                elif int(ident) in self.pending:  # else its submission was cancelled: nobody waits
                    self.answers[int(ident)] = status
        finally:
            self.reading = False
            if self.dead:
                self.process.stdout.close()  # kill() leaves it to the reader, who may wait on it
            for event in self.pending.values():
                event.set()  # answered, or someone else must take over reading

    def kill(self) -> None:
        """Kill the zygote, its namespace and every child; remove its directories."""
        if self.process.poll() is None:
            for child in _children(self.process.pid):  # the pid namespace's init: the kernel kills the rest
                _signal(child, lambda pid: os.kill(pid, signal.SIGKILL))
            _signal(self.process.pid, lambda pid: os.killpg(pid, signal.SIGKILL))
            self.process.wait()
        if self.group is not None:
            self.group.remove()
            self.group = None
        self.dead = True
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        if not self.reading:  # a reader waits on stdout: it sees EOF (the zygote is dead) and closes it
            self.process.stdout.close()
        remove_tree(self.root)


def grading_memory(limits: Limits) -> int:
    """The memory cgroup limit of a sandbox's grader: one episode's worth per core."""
    return limits.episode_memory_bytes * max(2, os.cpu_count() or 2)


def _write_request(directory: Path, request: dict[str, object], uid: int | None, sandbox: Sandbox) -> None:
    """`solution.json` and `tests.json` (0400, the zygote's: read and unlinked before any submitted
    code runs) and `work/`, the solution's only writable directory: its uid's, and a tmpfs of its
    own (`workspace_bytes`) when the server may mount, so no submission can fill another's space."""
    if uid is not None:  # only the submission's uid (its group) may pass: no other reaches its `work/`
        os.chown(directory, 0, uid)
        directory.chmod(0o710)
    else:
        directory.chmod(0o711)
    for name, body in (
        ("solution.json", {key: request[key] for key in _SOLUTION_KEYS}),
        ("tests.json", {key: value for key, value in request.items() if key != "code"}),
    ):
        fd = os.open(directory / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o400)
        with os.fdopen(fd, "w") as file:
            json.dump(body, file)
    work = directory / "work"
    work.mkdir(mode=0o700)
    owner = uid if uid is not None else os.geteuid()
    if sandbox.protections.workspace_quota:
        limits = sandbox.limits
        mount_tmpfs(work, (limits.workspace_bytes, limits.workspace_files), f"mode=0700,uid={owner},gid={owner}")
    elif uid is not None:
        os.chown(work, uid, uid)


def _remove_request(directory: Path) -> None:
    if not directory.exists():
        return  # a zygote of its own (non-root server) was killed and its directory removed with it
    work = directory / "work"
    if os.path.ismount(work):
        unmount(work)  # lazily: what still holds it (nothing, once the answer is in) cannot pin it
    remove_tree(directory)


class Grader:
    """Runs graded requests for one sandbox; see the module docstring.

    It holds no reference to its sandbox (each call passes it): the sandbox owns the grader,
    and the zygote is killed when the sandbox is collected or the process exits."""

    def __init__(self) -> None:
        self._zygote: _Zygote | None = None
        self._starting: tuple[object, anyio.Event] | None = None

    async def run(self, sandbox: Sandbox, request: dict[str, object]) -> str:
        """The zygote's status line for one submission: passed, failed X, partial n/m, timeout or crashed."""
        for _ in range(2):  # a zygote that died under a submission gets one retry on a fresh one
            status = await self._attempt(sandbox, request)
            if status != "lost":
                return status
        return "crashed"

    async def _attempt(self, sandbox: Sandbox, request: dict[str, object]) -> str:
        uid = sandbox.new_uid()
        try:
            return await self._attempt_as(sandbox, request, uid)
        finally:
            sandbox.release_uid(uid)  # answered (or its zygote killed): nothing of the uid runs

    async def _attempt_as(self, sandbox: Sandbox, request: dict[str, object], uid: int | None) -> str:
        shared = uid is not None  # a uid per submission: children cannot touch one another
        loop = anyio.lowlevel.current_token().native_token
        if shared:
            zygote = await self._current(sandbox, loop)
        else:
            zygote = await anyio.to_thread.run_sync(_Zygote.start, sandbox, loop)
        directory = Path(tempfile.mkdtemp(dir=zygote.root))
        try:
            # The submission reaches its child as files in its private directory, never through
            # the zygote, so no child forked later can find it in the zygote's memory. The tests
            # are for the test process alone (read, then unlinked, before the solution starts).
            _write_request(directory, request, uid, sandbox)
            inside = f"{zygote.inside}/{directory.name}"
            with anyio.move_on_after(sandbox.limits.timeout + _GRACE) as scope:
                status = await zygote.ask({"uid": uid, "dir": inside})
            if scope.cancelled_caught:
                zygote.kill()  # unresponsive: it is replaced on the next submission
                return "timeout"
            return "lost" if status == "crashed" and zygote.dead else status
        finally:
            with anyio.CancelScope(shield=True):
                if not shared:
                    await anyio.to_thread.run_sync(zygote.kill)  # its namespace, so no tree survives
                # As deep as the submission made it; unmounting waits for an RCU grace period: a thread.
                await anyio.to_thread.run_sync(_remove_request, directory)

    async def _current(self, sandbox: Sandbox, loop: object) -> _Zygote:
        """The live zygote of this event loop, (re)started if needed (by one task; the others wait)."""
        while self._starting is not None and self._starting[0] is loop:
            await self._starting[1].wait()
        zygote = self._zygote
        if zygote is not None and (zygote.dead or zygote.loop is not loop or zygote.process.poll() is not None):
            zygote.kill()
            zygote = self._zygote = None
        if zygote is None:
            started = anyio.Event()
            self._starting = (loop, started)
            try:
                # In a thread: spawning from a large server process blocks for a noticeable time.
                zygote = self._zygote = await anyio.to_thread.run_sync(_Zygote.start, sandbox, loop)
            finally:
                self._starting = None
                started.set()
        return zygote

    def close(self) -> None:
        """Kill the zygote, if one runs (the next submission starts another)."""
        if self._zygote is not None:
            self._zygote.kill()
            self._zygote = None


_GRADERS: weakref.WeakKeyDictionary[Sandbox, Grader] = weakref.WeakKeyDictionary()


def grader(sandbox: Sandbox) -> Grader:
    """The grader of `sandbox` (one per sandbox, so one zygote per sandbox and event loop)."""
    if sandbox not in _GRADERS:
        made = _GRADERS[sandbox] = Grader()
        weakref.finalize(sandbox, made.close)  # also runs at exit: no zygote outlives its sandbox
    return _GRADERS[sandbox]
