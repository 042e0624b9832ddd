"""`mcpgym.wrap(...)`: any MCP server as an environment, one fresh server per episode.

Layer: an environment built on the public `Environment` API (plus a pass-through `ProxyTool`).
The wrapped server's tools are this environment's tools, with their own schemas; each call is
forwarded unchanged and its result returned unchanged, with the reward stamp added by the
episode core as for any environment. After every step the rubric scores the episode's state:
a solved task ends the episode with its score as the reward; a task still unsolved when the
step limit truncates the episode gets its final score (partial credit when the task allows it).
rfcs/0015-wrapping-mcp-servers.md.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import shlex
import shutil
import sys
import tempfile
import threading
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, cast

import anyio
import mcp_types as types
from mcp import Client
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata, func_metadata
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import ValidationError

from mcpgym._core.errors import MCPError, ToolError
from mcpgym._episode.catalog import Task
from mcpgym._episode.environment import Environment
from mcpgym._episode.tools import BoundTool
from mcpgym._wrap._instance import Instance, Launcher, WarmPool, WrappedServerError, pooled
from mcpgym._wrap._rubric import CallRecord, Rubric, WrapContext, default_rubric, evaluate
from mcpgym._wrap._sandbox import Isolation, Sandbox
from mcpgym._wrap._tasks import TaskSpec, load_tasks
from mcpgym._wrap._verify import Score
from mcpgym.rubrics import Rubric as ComponentRubric

logger = logging.getLogger("mcpgym.wrap")

_NO_TASK = TaskSpec(id="open", prompt="")
"""The task of a wrapped server given no task file: a fresh server per episode, no reward."""


class ProxyTool(BoundTool):
    """A wrapped server's tool: arguments go through as given (the wrapped server validates them
    against its own schema, as it would for any client) and its result comes back unchanged."""

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(arguments, dict):
            raise TypeError("tool arguments must be a JSON object")
        return {"tool_name": self.name, "arguments": arguments}

    def convert(self, value: Any) -> types.CallToolResult:
        if not isinstance(value, types.CallToolResult):
            raise TypeError(f"expected the wrapped server's CallToolResult, not {type(value).__name__}")
        return value


def _forward(tool_name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    raise NotImplementedError  # only its signature is used: the metadata every ProxyTool carries


@functools.cache
def _proxy_metadata() -> FuncMetadata:
    return func_metadata(_forward)


@dataclass(frozen=True)
class WrapConfig:
    """Everything one wrapped environment class was built with."""

    launcher: Launcher
    tasks: tuple[TaskSpec, ...]
    rubric: Rubric | None
    upstream: dict[str, str]
    """Our tool name -> the wrapped server's."""
    warm: int = 0
    finish_tool: str | None = None
    tools: tuple[types.Tool, ...] = field(default=())


