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
tools are first needed. Serving the class (`mcpgym serve`, `GymServer`) and `mcpgym.connect(Env)`
list them before the first request without blocking the event loop; in other async code of your
own, `await prepare(Env)` does it the same way (a plain first read of the tools blocks its thread
while the server starts).
"""

from __future__ import annotations

import functools
import inspect
import shlex
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ParamSpec, cast

from mcpgym._episode.tools import BoundTool, LazyTools, tools_ready
from mcpgym._wrap import _proxy
from mcpgym._wrap._proxy import WrapConfig, WrappedEnvironment
from mcpgym._wrap._rubric import CallRecord, WrapContext
from mcpgym._wrap._sandbox import Sandbox
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


P = ParamSpec("P")


class _BuiltConfig:
    """`config` of a class `wrap()` made: there once its tool table is (reading it fills that)."""

    def __get__(self, instance: object, owner: type[WrappedEnvironment]) -> WrapConfig:
        cast(LazyTools, owner.__mcpgym_tools__).loaded()  # fills the table, and `_built` with it
        built: type[WrappedEnvironment] = owner.__dict__["_built"][0]
        return built.config


def _on_first_use(build: Callable[P, type[WrappedEnvironment]]) -> Callable[P, type[WrappedEnvironment]]:
    """`build` (the wrap that starts the server to list its tools), returning at once: the class
    is made here and `build` runs, with the same arguments, when its tools are first needed.
    The parameters are `build`'s own, so they are written once."""
    signature = inspect.signature(build)
    eager: Callable[..., type[WrappedEnvironment]] = build

    @functools.wraps(build)
    def wrap(*args: P.args, **kwargs: P.kwargs) -> type[WrappedEnvironment]:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        given = bound.arguments
        command = given["command"]
        argv = _proxy._absolute(shlex.split(command) if isinstance(command, str) else command)
        timeouts = {"call_timeout": given["call_timeout"], "start_timeout": given["start_timeout"]}
        _check(argv, warm=given["warm"], max_steps=given["max_steps"], **timeouts)
        if given["server_requests"] not in ("forward", "refuse"):
            raise ValueError(f"server_requests must be 'forward' or 'refuse', not {given['server_requests']!r}")
        tasks = given["tasks"]
        # Fixed now, as the build will see them: the command, the task file as it is, the name.
        given.update(
            command=argv,
            tasks=tuple(load_tasks(tasks)) if isinstance(tasks, str | Path) else tasks,
            name=given["name"] or _proxy._class_name(argv),
        )
        # The caller's module, as namedtuple does: then `module:Name` finds the class again (in
        # `mcpgym serve`, a child process, an unpickled factory) when the caller keeps the name.
        module = sys._getframe(1).f_globals.get("__name__", __name__)
        return _lazy_class(functools.partial(eager, **given), given, module)

    wrap.__module__ = __name__
    wrap.__doc__ = f"""{build.__doc__}
    Returns at once: what can be checked without the server (the program, the settings, the
    task file) is checked here; the server first starts when the tools are needed (see the
    module docstring), and a server that fails to start raises then. `isolation`/`sandbox`,
    `call_timeout`, `start_timeout`: see rfcs/0015.
    """
    return wrap


def _lazy_class(
    build: Callable[[], type[WrappedEnvironment]], given: dict[str, Any], module: str
) -> type[WrappedEnvironment]:
    """The class `build()` would make, whose tool table (and `config`) `build()` fills when read."""
    rubric = given["rubric"]
    namespace: dict[str, Any] = {
        "config": _BuiltConfig(),
        "max_steps": given["max_steps"],
        "rubric": rubric if isinstance(rubric, ComponentRubric) else None,
        "__doc__": f"The MCP server `{shlex.join(given['command'])}`, one fresh instance per episode.",
        "__module__": module,
        "__qualname__": given["name"],
        "_built": [],
    }
    cls = cast(type[WrappedEnvironment], type(given["name"], (WrappedEnvironment,), namespace))

    def load() -> dict[str, BoundTool]:
        built = build()
        namespace["_built"].append(built)
        return dict(built.__mcpgym_tools__)

    cls.__mcpgym_tools__ = LazyTools(load)
    return cls


wrap = _on_first_use(_proxy.wrap)


async def prepare(env: type[Any]) -> None:
    """Start `env`'s wrapped server once to list its tools (if nothing has yet), in a worker
    thread: the event loop goes on meanwhile. Raises what a server that fails to start raises."""
    await tools_ready(env)


def _check(argv: Sequence[str], *, warm: int, max_steps: int | None, call_timeout: float, start_timeout: float) -> None:
    """What `wrap()` refuses before anything runs (the build, later, checks them again)."""
    if not argv:
        raise ValueError("wrap() needs the command that starts the MCP server")
    if shutil.which(argv[0]) is None:
        raise ValueError(f"no program {argv[0]!r} to run (not an executable file, nor found on PATH)")
    if warm < 0:
        raise ValueError(f"warm must be 0 or more, not {warm}")
    if max_steps is not None and max_steps < 1:
        raise ValueError(f"max_steps must be 1 or more (or None), not {max_steps}")
    if not (call_timeout > 0 and start_timeout > 0):
        raise ValueError("call_timeout and start_timeout must be positive (seconds)")
