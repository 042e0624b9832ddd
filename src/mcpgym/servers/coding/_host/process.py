"""One sandboxed worker process: start it, run one request under the limits, kill its tree.

Layer: process plumbing over `_sandbox` (the command line) and `_worker` (the protocol).
Knows nothing of REPL state or grading; `_interpreter` builds on it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import Process

from mcpgym._isolation.cgroups import Group
from mcpgym.servers.coding._host.cradle import Cradle
from mcpgym.servers.coding._host.sandbox import Sandbox
from mcpgym.servers.coding._sandboxed.confine import seccomp_program

_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"}


_STATUS_MAX = 256  # a status line is `ok` or `raised <ExceptionName>`
READY = b"ready\n"  # after \0: the worker's first line, before any user code
_START_TIMEOUT = 120.0  # a start-up queued behind many others is slow, not dead
_STARTING: dict[object, anyio.Semaphore] = {}


def _seccomp_pipe() -> int:
    """A pipe's read end holding the seccomp filter, for `bwrap --seccomp` (it reads to EOF)."""
    read, write = os.pipe()
    try:
        os.write(write, seccomp_program())  # ~130 bytes: under PIPE_BUF, written at once
    finally:
        os.close(write)
    return read


def starting() -> anyio.Semaphore:
    """Concurrent sandbox start-ups per event loop: a queue, so 1,000 resets do not time out their
    first calls (each start-up costs ~12 ms in namespace and interpreter set-up)."""
    loop = anyio.lowlevel.current_token().native_token
    if loop not in _STARTING:
        _STARTING.clear()  # one loop at a time in practice; a closed loop's semaphore is garbage
        _STARTING[loop] = anyio.Semaphore(max(2, os.cpu_count() or 2))
    return _STARTING[loop]


class Ending(Enum):
    """How a request ended."""

    DONE = "done"  # the worker answered; `status` says how the code went
    TIMEOUT = "timeout"
    FLOOD = "flood"
    DIED = "died"


@dataclass
class Execution:
    ending: Ending
    status: str = ""
    output: bytes = b""
    omitted: int = 0
    exit_reason: str = ""