class WrappedEnvironment(Environment):
    """Base of the classes `mcpgym.wrap()` builds (one per wrapped command)."""

    config: ClassVar[WrapConfig]
    max_steps = 32

    task: TaskSpec
    instance: Instance
    context: WrapContext
    last_score: Score | None = None
    calls_made = 0
    """Tool calls this episode (refused ones too: each is a step toward the limit)."""

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> dict[str, Any]:
        config = self.config
        self.task = self._pick(options)
        self.instance = await self.hold(await self._instance())
        self.context = WrapContext(
            self.task, self.instance.workspace, client=self.instance.client, call_timeout=config.launcher.call_timeout
        )
        self.last_score = None
        self.calls_made = 0
        return {
            "task_id": self.task.id,
            "prompt": self.task.prompt,
            "workspace": str(self.instance.workspace),
            "tools": [tool.name for tool in config.tools],
            "sandbox": config.launcher.sandbox.report(),
        }

    def _pick(self, options: dict[str, Any] | None) -> TaskSpec:
        tasks = self.config.tasks
        wanted = (options or {}).get("task_id")
        if wanted is None:
            return self.rng.choice(tasks)
        for task in tasks:
            if task.id == wanted:
                return task
        raise ValueError(f"unknown task_id {wanted!r}; this environment has {len(tasks)} tasks")

    async def _instance(self) -> AbstractAsyncContextManager[Instance]:
        network = self.task.network
        # A pooled instance started before its task was known: a task with set-up (files or
        # commands, in place before its server starts) starts its own.
        pool = None if self.task.files or self.task.setup else await self._warm_pool()
        if pool is not None:
            return pooled(pool, network=network)
        return self.config.launcher.start(network=network, task=self.task)

    async def _warm_pool(self) -> WarmPool | None:
        """This host's warm pool for this class, started by the first reset that wants one (it
        lives as long as the host: a server, or an in-process client)."""
        if not self.config.warm or self.host is None:
            return None
        key = ("mcpgym.wrap.pool", id(self.config))
        lock: anyio.Lock = self.host.state.setdefault((*key, "lock"), anyio.Lock())
        async with lock:
            pool: WarmPool | None = self.host.state.get(key)
            if pool is None:
                pool, _ = await self.host.enter(WarmPool(self.config.launcher, self.config.warm).running())
                self.host.state[key] = pool
        return pool

    async def forward(self, tool_name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Every tool call: forwarded to the wrapped server, then the state is scored."""
        if tool_name == self.config.finish_tool:
            score = await self._score()
            self.finish(reward=score.value)
            return _text(f"Finished: score {score.value:g}.")
        self.calls_made += 1
        try:
            result = _own_meta(await self._call_upstream(self.config.upstream[tool_name], arguments))
        except _Refused as refused:
            # A refusal is a step of the trajectory too: a trajectory rubric counts it, and on
            # the last step the limit allows the final state is scored as after any step.
            self.context.calls.append(CallRecord(tool_name, arguments, _text(str(refused), error=True)))
            if self.config.finish_tool is None and self._scored:
                await self._settle()
            raise
        self.context.calls.append(CallRecord(tool_name, arguments, result))
        if self.config.finish_tool is None and self._scored:
            await self._settle()
        return result

    @property
    def _scored(self) -> bool:
        """A rubric, or a task with checks: otherwise there is nothing to score after a step."""
        verify = self.task.verify
        return self.config.rubric is not None or bool(verify.files or verify.absent or verify.only is not None)

    async def _call_upstream(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        timeout = self.config.launcher.call_timeout
        try:
            with anyio.fail_after(timeout):
                # Its own timeout, not the session's (that one bounds the start-up handshake).
                return await self.instance.client.call_tool(name, arguments, read_timeout_seconds=timeout)
        except TimeoutError:
            self.finish()
            raise ToolError(
                f"The wrapped server did not answer {name!r} within {timeout:g}s; the episode ends"
            ) from None
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                self.finish()
                raise ToolError(
                    f"The wrapped server did not answer {name!r} within {timeout:g}s; the episode ends"
                ) from None
            if exc.code == CONNECTION_CLOSED:
                self.finish()
                raise ToolError(f"The wrapped server exited during {name!r}; the episode ends") from None
            raise _Refused(f"The wrapped server refused {name!r}: {exc}") from None
        except ValidationError as exc:  # the SDK client checks the answer's shape
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"]) or "result"
            raise _Refused(
                f"The wrapped server's answer to {name!r} is not a valid tool result ({where}: {first['msg']})"
            ) from None

    async def _settle(self) -> None:
        score = await self._score()
        # For an `mcpgym.rubrics.Rubric` on the class: the state's score, as named facts.
        self.signal("score", score.value)
        self.signal("solved", 1.0 if score.solved else 0.0)
        if score.solved:
            self.finish(reward=score.value)
        elif self.max_steps is not None and self.calls_made >= self.max_steps:
            self.reward(score.value)  # the last step the limit allows: what the final state earned

    async def _score(self) -> Score:
        rubric = self.config.rubric or default_rubric
        try:
            self.last_score = await evaluate(rubric, self.context)
        except (TimeoutError, MCPError) as exc:  # the rubric's own call to the wrapped server
            self.finish()
            why = exc if isinstance(exc, MCPError) else f"no answer within {self.config.launcher.call_timeout:g}s"
            raise ToolError(f"Scoring needed the wrapped server, which failed ({why}); the episode ends") from None
        return self.last_score

    def catalog(self) -> Sequence[Task]:
        """The task file's tasks (id and prompt only: the checks and files stay with the grader)."""
        return [
            Task(id=spec.id, prompt=spec.prompt, title=spec.id, options={"task_id": spec.id})
            for spec in self.config.tasks
            if spec is not _NO_TASK
        ]

    def state_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"sandbox": self.config.launcher.sandbox.report()}
        if hasattr(self, "task"):
            info["task_id"] = self.task.id
        if self.last_score is not None:
            info["score"] = self.last_score.value
            info["checks"] = [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in self.last_score.checks]
        return info


