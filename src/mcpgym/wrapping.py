"""Any MCP server as an environment: the types around `mcpgym.wrap()`.

The sandbox has no network, so install the server first (`npm install
@modelcontextprotocol/server-filesystem`, or a virtualenv for a Python server) and wrap what was
installed; its interpreter and packages are found and shown to it read-only:

```python
import mcpgym
from mcpgym.wrapping import FileCheck, Sandbox, TaskSpec, Verify

Env = mcpgym.wrap(["node_modules/.bin/mcp-server-filesystem", "{workspace}"], tasks="tasks.jsonl")
Memory = mcpgym.wrap(
    ["node_modules/.bin/mcp-server-memory"],
    sandbox=Sandbox(env={"MEMORY_FILE_PATH": "{workspace}/memory.jsonl"}),  # its state, per episode
)
```
`Sandbox(read_only=..., env=..., network=...)` adds host paths, environment variables and
network access; a task's `setup` commands run before its server starts. See docs/wrapping.md
and rfcs/0015-wrapping-mcp-servers.md.

`wrap()` starts nothing: the wrapped server is started once, to list its tools, when the class's
tools are first needed. Serving the class (`mcpgym serve`, `GymServer`) lists them before the
first request without blocking the event loop; in async code of your own, `await prepare(Env)`
does it the same way (a plain first read of the tools blocks its thread while the server starts).
"""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from mcpgym._episode.tools import BoundTool, LazyTools, tools_ready
from mcpgym._wrap import _proxy
from mcpgym._wrap._proxy import WrapConfig, WrappedEnvironment
from mcpgym._wrap._relay import OnNotification, ServerRequests
from mcpgym._wrap._rubric import CallRecord, Rubric, WrapContext
from mcpgym._wrap._sandbox import Isolation, Sandbox
from mcpgym._wrap._tasks import FileCheck, TaskFileError, TaskSpec, Verify, load_tasks
from mcpgym._wrap._verify import Check, Score, verify
from mcpgym.rubrics import Rubric as ComponentRubric

__all__ = [
    "CallRecord",
    "Check",
    "FileCheck",
    "Sandbox",
    "Score",
    "TaskFileError",
    "TaskSpec",
    "Verify",
    "WrapContext",
    "WrappedEnvironment",
    "load_tasks",
    "prepare",
    "verify",
    "wrap",
]


class _BuiltConfig:
    """`config` of a class `wrap()` made: there once its tool table is (reading it fills that)."""

    def __get__(self, instance: object, owner: type[WrappedEnvironment]) -> WrapConfig:
        cast(LazyTools, owner.__mcpgym_tools__).loaded()  # fills the table, and `_built` with it
        built: type[WrappedEnvironment] = owner.__dict__["_built"][0]
        return built.config


