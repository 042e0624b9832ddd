"""The per-episode Python REPL and the grader, both on sandboxed worker processes.

Layer: episode-facing execution over `_process`. `Interpreter` keeps one worker alive across
calls (variables survive, like a REPL) and replaces it when it dies, saying the state was
lost. `grade()` runs a submission against hidden tests on the sandbox's grader (`_grader`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import anyio

from mcpgym._isolation.cgroups import Group
from mcpgym.servers.coding import _hacks as hacks
from mcpgym.servers.coding._host import cradle as _cradle
from mcpgym.servers.coding._host.grader import grader
from mcpgym.servers.coding._host.process import Ending, Execution, WorkerProcess, starting
from mcpgym.servers.coding._host.sandbox import Sandbox
from mcpgym.servers.coding._tasks import Task

STATE_LOST = "variables, imports and definitions from earlier calls are gone"


@dataclass(frozen=True)
class Reply:
    """What one `run_python` call shows the agent."""

    text: str
    is_error: bool


class Interpreter:
    """A persistent sandboxed interpreter working in `workspace` (started on first use). With
    `cgroup` (and a machine that has them) its processes are in a memory cgroup of the episode's
    own, taken ready-made (`_cradle`) at the first start and removed by `close()`."""

    def __init__(self, sandbox: Sandbox, workspace: Path, uid: int | None, *, cgroup: bool = False) -> None:
        self.sandbox = sandbox
        self.workspace = workspace
        self.uid = uid
        hierarchy = sandbox.protections.cgroups if cgroup else None
        self._cgroup = None if hierarchy is None else (hierarchy, sandbox.limits.episode_memory_bytes)
        self.group: Group | None = None  # the episode's memory cgroup, from the first start on
        self._cradle: _cradle.Cradle | None = None  # where it was made ahead, if it was
        self._worker: WorkerProcess | None = None
        self._restarted = False  # a worker died: tell the agent on the next call

    async def run(self, code: str) -> Reply:
        notice = ""
        if self._worker is None or self._worker.killed:
            if self._restarted:
                notice = f"[note: this is a fresh interpreter; {STATE_LOST}]\n"
                self._restarted = False
            started = await self._start()
            if isinstance(started, Execution):  # died starting: say what it printed
                return _reply(started, notice, self.sandbox)
            self._worker = started
        self._worker.resume()
        try:
            execution = await self._worker.execute(code)
        except BaseException:
            self._restarted = True  # cancelled: the worker was killed with the call
            raise
        if execution.ending is not Ending.DONE:
            self._restarted = True
        else:
            self._worker.sweep()  # the call is over: so is everything it started
            self._worker.pause()  # and its threads wait for the next call, stopped
        return _reply(execution, notice, self.sandbox)

    async def _start(self) -> WorkerProcess | Execution:
        async with starting():  # a place in the start-up queue first: it bounds the cradles taken
            cradle = None
            if self._cgroup is not None and self.group is None:  # the first start: the episode's group
                cradle = self._cradle = _cradle.take(*self._cgroup)
                self.group = Group(*self._cgroup) if cradle is None else cradle.group
            try:
                return await WorkerProcess.start(
                    self.sandbox, self.workspace, self.uid, self.group, cradle, queued=True
                )
            finally:
                if cradle is not None:
                    cradle.release()  # not used (it failed before): its forker leaves the group all the same

    async def close(self) -> None:
        if self._worker is not None:
            await self._worker.kill()
        if self._cradle is not None:
            await self._cradle.wait_left()  # the server's forker thread out of the group first
        if self.group is not None:
            self.group.remove()  # nothing of the episode is left in it (or what is, is killed now)


def _reply(execution: Execution, notice: str, sandbox: Sandbox) -> Reply:
    limits = sandbox.limits
    text = notice + execution.output.decode(errors="replace")
    if execution.omitted:
        shown = f"limit {limits.output_bytes} bytes"
        text += f"\n[... output truncated: {execution.omitted} more bytes not shown ({shown}) ...]"
    if execution.ending is Ending.DONE:
        return Reply(text, is_error=execution.status != "ok")
    problem = {
        Ending.TIMEOUT: f"timed out after {limits.timeout:g} s wall-clock; the process tree was killed",
        Ending.FLOOD: f"wrote more than {limits.flood_bytes} bytes of output; the process tree was killed",
        Ending.DIED: f"the interpreter died ({execution.exit_reason})",
    }[execution.ending]
    error = f"[error: {problem}. Its state is lost ({STATE_LOST}); the next call starts a fresh interpreter.]"
    return Reply(f"{text}\n{error}" if text else error, is_error=True)


@dataclass(frozen=True)
class Verdict:
    reward: float
    summary: str
    signals: tuple[str, ...] = ()
    """Reward hacking the grader saw the submission attempt at run time (`_hacks.RUNTIME`)."""
    hints: tuple[str, ...] = ()
    """Patterns in the source that hacks use (`_hacks.STATIC`): for monitoring, never a verdict."""
    detail: str = ""
    """The grader's own status line (exception names included): for operators, never the policy."""


