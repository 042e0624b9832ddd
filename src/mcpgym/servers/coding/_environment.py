"""`Coding`: the environment. Episodes are tasks; tools are a sandboxed REPL, files and submit.

Layer: episode logic over `_tasks`, `_sandbox`, `_workspace` and `_interpreter`. Holds no
OS plumbing of its own; all user code runs in sandboxed worker processes.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Annotated, Any

import anyio
from mcp import types
from pydantic import Field

import mcpgym
import mcpgym.rubrics
from mcpgym.servers.coding._host import cradle as _cradle
from mcpgym.servers.coding._host import scratch as scratch
from mcpgym.servers.coding._host.interpreter import Interpreter, grade
from mcpgym.servers.coding._host.sandbox import Sandbox
from mcpgym.servers.coding._host.workspace import Workspace, WorkspaceError
from mcpgym.servers.coding._rubrics import CORRECT_AND_CONCISE
from mcpgym.servers.coding._tasks import Task, humaneval_path, load_tasks

_READ_LIMIT = 256 << 10


@functools.cache
def humaneval_tasks() -> Mapping[str, Task]:
    """The HumanEval problems, loaded once per process."""
    return load_tasks()


@functools.cache
def default_sandbox() -> Sandbox:
    """The strongest sandbox this machine allows, with default limits (probed once)."""
    return Sandbox(hidden_paths=(humaneval_path(),))


class Coding(mcpgym.Environment):
    """A Python coding task in a sandbox. The first observation gives the task's prompt: write the
    function it describes. Try code with `run_python` (a persistent interpreter whose working
    directory is your workspace), keep files with `write_file` / `read_file` / `list_files`, and
    call `submit` once with your solution: hidden tests grade it (reward 1.0 if they all pass)
    and the episode ends."""

    max_reward = 1.0
    max_steps = 50

    def __init__(
        self,
        tasks: Mapping[str, Task] | None = None,
        sandbox: Sandbox | None = None,
        partial_credit: bool = False,
        rubric: mcpgym.rubrics.Rubric | None = None,
    ) -> None:
        self.tasks = tasks if tasks is not None else humaneval_tasks()
        self.sandbox = sandbox if sandbox is not None else default_sandbox()
        self.partial_credit = partial_credit
        if rubric is not None:  # else the class's (None: the reward is what submit gives)
            self.rubric = rubric
        self.task: Task | None = None
        self._workspace: Workspace | None = None
        self._interpreter: Interpreter | None = None
        self._uid: int | None = None
        self.hack_signals: list[str] | None = None  # set by submit: reward hacking seen at run time (`_hacks`)
        self.graded: dict[str, Any] | None = None  # set by submit: what the grader said, for operators

    def state_info(self) -> dict[str, Any]:
        """Which sandbox protections are active, for `env.state()` (also in the first observation)."""
        info: dict[str, Any] = {"sandbox": self.sandbox.protections.describe()}
        if self.hack_signals is not None:
            info["hack_signals"] = self.hack_signals
        if self.graded is not None:
            info["grading"] = self.graded
        return info

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> dict[str, Any]:
        """Options: `task_id` picks the task; otherwise one is drawn from the seeded RNG."""
        task_id = (options or {}).get("task_id")
        if task_id is None:
            task_id = self.rng.choice(sorted(self.tasks))
        if task_id not in self.tasks:
            raise KeyError(
                f"unknown task_id {task_id!r}; this server has {len(self.tasks)} tasks, e.g. {next(iter(self.tasks))!r}"
            )
        await self.close()  # a shared instance may be reset again: drop the last episode's sandbox
        self.hack_signals = self.graded = None
        self.task = self.tasks[task_id]
        uid = self._uid = self.sandbox.new_uid()
        limits = self.sandbox.limits
        quota = (limits.workspace_bytes, limits.workspace_files) if self.sandbox.protections.workspace_quota else None
        parent = await anyio.to_thread.run_sync(scratch.directory)  # the first call sweeps: not on the loop
        self._workspace = Workspace(uid, _READ_LIMIT, quota, parent=parent)
        hierarchy = self.sandbox.protections.cgroups
        if hierarchy is not None:  # the episode's memory cgroup is made ahead, taken at its first run_python
            _cradle.prepare(hierarchy, limits.episode_memory_bytes)
        self._interpreter = Interpreter(self.sandbox, self._workspace.root, uid, cgroup=True)
        return {**self._brief(), "sandbox": self.sandbox.protections.describe()}

    def catalog(self) -> list[mcpgym.Task]:
        """Every task as an MCP prompt and resource: its id and prompt, never its tests or solution."""
        return [_catalog_task(task) for task in self.tasks.values()]

    def _brief(self) -> dict[str, str]:
        task = self._current_task()
        return {
            "task_id": task.task_id,
            "prompt": task.prompt,
            "entry_point": task.entry_point,
            "instructions": (
                f"Implement `{task.entry_point}` as the prompt describes, then call submit with the complete "
                "code (imports included). Hidden tests grade it; the episode ends on submit."
            ),
        }

    @mcpgym.tool
    async def get_task(self) -> dict[str, str]:
        """Show this episode's task: its id, the prompt to complete, the function to implement and
        how it is graded. (An RL loop gets the same from reset; an agent that never resets, such as
        Claude Code, reads it here.)"""
        return self._brief()

    @mcpgym.tool
    async def run_python(self, code: str) -> str:
        """Run Python code in this episode's interpreter and return its output (stdout and stderr).

        Variables, imports and definitions persist between calls, like a REPL; the value of a
        final expression is printed. The working directory is your workspace. Each call is
        limited in time, CPU, memory, processes and output; if the interpreter dies or is
        killed, the next call starts a fresh one (earlier state is lost). No network access."""
        reply = await self._running().run(code)
        if reply.is_error:
            raise mcpgym.ToolError(reply.text)
        return reply.text

    @mcpgym.tool
    def write_file(self, path: str, content: str) -> str:
        """Write a text file in your workspace (a relative path; parent directories are created)."""
        try:
            size = self._files().write(path, content, self.sandbox.limits.file_size_bytes)
        except WorkspaceError as exc:
            raise mcpgym.ToolError(str(exc)) from None
        return f"wrote {size} bytes to {path}"

    @mcpgym.tool
    def read_file(self, path: str) -> str:
        """Read a text file from your workspace (a relative path)."""
        try:
            text, omitted = self._files().read(path)
        except WorkspaceError as exc:
            raise mcpgym.ToolError(str(exc)) from None
        return text + (f"\n[... truncated: {omitted} more bytes ...]" if omitted else "")

    @mcpgym.tool
    def list_files(self, path: str = ".") -> str:
        """List the files under a directory of your workspace, recursively, one per line (directories
        end in /). A name with a control character (a newline, say), a quote, a backslash, ' -> ' or
        leading/trailing spaces is shown as a JSON string: "notes\\nsolution.py"."""
        try:
            names = self._files().list(path)
        except WorkspaceError as exc:
            raise mcpgym.ToolError(str(exc)) from None
        return "\n".join(names) if names else "(empty)"

    @mcpgym.tool
    async def submit(
        self,
        code: Annotated[
            str | None,
            Field(description="The complete solution source. Omit to submit solution.py from the workspace."),
        ] = None,
    ) -> types.CallToolResult:
        """Submit your solution: hidden tests run on it in a fresh sandbox. Reward 1.0 if all pass,
        else 0.0. Ends the episode; you can submit once."""
        task = self._current_task()
        if code is None:
            try:  # the whole file, never a silently truncated one
                code = self._files().read_whole("solution.py", self.sandbox.limits.file_size_bytes)
            except WorkspaceError as exc:
                raise mcpgym.ToolError(f"{exc}; nothing was submitted (pass the code, or fix solution.py)") from None
        verdict = await grade(self.sandbox, task, code, partial=self.partial_credit)
        # Named facts for a rubric (servers/coding/_rubrics.py); without one, the reward is the verdict's.
        self.signal("tests_passed", verdict.reward)
        self.signal("all_passed", 1.0 if verdict.reward == 1.0 else 0.0)
        self.signal("code_chars", len(code))
        for name in verdict.signals:  # hacking seen at run time: the rubrics' `clean` gate zeroes the episode
            self.signal(f"hack.{name}", 1.0)
        for name in verdict.hints:  # patterns in the source: monitoring only
            self.signal(f"hint.{name}", 1.0)
        self.signal("grader_status", verdict.detail)
        self.finish(reward=verdict.reward)
        # For operators (state().info, and the recording's signals), never the policy: which
        # signal fires and which exception a failure raised are the solution's to choose.
        self.hack_signals = list(verdict.signals)
        self.graded = {"status": verdict.detail, "hack_signals": list(verdict.signals), "hints": list(verdict.hints)}
        report = {"verdict": verdict.summary, "reward": verdict.reward}
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=verdict.summary)], structured_content=report
        )

    async def close(self) -> None:
        interpreter, workspace, uid = self._interpreter, self._workspace, self._uid
        self._interpreter = self._workspace = self._uid = None
        try:
            if interpreter is not None:
                await interpreter.close()  # its worker, and the episode's memory cgroup
            if workspace is not None:
                await workspace.remove()
        finally:
            self.sandbox.release_uid(uid)  # its worker's namespace is dead: nothing of the uid runs

    def _current_task(self) -> Task:
        if self.task is None:
            raise mcpgym.ToolError("No task yet: call reset() first.")
        return self.task

    def _running(self) -> Interpreter:
        self._current_task()
        assert self._interpreter is not None
        return self._interpreter

    def _files(self) -> Workspace:
        self._current_task()
        assert self._workspace is not None
        return self._workspace


class GradedCoding(Coding):
    """`Coding` scored by a rubric: the fraction of hidden asserts passed, minus a penalty for
    code far over 600 characters, gated on no reward-hacking check firing (mcpgym.servers.coding's
    CORRECT_AND_CONCISE). Serve with `mcpgym serve mcpgym.servers.coding:GradedCoding`."""

    rubric = CORRECT_AND_CONCISE

    def __init__(
        self, tasks: Mapping[str, Task] | None = None, sandbox: Sandbox | None = None, partial_credit: bool = True
    ) -> None:
        super().__init__(tasks, sandbox, partial_credit)


def _catalog_task(task: Task) -> mcpgym.Task:
    prompt = (
        f"Complete this Python function (`{task.entry_point}`) as its docstring describes, then call `submit` "
        f"with the complete code, imports included. Hidden tests grade it.\n\n```python\n{task.prompt}```"
    )
    return mcpgym.Task(
        id=task.task_id, prompt=prompt, title=f"{task.task_id}: {task.entry_point}", options={"task_id": task.task_id}
    )
