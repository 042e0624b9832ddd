"""`environment_class(target)`: a TRL `environment_factory` class generated from `tools/list`.

Layer: top (a trainer adapter). Uses the public client API through the shared runtime.

The TRL contract (trl 1.16, `GRPOTrainer(environment_factory=...)`), which this class meets:

- TRL calls the class with no arguments, keeps the instances in a pool for the trainer's
  whole life, and hands one to each rollout. Here an instance is one client connection
  (opened on the first `reset`) and one episode at a time.
- `reset(**row)` gets the whole dataset row before generation and may return text that is
  appended to the prompt's last message. Here it starts a new episode with the row's
  `seed` and `options` columns (plus any `option_columns`), so the G rollouts of a group,
  which get copies of one row, start from one state; it returns the first observation.
- Every public function of the class except `reset` and `get_reward` is a tool, shown to
  the model through transformers' `get_json_schema` and dispatched on `__name__`. Here there
  is one per MCP tool, named exactly as in `tools/list`, its signature and docstring built
  from the `inputSchema` (`_schema`). It returns the result's text: the model never sees
  reward or done. An exception is what TRL counts as a failed call and shows the model as
  `{"error": message}`: an `isError` result raises `ToolCallError` with the text an MCP
  agent would see, and a call after the episode is done raises `EpisodeOverError`.
- `get_reward()` is called once per finished rollout: the episode's return so far (the sum
  of the step rewards from each result's `_meta`), or None when the environment itself failed
  during the episode (an `MCPError`, a lost connection: any exception from a tool call other
  than the `EnvironmentToolError`s below). TRL turns None into NaN, and a completion whose
  every reward is NaN is unscorable: left out of its group's baseline, advantage 0. Such a
  failure is also raised to TRL, which shows it to the model as a failed call.

Errors (what a tool method raises, for TRL to count as a failed call):

    RuntimeError
    └── EnvironmentToolError
        ├── ToolCallError       the tool returned an `isError` result (message: its text)
        └── EpisodeOverError    the episode is already done; the rollout should stop
"""

from __future__ import annotations

import functools
import inspect
import json
import re
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import mcp_types as types

from mcpgym._connect import Target, connect, load_environment
from mcpgym._environment import Environment
from mcpgym._mcp_env import MCPEnv
from mcpgym._shared import SharedClient
from mcpgym.trl._runtime import Session, runtime
from mcpgym.trl._schema import ToolShape, python_name, tool_shape, unique

_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")  # as mcpgym.connect reads targets


class EnvironmentToolError(RuntimeError):
    """A tool call TRL should count as failed (see the module docstring)."""


class ToolCallError(EnvironmentToolError):
    """The tool returned an `isError` result; the message is its text."""


class EpisodeOverError(EnvironmentToolError):
    """A tool was called after the episode ended."""


class MCPEnvironment:
    """Base of the classes `environment_class` generates; use those, not this.

    Only `reset` and `get_reward` are public functions here: TRL turns every other public
    function of the class into a tool. Episode facts for extra reward functions (which TRL
    passes the instances as `environments=`) are read-only properties.
    """

    _target: ClassVar[Target]
    _connect_options: ClassVar[dict[str, Any]] = {}
    _option_columns: ClassVar[tuple[str, ...]] = ()
    _instructions: ClassVar[str | None] = None
    _tool_shapes: ClassVar[tuple[ToolShape, ...]] = ()
    _render: ClassVar[Callable[[Any], str | None]]

    def __init__(self) -> None:
        self._session: Session | None = None
        self._return = 0.0
        self._steps = 0
        self._done = False
        self._running = False
        self._failed = False

    def reset(self, **row: Any) -> str | None:
        """Start an episode from a dataset row (`seed`, `options`, option columns); return its first observation."""
        if self._session is None or not self._session.alive:  # first use, mcpgym.trl.close(), or a fork
            self._session = runtime.open(self._target, self._connect_options)
        first = self._session.call(self._session.env.reset, row.get("seed"), episode_options(row, self._option_columns))
        self._return, self._steps, self._done, self._running, self._failed = 0.0, 0, False, True, False
        text = type(self)._render(first.observation)
        return None if text is None else separated(row.get("prompt"), text)

    def get_reward(self) -> float | None:
        """The episode's return: the sum of its step rewards (0.0 before any step); None when
        the environment failed during the episode, so TRL does not score it."""
        return None if self._failed else self._return

    @property
    def failed(self) -> bool:
        """The environment (not the model) failed during the current episode."""
        return self._failed

    @property
    def done(self) -> bool:
        """The current episode has ended (the environment said done or truncated)."""
        return self._done

    @property
    def episode_return(self) -> float:
        return self._return

    @property
    def step_count(self) -> int:
        """Tool calls the environment answered in this episode."""
        return self._steps

    def _close(self) -> None:
        """Close this instance's connection (TRL never does; the process exit does it otherwise)."""
        session, self._session = self._session, None
        self._running = False
        if session is not None:
            session.close()

    def _call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        if self._session is None or not self._running:
            raise EnvironmentToolError("No episode is running: the trainer must call reset() first.")
        if self._done:
            raise EpisodeOverError("The episode is over: stop calling tools and give your final answer.")
        try:
            if not self._session.alive:  # its loop is gone: a call would raise or hang forever
                raise RuntimeError("The environment connection was closed; reset() opens a new one.")
            result = self._session.call(self._session.env.call_tool, name, arguments)
        except Exception:
            self._failed = True  # the infrastructure failed, not the model: the episode goes unscored
            raise
        self._return += result.reward
        self._steps += 1
        self._done = result.done
        text = tool_text(result.observation)
        if result.is_error:
            raise ToolCallError(text or f"Tool {name!r} failed.")
        return text