class _Refused(ToolError):
    """The wrapped server answered a call with an error (the episode goes on)."""


_BASES: list[Path] = []
"""Every wrapped class's base folder, removed (if empty) by one exit hook for them all."""


def _remove_at_exit(base: Path) -> None:
    if not _BASES:
        atexit.register(_remove_bases)
    _BASES.append(base)


def _remove_bases() -> None:
    for base in _BASES:
        _remove_empty(base)


def _remove_empty(path: Path) -> None:
    with contextlib.suppress(OSError):  # not empty: an instance outlived the process (killed), keep it
        path.rmdir()


_RESERVED_META = ("io.modelcontextprotocol/", "io.mcpgym/")


def _own_meta(result: types.CallToolResult) -> types.CallToolResult:
    """The result less the `_meta` keys the MCP SDK reserves for the protocol itself (they
    describe the hop to the wrapped server, not ours; every door then carries the same result)
    and mcpgym's own: a wrapped server does not get to stamp a reward (a forged `io.mcpgym/step`
    would otherwise reach in-process and `--hide-rewards` clients as it was sent)."""
    if not result.meta or not any(key.startswith(_RESERVED_META) for key in result.meta):
        return result
    kept = {k: v for k, v in result.meta.items() if not k.startswith(_RESERVED_META)}
    return result.model_copy(update={"meta": kept or None})


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


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
) -> type[WrappedEnvironment]:
    """An environment class whose episodes each run a fresh instance of the MCP server `command`.

    `tasks`: a JSONL file (or TaskSpec objects) supplying each episode's prompt, starting files and
    checks; `rubric`: a callable scoring the episode's state (default: the task's checks), or an
    `mcpgym.rubrics.Rubric` of named components, which then scores every step and the whole
    trajectory (the state's score reaches it as the environment's reward and as the signals
    `score` and `solved`);
    `tools`: which wrapped tools to expose, `"name"` or `"name=new_name"` (default: all);
    `warm`: instances kept started ahead of resets; `finish_tool`: a tool name that, if given,
    ends the episode when the agent calls it (scored then, instead of after every step).
    Arguments of `command` may hold `{workspace}`, the episode's own directory.
    """
    argv = _absolute(shlex.split(command) if isinstance(command, str) else command)
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
    task_list = tuple(load_tasks(tasks) if isinstance(tasks, str | Path) else (tasks or (_NO_TASK,)))
    box = sandbox or Sandbox(isolation=isolation)
    base = Path(tempfile.mkdtemp(prefix="mcpgym-wrap-"))
    _remove_at_exit(base)  # each workspace goes with its instance; then their parent
    launcher = Launcher(argv, box, base, start_timeout=start_timeout, call_timeout=call_timeout)
    listed = _list_tools(launcher, task_list[0])
    upstream, exposed = _select(listed, tools)
    if finish_tool is not None:
        if finish_tool in upstream:
            raise ValueError(f"finish_tool {finish_tool!r} clashes with a wrapped tool of that name")
        upstream[finish_tool] = finish_tool
        exposed.append(types.Tool(name=finish_tool, description="Declare the task done.", input_schema=_EMPTY))
    components = rubric if isinstance(rubric, ComponentRubric) else None
    state_rubric = None if components is not None else cast("Rubric | None", rubric)
    config = WrapConfig(launcher, task_list, state_rubric, upstream, warm, finish_tool, tuple(exposed))
    cls_name = name or _class_name(argv)
    namespace: dict[str, Any] = {
        "config": config,
        "max_steps": max_steps,
        "rubric": components,
        "__doc__": f"The MCP server `{shlex.join(argv)}`, one fresh instance per episode.",
        # The caller's module, as namedtuple does: then `module:Name` finds the class again (in
        # `mcpgym serve`, a child process, an unpickled factory) when the caller keeps the name.
        "__module__": sys._getframe(1).f_globals.get("__name__", __name__),
        "__qualname__": cls_name,
    }
    cls = cast(type[WrappedEnvironment], type(cls_name, (WrappedEnvironment,), namespace))
    cls.__mcpgym_tools__ = {tool.name: _proxy_tool(tool) for tool in exposed}
    for warning in box.warnings():
        logger.warning("%s", warning)
    return cls


