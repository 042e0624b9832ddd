"""The grader that runs inside the sandbox: a zygote that forks one trial per submission.

Layer: sandbox side. Stdlib only, never imported by the server: its source (after `_confine.py`
and `_trial.py`, whose names it uses) is handed to a fresh interpreter (`python -I -S -c SOURCE
CONFIG`) inside the same namespaces as a worker. Config (JSON): `{"limits": {...}, "cwd": str,
"spare": bool}`. With `spare` (a zygote that serves many submissions) it keeps one trial forked
ahead while idle, already in its namespaces with the solution's process forked (see `_trial.py`):
a submission then costs one pipe write to start instead of two forks.

The zygote itself runs no user code and never sees task data: a request names only a uid and a
private directory holding the submission's files (see `_trial.py`). With `CAP_SYS_ADMIN` (a root
server) each child is forked as the init of a new pid namespace: when it exits, the kernel has
killed and reaped everything the submission started, so the answer follows its `waitpid`, and a
timeout is one SIGKILL. Without it, as before: a reaper with the submission's uid SIGKILLs what
that uid still runs (`kill(-1)`, repeated) and removes its SysV IPC objects; without a uid per
submission the server kills the zygote's whole namespace after its one answer.

Protocol: first line out `isolated=0|1` (per-submission namespaces or not); then one JSON request
per line on stdin, `{"id": int, "uid": int | null, "dir": str}`, and one answer per line on stdout,
`<id> <status>`, where status is `passed`, `failed <BuiltinExceptionName>`, `partial <n>/<m>` or
`exited` (each optionally followed by ` !signal,...`), `timeout` or `crashed`; and `spare` each
time a trial has been forked ahead.
"""

import builtins
import ctypes
import fcntl
import gc
import json
import math
import os
import re
import resource
import select
import signal
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcpgym.servers.coding._sandboxed.confine import (
        CLONE_NEWPID,
        block_user_namespaces,
        close_from,
        hide_other_uids,
        hold_imports,
        private_root,
        setns,
        unshare,
    )
    from mcpgym.servers.coding._sandboxed.trial import OBSERVED, REQUEST_FD, VERDICT_FD, drop_to, trial

# Imported once here so children do not pay for them (typing alone is ~10 ms with -S). The
# zygote never runs user code; `random` is reseeded in every solution process.
for _module in ("bisect", "collections", "functools", "hashlib", "heapq", "itertools", "random", "string", "typing"):
    __import__(_module)

_VERDICT = re.compile(rb"(passed|failed [A-Za-z_]{1,64}|partial \d{1,9}/\d{1,9}|exited)( ![a-z_,]{1,200})?")
_SIGNALS = {"solution_exited", "non_plain_return", "malformed_reply", *OBSERVED}


def _checked(data: bytes) -> str:
    """The test process's verdict if it is one of the fixed vocabulary (defence in depth: the
    test process runs no submitted code, but a verdict is text that leaves the sandbox)."""
    match = _VERDICT.fullmatch(data.split(b"\n")[0])
    if match is None:
        return "crashed"
    verdict = match.group(1).decode()
    name = verdict.removeprefix("failed ")
    named = getattr(builtins, name, None)
    if name != verdict and not (isinstance(named, type) and issubclass(named, BaseException)):
        verdict = "failed Exception"  # not a builtin name: it could carry text out
    signals = sorted(set((match.group(2) or b" !").decode()[2:].split(",")) & _SIGNALS)
    return verdict + (f" !{','.join(signals)}" if signals else "")


def _child(request_fd: int, verdict_fd: int, limits: dict[str, int], isolated: bool) -> None:
    """In the forked child: detach from the zygote, then run a trial (which waits for its
    submission on `REQUEST_FD`). Never returns."""
    try:
        os.setsid()  # its own process group, which the zygote kills on a timeout (without namespaces)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        # Above every fixed number first, so placing one cannot close the other.
        request_fd, verdict_fd = (fcntl.fcntl(fd, fcntl.F_DUPFD, 16) for fd in (request_fd, verdict_fd))
        os.dup2(verdict_fd, VERDICT_FD)
        os.dup2(request_fd, REQUEST_FD)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        # Nothing of the zygote (its request/answer pipes, other children's pipes) stays reachable.
        close_from(REQUEST_FD + 1)
        trial(limits, isolated)
    finally:
        os._exit(0)


def _sysv_ipc_of(uid: int) -> list[tuple[str, int]]:
    """SysV IPC objects created by `uid`: they outlive their processes in the shared IPC namespace."""
    found = []
    for kind in ("shm", "msg", "sem"):
        try:
            with open(f"/proc/sysvipc/{kind}") as table:
                header, *rows = (line.split() for line in table)
        except OSError:
            continue  # no SysV IPC in this kernel
        for row in rows:
            if int(row[header.index("cuid")]) == uid:
                found.append((kind, int(row[1])))
    return found


