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
import math
import shlex
import shutil
import sys
import tempfile
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar, cast

import anyio
import mcp_types as types
from mcp import Client
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata, func_metadata
from mcp.shared.dispatcher import ProgressFnT
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import ValidationError

from mcpgym._core.errors import INVALID_PARAMS, MCPError, ToolError
from mcpgym._core.protocol import unreserved
from mcpgym._episode.catalog import URI_PREFIX, Task
from mcpgym._episode.environment import LEDGER, Environment
from mcpgym._episode.host import Host
from mcpgym._episode.peer import PEER
from mcpgym._episode.tools import BoundTool
from mcpgym._wrap._instance import Instance, Launcher, WarmPool, WrappedServerError, pooled
from mcpgym._wrap._relay import CAPABILITIES, OnNotification, Passthrough, ServerRequests, wanted
from mcpgym._wrap._rubric import CallRecord, Rubric, WrapContext, default_rubric, evaluate
from mcpgym._wrap._sandbox import Isolation, Sandbox
from mcpgym._wrap._tasks import TaskSpec, load_tasks
from mcpgym._wrap._verify import Score
from mcpgym.rubrics import Rubric as ComponentRubric

logger = logging.getLogger("mcpgym.wrap")
T = TypeVar("T")

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
    gates: tuple[tuple[frozenset[str], frozenset[str]], ...] = ()
    """(client capabilities, the wrapped tools a server lists a client declaring them): a tool
    is ours to list when some entry's capabilities are all declared."""
    every_tool: dict[str, ProxyTool] = field(default_factory=dict)
    """Our tool name -> tool, capability-gated ones included."""
    listing: Listing | None = None


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

    @classmethod
    def upstream_listing(cls) -> Listing:
        """The wrapped server's resources, templates and prompts (served beside the task
        catalog), as it listed them when its tools were first read."""
        return cls.config.listing or Listing()

    @classmethod
    def tools_for(cls, capabilities: types.ClientCapabilities | None) -> Mapping[str, BoundTool]:
        """The tools a client declaring `capabilities` is shown: those the wrapped server lists
        for such a client (roots, sampling and elicitation can gate tools)."""
        declared = wanted(capabilities)
        if not declared:
            return cls.__mcpgym_tools__
        upstream = cls.config.upstream
        names = frozenset().union(*(names for gate, names in cls.config.gates if gate <= declared))
        return {
            name: tool
            for name, tool in cls.config.every_tool.items()
            if upstream[name] in names or name == cls.config.finish_tool
        }

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> dict[str, Any]:
        config = self.config
        self.task = self._pick(options)
        peer = PEER.get()
        capabilities = None if peer is None else peer.capabilities
        self.instance = await self.hold(await self._instance(capabilities))
        self.instance.relay.peer = peer
        # This episode's tools: what its server lists for the capabilities its client declared.
        self.__mcpgym_tools__ = self.tools_for(capabilities)  # type: ignore[misc]
        self.context = WrapContext(
            self.task, self.instance.workspace, client=self.instance.client, call_timeout=config.launcher.call_timeout
        )
        self.last_score = None
        self.calls_made = 0
        return {
            "task_id": self.task.id,
            "prompt": self.task.prompt,
            "workspace": str(self.instance.workspace),
            "tools": list(self.__mcpgym_tools__),
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

    async def _instance(self, capabilities: types.ClientCapabilities | None) -> AbstractAsyncContextManager[Instance]:
        network = self.task.network
        # A pooled instance started before its task was known: a task with set-up (files or
        # commands, in place before its server starts) starts its own.
        pool = None if self.task.files or self.task.setup else await self._warm_pool()
        if pool is not None:
            return pooled(pool, network=network, capabilities=capabilities)
        return self.config.launcher.start(network=network, task=self.task, capabilities=capabilities)

    async def _warm_pool(self) -> WarmPool | None:
        if self.host is None:
            return None
        return await self._pool_of(self.host)

    @classmethod
    async def start_hosting(cls, host: Host) -> None:
        """A server starts filling its warm pool as it starts (the first resets find it filling)."""
        await cls._pool_of(host)

    @classmethod
    async def _pool_of(cls, host: Host) -> WarmPool | None:
        """The host's warm pool for this class, started by the server as it starts, or in-process
        by the first reset (it lives as long as the host: a server, or an in-process client)."""
        if not cls.config.warm:
            return None
        key = ("mcpgym.wrap.pool", id(cls.config))
        lock: anyio.Lock = host.state.setdefault((*key, "lock"), anyio.Lock())
        async with lock:
            pool: WarmPool | None = host.state.get(key)
            if pool is None:
                pool, _ = await host.enter(WarmPool(cls.config.launcher, cls.config.warm).running())
                host.state[key] = pool
        return pool

    async def forward(self, tool_name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Every tool call: forwarded to the wrapped server, then the state is scored."""
        if tool_name == self.config.finish_tool:
            score = await self._score()
            self.finish(reward=score.value)
            return _text(f"Finished: score {score.value:g}.")
        self.calls_made += 1
        if self._never_scored:
            _unscored()
        peer = PEER.get()
        if peer is not None:
            self.instance.relay.peer = peer
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
    def _never_scored(self) -> bool:
        """Nothing will ever score this episode (no checks, rubric or finish tool): each step's
        reward is unknown, not 0. (With a finish tool the steps before it earn 0, a sparse reward;
        with an `mcpgym.rubrics.Rubric` on the class, the rubric scores every step.)"""
        return not self._scored and self.config.finish_tool is None and type(self).rubric is None

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
                return await self.instance.client.call_tool(
                    name, arguments, read_timeout_seconds=timeout, progress_callback=self._progress_of_this_call()
                )
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

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        """`resources/read` of this episode's own server (what a resource link it returned names)."""
        return await self._upstream(lambda client: client.read_resource(uri))

    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        return await self._upstream(lambda client: client.get_prompt(name, arguments))

    async def _upstream(self, request: Callable[[Client], Awaitable[T]]) -> T:
        if not hasattr(self, "instance"):
            raise MCPError(INVALID_PARAMS, "this episode has no wrapped server yet: reset it first")
        peer = PEER.get()
        if peer is not None:
            self.instance.relay.peer = peer
        try:
            with anyio.fail_after(self.config.launcher.call_timeout):
                return await request(self.instance.client)
        except TimeoutError:
            raise MCPError(REQUEST_TIMEOUT, "the wrapped server did not answer in time") from None

    def _progress_of_this_call(self) -> ProgressFnT:
        """Progress goes to the client of the request that made the call, against that request's
        token, bound now: `relay.peer` follows whichever request came last, and a request that
        comes while this call runs must not take its progress."""
        relay, peer, token = self.instance.relay, PEER.get(), self.calls_made

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            await relay.progress(progress, total, message, token=token, peer=peer)

        return progress

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
        if hasattr(self, "instance"):
            relay = self.instance.relay
            if relay.events:
                info["server_requests"] = list(relay.events)
            if relay.bad_lines:
                info["stdout_garbage_lines"] = relay.bad_lines
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


def _unscored() -> None:
    """This step's reward is NaN: unscored, as `mcpgym` says it everywhere (`_core.types.Score`:
    null on the wire, read back as NaN, so every door reports the same)."""
    ledger = LEDGER.get()
    if ledger is not None:
        ledger.reward = math.nan


def _remove_empty(path: Path) -> None:
    with contextlib.suppress(OSError):  # not empty: an instance outlived the process (killed), keep it
        path.rmdir()


def _own_meta(result: types.CallToolResult) -> types.CallToolResult:
    """The result less the `_meta` keys the MCP SDK reserves for the protocol itself (they
    describe the hop to the wrapped server, not ours; every door then carries the same result)
    and mcpgym's own: a wrapped server does not get to stamp a reward (a forged `io.mcpgym/step`
    would otherwise reach in-process and `--hide-rewards` clients as it was sent)."""
    kept = unreserved(result.meta)
    return result if kept is result.meta else result.model_copy(update={"meta": kept})


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
    ends the episode when the agent calls it (scored then, instead of after every step).
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
    passthrough = Passthrough(server_requests, on_notification)
    launcher = Launcher(
        argv,
        box,
        base,
        start_timeout=start_timeout,
        call_timeout=call_timeout,
        passthrough=passthrough,
        show_stderr=show_stderr,
    )
    probe = _probe(launcher, task_list[0])
    listed = probe.tools[_EVERYTHING]
    upstream, exposed = _select(listed, tools)
    _check_names(task_list, probe.listing)
    if finish_tool is not None:
        if finish_tool in upstream:
            raise ValueError(f"finish_tool {finish_tool!r} clashes with a wrapped tool of that name")
        upstream[finish_tool] = finish_tool
        exposed.append(types.Tool(name=finish_tool, description="Declare the task done.", input_schema=_EMPTY))
    components = rubric if isinstance(rubric, ComponentRubric) else None
    state_rubric = None if components is not None else cast("Rubric | None", rubric)
    every_tool = {tool.name: _proxy_tool(tool) for tool in exposed}
    gates = tuple((gate, frozenset(t.name for t in found)) for gate, found in probe.tools.items())
    ungated = {t.name for t in probe.tools[frozenset()]}
    config = WrapConfig(
        launcher,
        task_list,
        state_rubric,
        upstream,
        warm,
        finish_tool,
        tuple(exposed),
        gates=gates,
        every_tool=every_tool,
        listing=probe.listing,
    )
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
    # What a client declaring no capabilities is shown (in-process, mcpgym's clients): the rest
    # is listed to clients that declare what the server gates them on (`tools_for`).
    cls.__mcpgym_tools__ = {
        name: tool for name, tool in every_tool.items() if upstream[name] in ungated or name == finish_tool
    }
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


@dataclass(frozen=True)
class Listing:
    """The wrapped server's own resources, resource templates and prompts (as one instance lists
    them to a client declaring every capability), served beside the task catalog."""

    resources: tuple[types.Resource, ...] = ()
    templates: tuple[types.ResourceTemplate, ...] = ()
    prompts: tuple[types.Prompt, ...] = ()


@dataclass(frozen=True)
class _Probe:
    tools: dict[frozenset[str], list[types.Tool]]
    listing: Listing


_EVERYTHING = frozenset(CAPABILITIES)
_ALL_CAPABILITIES = types.ClientCapabilities(
    sampling=types.SamplingCapability(),
    elicitation=types.ElicitationCapability(
        form=types.FormElicitationCapability(), url=types.UrlElicitationCapability()
    ),
    roots=types.RootsCapability(list_changed=True),
)


def _capabilities(names: frozenset[str]) -> types.ClientCapabilities:
    return types.ClientCapabilities(**{name: getattr(_ALL_CAPABILITIES, name) for name in names})


def _probe(launcher: Launcher, task: TaskSpec) -> _Probe:
    """Start the server (with `task`'s set-up: a server may need it to start), read its
    `tools/list` (every page, up to the launcher's bound) and its other listings, stop it: the
    class's tool table is fixed when the class is made, as for any environment. Read as a client
    declaring no capabilities and as one declaring all (concurrently); when the two differ (the
    server gates tools on what a client declares), once more per capability, so `tools_for` can
    show each client what the server would. Runs on a loop of its own in a worker thread, so
    wrap() works with or without an event loop running."""

    async def read(
        names: frozenset[str], found: dict[frozenset[str], list[types.Tool]], listing: list[Listing]
    ) -> None:
        async with launcher.start(task=task, network=task.network, capabilities=_capabilities(names)) as instance:
            tools = await _all_tools(instance.client, launcher.tool_pages)
            if names == _EVERYTHING:
                listing.append(await _listing(instance.client))
        if tools is None:  # said outside the instance's task groups, which would wrap it
            raise WrappedServerError(
                f"the wrapped server {shlex.join(launcher.argv)}: its tools/list went on past "
                f"{launcher.tool_pages} pages (a server that paginates forever)"
            )
        found[names] = tools

    async def probe() -> _Probe:
        found: dict[frozenset[str], list[types.Tool]] = {}
        listing: list[Listing] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(read, frozenset(), found, listing)
            tg.start_soon(read, _EVERYTHING, found, listing)
        if {t.name for t in found[frozenset()]} != {t.name for t in found[_EVERYTHING]}:
            async with anyio.create_task_group() as tg:
                for name in CAPABILITIES:
                    tg.start_soon(read, frozenset({name}), found, listing)
        return _Probe(found, listing[0])

    outcome: list[_Probe | BaseException] = []

    def run() -> None:
        try:
            outcome.append(anyio.run(probe))
        except BaseException as exc:  # handed to the caller's thread just below
            outcome.append(exc)

    thread = threading.Thread(target=run, name="mcpgym-wrap-probe")
    thread.start()
    thread.join()
    failure = outcome[0]
    while isinstance(failure, BaseExceptionGroup) and failure.exceptions:
        failure = failure.exceptions[0]
    if isinstance(failure, WrappedServerError):
        raise failure
    if isinstance(failure, BaseException):
        raise RuntimeError(f"could not list the tools of {shlex.join(launcher.argv)}: {failure}") from failure
    assert isinstance(outcome[0], _Probe)
    return outcome[0]


async def _listing(client: Client) -> Listing:
    """Resources, templates and prompts, for a server that declares them (else none)."""
    caps = client.server_capabilities
    resources: list[types.Resource] = []
    templates: list[types.ResourceTemplate] = []
    prompts: list[types.Prompt] = []
    if caps.resources is not None:
        resources = await _pages(client.list_resources, "resources")
        templates = await _pages(client.list_resource_templates, "resource_templates")
    if caps.prompts is not None:
        prompts = await _pages(client.list_prompts, "prompts")
    return Listing(tuple(resources), tuple(templates), tuple(prompts))


async def _pages(method: Any, attribute: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(100):  # a server whose cursor never ends cannot hang wrap()
        page = await method(cursor=cursor)
        items.extend(getattr(page, attribute))
        cursor = page.next_cursor
        if not cursor:
            break
    return items


def _check_names(tasks: Sequence[TaskSpec], listing: Listing) -> None:
    """Task prompts and the wrapped server's prompts share one namespace: refuse a clash here
    (a prompt name would otherwise mean two things), as task resources keep to mcpgym://tasks/."""
    theirs = {prompt.name for prompt in listing.prompts}
    clash = sorted(task.id for task in tasks if task is not _NO_TASK and task.id in theirs)
    if clash:
        raise ValueError(f"task id(s) {', '.join(clash)} clash with the wrapped server's prompts of those names")
    if any(resource.uri.startswith(URI_PREFIX) for resource in listing.resources):
        raise ValueError(f"the wrapped server lists resources under {URI_PREFIX}, which the task catalog owns")


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