def environment_class(
    target: Target,
    *,
    name: str | None = None,
    option_columns: Sequence[str] = (),
    observation: Callable[[Any], str | None] | None = None,
    **connect_options: Any,
) -> type[MCPEnvironment]:
    """A class for `GRPOTrainer(environment_factory=...)`, with one method per MCP tool of `target`.

    `target` is anything `mcpgym.connect` accepts; an Environment class (or
    `"package.module:Class"`) runs in-process, which is the cheapest door since calls
    multiply by rollouts x turns. The tools are listed once, now. `name` is the class name
    (TRL logs the reward as `rewards/<name>/mean`); by default the environment's name plus
    `Env`. Dataset columns named in `option_columns` are passed to `reset` inside `options`.
    `observation` turns the first observation into prompt text (default: strings as they
    are, anything else as JSON; None leaves the prompt alone). `connect_options` go to
    `mcpgym.connect` for every instance.
    """
    if isinstance(target, str) and _IMPORT_PATH.match(target):
        target = load_environment(target)  # a class: picklable, and in-process for every instance
    if isinstance(target, SharedClient):  # bound to its own loop: ours shares the server through its own
        connect_options = {**target.options(), **connect_options}
        target = target.target
    tools, server_name, instructions = runtime.run(_discover, target, connect_options)
    namespace: dict[str, Any] = {
        "_target": target,
        "_connect_options": dict(connect_options),
        "_option_columns": tuple(option_columns),
        "_instructions": instructions,
        "_tool_shapes": tuple(tool_shape(t) for t in tools),
        "_render": staticmethod(observation or observation_text),
        "__module__": __name__,
        "__doc__": f"TRL environment for {server_name} (generated by mcpgym.trl from its tools/list).",
    }
    taken = set(dir(MCPEnvironment))
    for shape in namespace["_tool_shapes"]:
        namespace[unique(attribute_name(shape.name, taken), taken)] = tool_method(shape)
    class_name = name or (re.sub(r"\W", "", server_name) or "MCP") + "Env"
    cls = type(class_name, (MCPEnvironment,), namespace)
    cls.__qualname__ = class_name
    return cls


def tool_method(shape: ToolShape) -> Callable[..., str]:
    """A method that calls `shape`'s tool; TRL and transformers see its metadata, not its body."""
    wire = shape.wire_names()

    def call(self: MCPEnvironment, **arguments: Any) -> str:
        return self._call_tool(shape.name, {wire.get(k, k): v for k, v in arguments.items()})

    call.__name__ = shape.name
    call.__qualname__ = shape.name
    call.__doc__ = shape.docstring()
    call.__signature__ = shape.signature()  # type: ignore[attr-defined]
    call.__annotations__ = shape.annotations()
    return call


def attribute_name(tool_name: str, taken: set[str]) -> str:
    """The tool's own name when it is a usable public attribute; else `tool_<sanitised>`."""
    if tool_name.isidentifier() and python_name(tool_name) == tool_name and not tool_name.startswith("_"):
        if tool_name not in taken and tool_name not in ("reset", "get_reward"):
            return tool_name
    return f"tool_{python_name(tool_name).rstrip('_')}"


def episode_options(row: dict[str, Any], columns: Sequence[str]) -> dict[str, Any] | None:
    options = row.get("options")
    if isinstance(options, str):  # `dataset()` stores options as JSON text (an Arrow struct would reshape them)
        options = json.loads(options)
    merged = dict(options) if isinstance(options, dict) else {}
    merged.update({c: row[c] for c in columns if c in row})
    return merged or None


def tool_text(observation: Any) -> str:
    """What an agent reads of a tool result: its text content, else its structured content as
    JSON (so a structured-only result is not empty). The harness shows the same text."""
    if not isinstance(observation, types.CallToolResult):
        return ""
    text = "\n".join(c.text for c in observation.content if isinstance(c, types.TextContent))
    if not text and observation.structured_content is not None:
        text = json.dumps(observation.structured_content)
    return text


def observation_text(observation: Any) -> str | None:
    """A first observation as prompt text: strings as they are, anything else as JSON."""
    if observation is None or isinstance(observation, str):
        return observation
    return json.dumps(observation, ensure_ascii=False)


def separated(prompt: Any, text: str) -> str:
    # TRL appends the observation to the last message's content with no separator.
    last = prompt[-1].get("content") if isinstance(prompt, list) and prompt and isinstance(prompt[-1], dict) else prompt
    return f"\n\n{text}" if isinstance(last, str) and last.strip() else text


async def _discover(target: Target, options: dict[str, Any]) -> tuple[list[types.Tool], str, str | None]:
    async with connect(target, **options) as env:
        tools = await env.list_tools()
        if isinstance(env, MCPEnv):
            info = env.client.server_info
            return tools, info.name if info else "MCP", env.client.instructions
    cls = target.func if isinstance(target, functools.partial) else target
    if isinstance(cls, Environment):
        cls = type(cls)
    if inspect.isclass(cls) and issubclass(cls, Environment):
        return tools, cls.__name__, cls.instructions or inspect.getdoc(cls)
    return tools, "MCP", None