def _processes_of(uid: int) -> list[int]:
    """Pids (zombies included) whose real uid is `uid`, in this pid namespace's /proc."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/status", "rb") as status:
                    text = status.read()
            except OSError:
                continue  # exited while we looked
            line = text[text.index(b"\nUid:") + 5 :].split(None, 1)[0]
            if int(line) == uid:
                found.append(int(name))
    return found


def _reap(uid: int) -> None:
    """In a forked reaper running as `uid`: kill every process of that uid, drop its IPC objects."""
    try:
        drop_to(uid)
        me = os.getpid()
        deadline = time.monotonic() + 5
        # kill(-1) reaches every process this uid may signal: exactly its own (daemons and
        # setsid() escapes included). Repeated until none is left, reaped zombies included,
        # so the answer means the tree is gone.
        while time.monotonic() < deadline:
            os.kill(-1, signal.SIGKILL)
            if _processes_of(uid) == [me]:
                break
            os.sched_yield()
        libc = ctypes.CDLL(None, use_errno=True)
        for kind, ident in _sysv_ipc_of(uid):
            if kind == "sem":
                libc.semctl(ident, 0, 0)  # IPC_RMID
            else:
                getattr(libc, f"{kind}ctl")(ident, 0, None)  # IPC_RMID
    finally:
        os._exit(0)


def _kill_group(pid: int) -> None:
    """Kill the process group a child leads (or the child, if it died before its setsid())."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
            return
        except ProcessLookupError:
            continue


@dataclass
class _Spare:
    """A trial forked ahead of need, waiting for its one request (see `_trial.trial`)."""

    pid: int
    request_fd: int  # the write end of its request pipe
    verdict_fd: int  # the read end of its verdict pipe
    isolated: bool


@dataclass
class _Job:
    """One submission: answered once its child is gone and (with a uid) its reaper is done."""

    request: dict[str, Any]
    verdict_fd: int
    deadline: float
    isolated: bool
    verdict: str | None = None
    reaper: int | None = None
    reaped: bool = False