def wrap(
    command: str | Sequence[str],
    *,
    tasks: str | Path | Sequence[TaskSpec] | None = None,
    rubric: Rubric | ComponentRubric | None = None,
    tools: Sequence[str] | None = None,
    warm: int = 0,
    isolation: Isolation = "auto",
    sandbox: Sandbox | None = None,
    max_steps: int | None = 32,
    call_timeout: float = 60.0,
    start_timeout: float = 30.0,
    finish_tool: str | None = None,
    name: str | None = None,
    server_requests: ServerRequests = "forward",
    on_notification: OnNotification | None = None,
    show_stderr: bool = False,
) -> type[WrappedEnvironment]:
    """An environment class whose episodes each run a fresh instance of the MCP server `command`.

    `tasks`: a JSONL file (or TaskSpec objects) supplying each episode's prompt, starting files and
    checks; `rubric`: a callable scoring the episode's state (default: the task's checks), or an
    `mcpgym.rubrics.Rubric` of named components, which then scores every step and the whole
    trajectory (the state's score reaches it as the environment's reward and as the signals
    `score` and `solved`);
    `tools`: which wrapped tools to expose, `"name"` or `"name=new_name"` (default: all);
    `warm`: instances kept started ahead of resets; `finish_tool`: a tool name that, if given,
    ends the episode when the agent calls it (scored then, instead of after every step);
    `isolation`/`sandbox`, `call_timeout`, `start_timeout`: see rfcs/0015.
    Arguments of `command` may hold `{workspace}`, the episode's own directory.

    What travels outside tool results (docs/wrapping.md, "What survives the wrap"): the wrapped
    server's notifications reach the MCP client driving the episode (progress against its own
    token, log messages at the level it chose, list changes) and `on_notification(notification)`
    (sync or async; in-process, the only way to see them). `server_requests`: "forward" puts the
    server's sampling, elicitation and roots requests to the driving client when it declared the
    capability, and refuses them otherwise (in-process, or mcpgym's own clients, which have no
    model to sample from), with an error that says why, recorded in the episode's state
    (`info["server_requests"]`); "refuse" refuses them always. Each instance's stderr (the
    banner most servers print) is kept quiet and quoted when the server fails to start;
    `show_stderr=True` passes it through.

    Returns at once: what can be checked without the server (the program, the settings, the
    task file) is checked here; the server first starts when the tools are needed (see the
    module docstring), and a server that fails to start raises then.
    """
    argv = _proxy._absolute(shlex.split(command) if isinstance(command, str) else command)
    _check(argv, warm=warm, max_steps=max_steps, timeouts=(call_timeout, start_timeout))
    if server_requests not in ("forward", "refuse"):
        raise ValueError(f"server_requests must be 'forward' or 'refuse', not {server_requests!r}")
    task_list = tuple(load_tasks(tasks)) if isinstance(tasks, str | Path) else tasks
    cls_name = name or _proxy._class_name(argv)
    namespace: dict[str, Any] = {
        "config": _BuiltConfig(),
        "max_steps": max_steps,
        "rubric": rubric if isinstance(rubric, ComponentRubric) else None,
        "__doc__": f"The MCP server `{shlex.join(argv)}`, one fresh instance per episode.",
        # The caller's module, as namedtuple does: then `module:Name` finds the class again (in
        # `mcpgym serve`, a child process, an unpickled factory) when the caller keeps the name.
        "__module__": sys._getframe(1).f_globals.get("__name__", __name__),
        "__qualname__": cls_name,
        "_built": [],
    }
    cls = cast(type[WrappedEnvironment], type(cls_name, (WrappedEnvironment,), namespace))

    def build() -> dict[str, BoundTool]:
        built = _proxy.wrap(
            argv,
            tasks=task_list,
            rubric=rubric,
            tools=tools,
            warm=warm,
            isolation=isolation,
            sandbox=sandbox,
            max_steps=max_steps,
            call_timeout=call_timeout,
            start_timeout=start_timeout,
            finish_tool=finish_tool,
            name=cls_name,
            server_requests=server_requests,
            on_notification=on_notification,
            show_stderr=show_stderr,
        )
        namespace["_built"].append(built)
        return dict(built.__mcpgym_tools__)

    cls.__mcpgym_tools__ = LazyTools(build)
    return cls


async def prepare(env: type[Any]) -> None:
    """Start `env`'s wrapped server once to list its tools (if nothing has yet), in a worker
    thread: the event loop goes on meanwhile. Raises what a server that fails to start raises."""
    await tools_ready(env)


def _check(argv: Sequence[str], *, warm: int, max_steps: int | None, timeouts: tuple[float, float]) -> None:
    """What `wrap()` refuses before anything runs (the build, later, checks them again)."""
    if not argv:
        raise ValueError("wrap() needs the command that starts the MCP server")
    if shutil.which(argv[0]) is None:
        raise ValueError(f"no program {argv[0]!r} to run (not an executable file, nor found on PATH)")
    if warm < 0:
        raise ValueError(f"warm must be 0 or more, not {warm}")
    if max_steps is not None and max_steps < 1:
        raise ValueError(f"max_steps must be 1 or more (or None), not {max_steps}")
    if not all(t > 0 for t in timeouts):
        raise ValueError("call_timeout and start_timeout must be positive (seconds)")