_EMPTY: dict[str, Any] = {"type": "object", "properties": {}}


def _absolute(argv: Sequence[str]) -> tuple[str, ...]:
    """Relative paths in the command, made absolute here: the server starts in its workspace."""
    return tuple(
        str(Path(arg).absolute())
        if not arg.startswith(("-", "/")) and ("/" in arg or Path(arg).is_file()) and Path(arg).exists()
        else arg
        for arg in argv
    )


def _proxy_tool(tool: types.Tool) -> ProxyTool:
    return ProxyTool(
        name=tool.name,
        method_name="forward",
        definition=tool,
        metadata=_proxy_metadata(),
        is_async=True,
        inline=False,
        plain_args=frozenset(),
        renamed=(),
        str_result=None,
    )


def _select(listed: list[types.Tool], wanted: Sequence[str] | None) -> tuple[dict[str, str], list[types.Tool]]:
    by_name = {tool.name: tool for tool in listed}
    if wanted is None:
        return {name: name for name in by_name}, list(listed)
    upstream: dict[str, str] = {}
    exposed: list[types.Tool] = []
    for entry in wanted:
        source, _, target = entry.partition("=")
        source, target = source.strip(), (target.strip() or source.strip())
        if source not in by_name:
            raise ValueError(f"the wrapped server has no tool {source!r}; it has: {', '.join(by_name)}")
        if target in upstream:
            raise ValueError(f"two wrapped tools would both be called {target!r}")
        upstream[target] = source
        exposed.append(by_name[source].model_copy(update={"name": target}))
    return upstream, exposed


_INTERPRETERS = {"node", "nodejs", "npx", "python", "python3", "uv", "uvx", "deno", "bun", "pipx"}


def _class_name(argv: Sequence[str]) -> str:
    """A readable class name from the command: its program, or the script an interpreter runs."""
    words = [a for a in argv if not a.startswith("-") and "{" not in a]
    stem = Path(words[0] if words else argv[0]).name
    if stem in _INTERPRETERS and len(words) > 1:
        stem = Path(words[1]).name
    parts = "".join(ch if ch.isalnum() else " " for ch in stem.removesuffix(".js").removesuffix(".py")).split()
    return "Wrapped" + "".join(w[:1].upper() + w[1:] for w in parts)[:48]


def _list_tools(launcher: Launcher, task: TaskSpec) -> list[types.Tool]:
    """Start the server once (with `task`'s set-up: a server may need it to start), read its
    `tools/list` (every page, up to the launcher's bound), stop it: the class's tool table
    is fixed when the class is made, as for any environment. Runs on a loop of its own in a
    worker thread, so wrap() works with or without an event loop running."""

    async def probe() -> list[types.Tool]:
        async with launcher.start(task=task, network=task.network) as instance:
            tools = await _all_tools(instance.client, launcher.tool_pages)
        if tools is None:  # said outside the instance's task groups, which would wrap it
            raise WrappedServerError(
                f"the wrapped server {shlex.join(launcher.argv)}: its tools/list went on past "
                f"{launcher.tool_pages} pages (a server that paginates forever)"
            )
        return tools

    outcome: list[list[types.Tool] | BaseException] = []

    def run() -> None:
        try:
            outcome.append(anyio.run(probe))
        except BaseException as exc:  # handed to the caller's thread just below
            outcome.append(exc)

    thread = threading.Thread(target=run, name="mcpgym-wrap-probe")
    thread.start()
    thread.join()
    if isinstance(outcome[0], WrappedServerError):
        raise outcome[0]
    if isinstance(outcome[0], BaseException):
        cause = outcome[0]
        raise RuntimeError(f"could not list the tools of {shlex.join(launcher.argv)}: {cause}") from cause
    return outcome[0]


async def _all_tools(client: Client, pages: int) -> list[types.Tool] | None:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(pages):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools
    return None
