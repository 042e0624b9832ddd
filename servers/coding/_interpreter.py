"""The per-episode Python REPL and the grader, both on sandboxed worker processes.

Layer: episode-facing execution over `_process`. `Interpreter` keeps one worker alive across
calls (variables survive, like a REPL) and replaces it when it dies, saying the state was
lost. `grade()` runs a submission against hidden tests in a fresh, throwaway worker.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from servers.coding._process import Ending, Execution, WorkerProcess
from servers.coding._sandbox import Sandbox
from servers.coding._tasks import Task

STATE_LOST = "variables, imports and definitions from earlier calls are gone"


@dataclass(frozen=True)
class Reply:
    """What one `run_python` call shows the agent."""

    text: str
    is_error: bool


class Interpreter:
    """A persistent sandboxed interpreter working in `workspace` (started on first use)."""

    def __init__(self, sandbox: Sandbox, workspace: Path, uid: int | None) -> None:
        self.sandbox = sandbox
        self.workspace = workspace
        self.uid = uid
        self._worker: WorkerProcess | None = None
        self._restarted = False  # a worker died: tell the agent on the next call

    async def run(self, code: str) -> Reply:
        notice = ""
        if self._worker is None or self._worker.killed:
            if self._restarted:
                notice = f"[note: this is a fresh interpreter; {STATE_LOST}]\n"
                self._restarted = False
            self._worker = await WorkerProcess.start(self.sandbox, self.workspace, self.uid)
        execution = await self._worker.execute({"code": code})
        if execution.ending is not Ending.DONE:
            self._restarted = True
        return _reply(execution, notice, self.sandbox)

    async def close(self) -> None:
        if self._worker is not None:
            await self._worker.kill()


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


async def grade(sandbox: Sandbox, task: Task, code: str, *, partial: bool = False) -> Verdict:
    """Run `code` against the task's hidden tests in a fresh worker; only the verdict comes back."""
    uid = sandbox.new_uid()
    workspace = Path(tempfile.mkdtemp(prefix="mcpgym-grade-"))
    try:
        if uid is not None:
            shutil.chown(workspace, uid, uid)
        worker = await WorkerProcess.start(sandbox, workspace, uid)
        try:
            request = {
                "graded": True,
                "code": code,
                "tests": task.test,
                "entry_point": task.entry_point,
                "partial": partial,
            }
            execution = await worker.execute(request)
        finally:
            await worker.kill()
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    return _verdict(execution, sandbox)


def _verdict(execution: Execution, sandbox: Sandbox) -> Verdict:
    if execution.ending is Ending.TIMEOUT:
        return Verdict(0.0, f"failed: timed out after {sandbox.limits.timeout:g} s")
    if execution.ending is not Ending.DONE:
        return Verdict(
            0.0, "failed: the test run crashed" if execution.ending is Ending.DIED else "failed: output flood"
        )
    kind, _, detail = execution.status.partition(" ")
    if kind == "passed":
        return Verdict(1.0, "passed: all hidden tests pass")
    if kind == "partial":
        passed, total = (int(n) for n in detail.split("/"))
        return Verdict(
            passed / total, f"{'passed' if passed == total else 'failed'}: {passed}/{total} hidden checks pass"
        )
    return Verdict(0.0, f"failed: the hidden tests raised {detail}")