class _Output:
    """The first `cap` bytes of a stream, and a count of the rest."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.kept = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        room = self.cap - len(self.kept)
        if room > 0:
            self.kept += data[:room]
        self.total += len(data)

    def ending(self, ending: Ending, status: str = "") -> Execution:
        return Execution(ending, status, bytes(self.kept), self.total - len(self.kept))


class WorkerProcess:
    """A live worker. `execute()` one request at a time; `kill()` when done (idempotent)."""

    def __init__(self, process: Process, sandbox: Sandbox, group: Group | None) -> None:
        self.process = process
        self.sandbox = sandbox
        self.group = group
        self.baseline: set[int] = set()  # the group's processes before any user code: launcher and worker
        self.paused: set[int] = set()  # stopped between calls (`pause`)
        self.killed = False

    @classmethod
    async def start(
        cls,
        sandbox: Sandbox,
        workspace: Path,
        uid: int | None,
        group: Group | None = None,
        cradle: Cradle | None = None,
        *,
        queued: bool = False,
    ) -> WorkerProcess | Execution:
        """A worker ready for requests, or what it printed before it died. Start-ups are queued
        (`starting()`; `queued`: the caller holds a place already): under load the wait is the
        server's, never charged to a call's limits. In `group` from its first instruction: forked
        there by the thread waiting in `cradle` (the group's, made ahead: `_cradle`), else it
        moves itself in before exec (`Group.join_argv`)."""
        async with contextlib.nullcontext() if queued else starting():
            seccomp = _seccomp_pipe() if sandbox.protections.isolation == "bwrap" else None
            try:
                argv = sandbox.command(workspace, uid, seccomp_fd=seccomp)
                options: dict[str, Any] = {
                    "stdin": subprocess.PIPE,
                    "stdout": subprocess.PIPE,
                    "stderr": subprocess.STDOUT,
                    "cwd": workspace,
                    # The workspace is the one writable, size-bounded place (/tmp is read-only under bwrap).
                    "env": {**_ENV, "TMPDIR": sandbox.workdir(workspace), "HOME": sandbox.workdir(workspace)},
                    "start_new_session": True,  # its own process group, so kill() reaches forked children too
                    "pass_fds": () if seccomp is None else (seccomp,),
                }
                if cradle is not None:
                    process = await cradle.open_process(argv, **options)
                else:
                    process = await anyio.open_process(group.join_argv(argv) if group is not None else argv, **options)
            finally:
                if seccomp is not None:
                    os.close(seccomp)
            worker = cls(process, sandbox, group)
            try:
                failure = await worker._until_ready()
            except BaseException:
                await worker.kill()  # cancelled while it started: nothing of it may stay behind
                raise
        if failure is not None:
            return failure
        if group is not None:
            worker.baseline = group.pids()
        return worker

    async def _until_ready(self) -> Execution | None:
        output = _Output(self.sandbox.limits.output_bytes)
        with anyio.move_on_after(_START_TIMEOUT):
            execution = await self._collect(READY, output)
            if execution.ending is Ending.DONE:
                return None
        await self.kill()
        return Execution(Ending.DIED, output=bytes(output.kept), exit_reason=await self._exit_reason())

    def pause(self) -> None:
        """Stop the sandbox's processes (SIGSTOP; the launcher aside) until `resume()`: between calls
        the interpreter's threads (and, without a cgroup, what the call left running) burn no CPU."""
        if self.group is not None:
            pids = set(self.baseline)
        else:
            pids = {self.process.pid, *_descendants(self.process.pid)}
        if self.sandbox.protections.namespaces:
            pids.discard(self.process.pid)  # bwrap or unshare, outside; without namespaces, the worker itself
        for pid in pids:
            _signal(pid, lambda pid: os.kill(pid, signal.SIGSTOP))
        self.paused = pids

    def resume(self) -> None:
        """Continue what `pause()` stopped (a stopped process cannot exit: the pids are still theirs)."""
        for pid in self.paused:
            _signal(pid, lambda pid: os.kill(pid, signal.SIGCONT))
        self.paused = set()

    def sweep(self) -> int:
        """Kill what the last call left running (background processes, daemons); keep the worker."""
        return self.group.kill_all_but(self.baseline) if self.group is not None else 0

    async def execute(self, code: str) -> Execution:
        try:
            return await self._execute(code)
        except BaseException:
            # Cancelled (or failed) mid-call: the worker may still run this request, and would
            # answer the next one only after it. It is killed; the next call starts a fresh one.
            await self.kill()
            raise

    async def _execute(self, code: str) -> Execution:
        limits = self.sandbox.limits
        token = secrets.token_hex(8)
        output = _Output(limits.output_bytes)
        assert self.process.stdin is not None
        source = code.encode("utf-8", "surrogatepass")  # as JSON carried it: lone surrogates too
        try:
            await self.process.stdin.send(f"{token} {len(source)}\n".encode() + source)  # see _worker.py
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return await self._died(output)
        with anyio.move_on_after(limits.timeout) as scope:
            execution = await self._collect(token.encode(), output)
        if scope.cancelled_caught:
            await self.kill()
            return output.ending(Ending.TIMEOUT)
        if execution.ending is not Ending.DONE:
            await self.kill()
        if execution.ending is Ending.DIED:
            execution.exit_reason = await self._exit_reason()
        return execution

    async def _collect(self, token: bytes, output: _Output) -> Execution:
        marker = b"\0" + token + (b"" if token == READY else b" ")
        keep = len(marker) - 1  # a marker split across reads must still be found
        tail = b""
        assert self.process.stdout is not None
        stream = self.process.stdout
        async for chunk in stream:
            data = tail + chunk
            found = data.find(marker)
            if found >= 0:
                output.add(data[:found])
                if token == READY:
                    return output.ending(Ending.DONE)
                return await self._status_line(data[found + len(marker) :], output)
            output.add(data[: max(len(data) - keep, 0)])
            tail = data[max(len(data) - keep, 0) :]
            if output.total > self.sandbox.limits.flood_bytes:
                return output.ending(Ending.FLOOD)
        return output.ending(Ending.DIED)

    async def _status_line(self, rest: bytes, output: _Output) -> Execution:
        assert self.process.stdout is not None
        while b"\n" not in rest:
            if len(rest) > _STATUS_MAX:
                # User code can read its token: a forged marker and an endless line is a flood.
                return output.ending(Ending.FLOOD)
            try:
                rest += await self.process.stdout.receive()
            except anyio.EndOfStream:
                return output.ending(Ending.DIED)
        # Bytes after the status line come from processes user code left running; dropped.
        return output.ending(Ending.DONE, rest[: rest.index(b"\n")].decode(errors="replace"))

    async def _died(self, output: _Output) -> Execution:
        await self.kill()
        return Execution(Ending.DIED, output=bytes(output.kept), exit_reason=await self._exit_reason())

    async def _exit_reason(self) -> str:
        code = await self.process.wait()
        # bwrap and `unshare --fork` report a child killed by signal N as 128+N.
        signum = -code if code < 0 else code - 128 if code > 128 else 0
        if signum:
            name = signal.Signals(signum).name if signum in signal.Signals._value2member_map_ else str(signum)
            hint = _SIGNAL_HINTS.get(name, "")
            return f"killed by {name}{hint}"
        return f"exited with status {code}"

    async def kill(self) -> None:
        """Kill the worker and everything it started; wait for it. Safe to call twice."""
        if self.killed:
            return
        self.killed = True
        with anyio.CancelScope(shield=True):
            if self.sandbox.protections.namespaces:
                # The child of bwrap / `unshare --fork` is the pid namespace's init. Killing it
                # makes the kernel kill and reap every process in the namespace before the init
                # is reaped, so once the launcher has exited the whole tree is gone.
                for child in _children(self.process.pid):
                    _signal(child, lambda pid: os.kill(pid, signal.SIGKILL))
                with anyio.move_on_after(5):
                    await self.process.wait()
            if not self.sandbox.protections.namespaces or self.process.returncode is None:
                # Without namespaces the worker's process group is the tree (its own session):
                # while any of it lives, the kernel keeps the group's id from being reused. With
                # them, a reaped launcher means the tree is gone and its pid may be another
                # process's by now: only a launcher that did not exit gets its group killed.
                _signal(self.process.pid, lambda pid: os.killpg(pid, signal.SIGKILL))
                await self.process.wait()
            await self.process.aclose()


def _descendants(pid: int) -> list[int]:
    found, stack = [], [pid]
    while stack:
        for child in _children(stack.pop()):
            found.append(child)
            stack.append(child)
    return found


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []  # the launcher already exited


def _signal(pid: int, send: Callable[[int], None]) -> None:
    try:
        send(pid)
    except ProcessLookupError:
        pass  # already gone: nothing left to kill


_SIGNAL_HINTS = {
    "SIGXCPU": " (CPU time limit exceeded)",
    "SIGKILL": " (killed: out of a limit, or by the sandbox)",
    "SIGSEGV": " (segmentation fault)",
    "SIGABRT": " (aborted)",
}