class Zygote:
    """The fork server: requests in, children out, answers when a child and its uid are gone."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.limits: dict[str, int] = config["limits"]
        # A zygote that serves many submissions keeps one trial forked ahead, so a submission
        # does not wait for two forks and a namespace; one started per submission has no use for it.
        self.keep_spare: bool = config.get("spare", False)
        self.spare: _Spare | None = None
        self.requests = os.dup(0)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.set_blocking(self.requests, False)
        self.buffer = b""
        self.children: dict[int, _Job] = {}
        self.reapers: dict[int, _Job] = {}
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.wake = wake_r
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # only to wake select() via the fd
        signal.set_wakeup_fd(wake_w)
        os.chdir(config["cwd"])
        self.pid_namespace = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        self.isolated = self._fork_into_namespace()
        if self.isolated:
            self._back_to_own_namespace()
            # Concurrent submissions see this /proc: each its own uid's processes only, or one could
            # read what another writes in its /proc files (a process name, say).
            hide_other_uids("/proc")
        print(f"isolated={int(self.isolated)}", flush=True)  # the first line the server reads

    def _fork_into_namespace(self) -> bool:
        """Make the next fork the init of a new pid namespace (CAP_SYS_ADMIN); False if we may not."""
        try:
            unshare(CLONE_NEWPID)
        except OSError:
            return False
        return True

    def _back_to_own_namespace(self) -> None:
        setns(self.pid_namespace, CLONE_NEWPID)  # children after that one: ours again (reapers)

    def serve(self) -> None:
        while True:
            if self.keep_spare and self.spare is None and not self.children:
                # Only when idle: forking beside a running submission would slow it on a small machine.
                self.spare = self._fork_trial()
                os.write(1, b"spare\n")
            ready = self._wait()
            if self.requests in ready and not self._read_requests():
                return  # the server closed our stdin: it is gone or done with us
            if self.wake in ready:
                self._drain_wakeups()
            self._collect()
            self._expire()

    def _wait(self) -> list[int]:
        deadline = min((job.deadline for job in self.children.values()), default=math.inf)
        timeout = None if deadline == math.inf else max(0.0, deadline - time.monotonic())
        return select.select([self.requests, self.wake], [], [], timeout)[0]

    def _read_requests(self) -> bool:
        try:
            data = os.read(self.requests, 1 << 20)
        except BlockingIOError:
            return True
        if not data:
            return False
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            self._start(json.loads(line))
        return True

    def _fork_trial(self) -> _Spare:
        request_r, request_w = os.pipe2(os.O_CLOEXEC)
        verdict_r, verdict_w = os.pipe2(os.O_CLOEXEC)
        isolated = self.isolated and self._fork_into_namespace()
        pid = os.fork()
        if pid == 0:
            _child(request_r, verdict_w, self.limits, isolated)
        if isolated:
            self._back_to_own_namespace()
        os.close(request_r)
        os.close(verdict_w)
        os.set_blocking(verdict_r, False)
        return _Spare(pid, request_w, verdict_r, isolated)

    def _start(self, request: dict[str, Any]) -> None:
        for _ in range(2):
            spare, self.spare = self.spare or self._fork_trial(), None
            line = json.dumps({"uid": request["uid"], "dir": request["dir"]}).encode() + b"\n"
            try:
                os.write(spare.request_fd, line)  # under PIPE_BUF, into an empty pipe: whole, never blocks
            except BrokenPipeError:  # it died while spare (not collected yet): another one
                os.close(spare.verdict_fd)
                continue
            finally:
                os.close(spare.request_fd)
            deadline = time.monotonic() + self.limits["timeout"]
            self.children[spare.pid] = _Job(request, spare.verdict_fd, deadline, spare.isolated)
            return
        os.write(1, f"{request['id']} crashed\n".encode())

    def _drain_wakeups(self) -> None:
        try:
            while os.read(self.wake, 4096):
                pass
        except BlockingIOError:
            return

    def _collect(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.spare is not None and pid == self.spare.pid:
                os.close(self.spare.request_fd)  # it died waiting (OOM-killed, say): replaced when idle
                os.close(self.spare.verdict_fd)
                self.spare = None
            elif pid in self.children:
                self._child_done(pid, self.children.pop(pid), status)
            elif pid in self.reapers:
                job = self.reapers.pop(pid)
                job.reaped = True
                self._maybe_answer(job)
            # Any other pid is an orphan of user code (the zygote is pid 1 under `unshare`): reaped.

    def _child_done(self, pid: int, job: _Job, status: int) -> None:
        try:
            data = os.read(job.verdict_fd, 256)
        except BlockingIOError:
            data = b""
        os.close(job.verdict_fd)
        if job.verdict is None:  # not timed out
            job.verdict = _checked(data) if status == 0 else "crashed"
        uid = job.request["uid"]
        if job.isolated:
            pass  # it was its pid namespace's init: the kernel killed and reaped everything in it
        elif uid is None:
            _kill_group(pid)  # what it left in its group (the server then kills the namespace)
        elif job.reaper is None and (_processes_of(uid) or _sysv_ipc_of(uid)):
            # Only a uid with something left needs a reaper: nothing of it can appear later.
            self._spawn_reaper(job)
        self._maybe_answer(job)

    def _spawn_reaper(self, job: _Job) -> None:
        # The zygote holds no CAP_KILL: only the child's own uid may kill what it left behind.
        pid = os.fork()
        if pid == 0:
            _reap(job.request["uid"])
        job.reaper = pid
        self.reapers[pid] = job

    def _maybe_answer(self, job: _Job) -> None:
        if job.verdict is None or (job.reaper is not None and not job.reaped):
            return
        if any(other is job for other in self.children.values()):
            return  # the reaper finished first; the child's exit is still to be collected
        os.write(1, f"{job.request['id']} {job.verdict}\n".encode())

    def _expire(self) -> None:
        now = time.monotonic()
        for pid, job in self.children.items():
            if job.verdict is None and job.deadline <= now:
                job.verdict = "timeout"
                job.deadline = math.inf
                if job.isolated:
                    os.kill(pid, signal.SIGKILL)  # the namespace's init: everything in it dies
                elif job.request["uid"] is None:
                    _kill_group(pid)  # same uid as the zygote; the server then kills the namespace
                else:
                    self._spawn_reaper(job)


def main(config: dict[str, Any]) -> None:
    if "view" in config:  # under `unshare`: the private filesystem bwrap would have built
        private_root(config["view"])
    elif config.get("hold_imports"):
        hold_imports()  # submissions drop to a uid that may not reach the interpreter by path
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    zygote = Zygote(config)
    # Inherited by every child (user namespaces stay blocked for all submitted code); the zygote
    # itself still creates pid namespaces and returns to its own with setns(CLONE_NEWPID).
    block_user_namespaces()
    # Everything imported so far is shared with every child copy-on-write: kept out of the
    # collector's reach, a child's collections do not touch (and so copy) those pages.
    gc.freeze()
    zygote.serve()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