async def grade(sandbox: Sandbox, task: Task, code: str, *, partial: bool = False) -> Verdict:
    """Run `code` against the task's hidden tests in a fresh sandboxed process; only the verdict comes back."""
    request = {"code": code, "tests": task.test, "prompt": task.prompt, "entry_point": task.entry_point}
    checks = count_checks(task.test) if partial else None
    static: set[str] = set()

    async def scan() -> None:
        static.update(hacks.scan(code))

    try:
        async with anyio.create_task_group() as tg:
            # Runs once the request is on its way (the grader's first wait): the code is parsed
            # while the sandbox grades it, not after.
            tg.start_soon(scan)
            status = await grader(sandbox).run(sandbox, {**request, "partial": partial})
    except BaseExceptionGroup as group:
        # The task group wraps what the grader raised (no uid left, a full disk...): callers get
        # it as it was before the scan overlapped, not as a group.
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    line = status
    status, _, flags = status.partition(" !")
    verdict = _verdict(status, sandbox, checks)
    signals = tuple(hacks.runtime(flag for flag in flags.split(",") if flag))
    return Verdict(verdict.reward, verdict.summary, signals, tuple(sorted(static)), line)


def count_checks(test: str) -> int:
    """The top-level asserts of `check` (what partial credit counts), as the test process counts them."""
    return sum(
        isinstance(stmt, ast.Assert)
        for node in ast.parse(test).body
        if isinstance(node, ast.FunctionDef) and node.name == "check"
        for stmt in node.body
    )


def _verdict(status: str, sandbox: Sandbox, checks: int | None) -> Verdict:
    """The reward for a status line of the test process (which runs no submitted code). A
    `partial k/M` still counts only with partial credit on and M the server's own count. The
    summary, which the policy sees, is one of a fixed few: nothing in it is the solution's to
    choose but the outcome itself (an exception's name would be ~6 bits a submission)."""
    if status == "timeout":
        return Verdict(0.0, f"failed: timed out after {sandbox.limits.timeout:g} s")
    if status == "exited":
        return Verdict(0.0, "failed: the solution's process ended while the hidden tests ran")
    kind, _, detail = status.partition(" ")
    if kind == "passed" and checks is None:
        return Verdict(1.0, "passed: all hidden tests pass")
    if kind == "partial" and checks is not None:
        passed, total = (int(n) for n in detail.split("/"))
        if total != checks or not 0 <= passed <= total or total == 0:
            return Verdict(0.0, "failed: the test run crashed")
        return Verdict(
            passed / total, f"{'passed' if passed == total else 'failed'}: {passed}/{total} hidden checks pass"
        )
    if kind == "partial" or (kind == "passed" and checks):
        return Verdict(0.0, "failed: the test run crashed")  # a verdict of the other mode: never credited
    if kind == "passed":  # partial credit on, and a `check` without top-level asserts
        return Verdict(1.0, "passed: all hidden tests pass")
    if kind == "failed":  # which exception is the solution's choice: bits it could carry out, so not said
        return Verdict(0.0, FAILED)
    return Verdict(0.0, "failed: the test run crashed")


FAILED = "failed: the hidden tests fail"
