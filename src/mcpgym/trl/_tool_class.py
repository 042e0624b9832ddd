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
- `get_reward()` is called once per finished rollout: the episode's return, or None when the
  environment itself failed during the episode (an `MCPError`, a lost connection: any
  exception from a tool call other than the `EnvironmentToolError`s below) or its rubric
  could not score it (a judge that failed). TRL turns None into NaN, and a completion whose
  every reward is NaN is unscorable: left out of its group's baseline, advantage 0. Such a
  failure is also raised to TRL, which shows it to the model as a failed call. When the
  environment's rubric has trajectory components and the episode has not ended, the rollout
  is over when TRL asks, so `get_reward` closes the episode: the server scores the trajectory
  (rfcs/0007-rewards.md) and the return is the closed episode's (step rewards plus that score).
  Otherwise it is the sum of the step rewards so far, and the episode stays open.
- Reward components reach TRL's logging through its one channel for per-source rewards,
  reward functions: `component_rewards(Env)` gives one per rubric component (logged as
  `rewards/<name>/mean`); give them weight 0 in `GRPOConfig.reward_weights` to log them
  without training on them twice.

Errors (what a tool method raises, for TRL to count as a failed call):

    RuntimeError
    └── EnvironmentToolError
        ├── ToolCallError       the tool returned an `isError` result (message: its text)
        └── EpisodeOverError    the episode is already done; the rollout should stop
"""

from __future__ import annotations

import functools
import inspect
import io
import json
import logging
import math
import re
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import mcp_types as types
from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST

from mcpgym._client.shared import SharedClient
from mcpgym._core.content import decoded, images, result_text
from mcpgym._core.errors import MCPError
from mcpgym._core.extras import needs
from mcpgym._core.protocol import RUBRIC_KEY
from mcpgym._episode.environment import Environment
from mcpgym._targets.connect import Target, connect
from mcpgym._targets.spec import connect_options as connect_options_of
from mcpgym._targets.spec import is_spec, load_spec, spec_target
from mcpgym._targets.target import parse
from mcpgym.trl._runtime import Session, runtime
from mcpgym.trl._schema import ToolShape, python_name, tool_shape, unique

log = logging.getLogger("mcpgym.trl")


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
    _multimodal: ClassVar[bool] = False

    def __init__(self) -> None:
        self._session: Session | None = None
        self._return = 0.0
        self._steps = 0
        self._done = False
        self._running = False
        self._failed = False
        self._components: dict[str, float | None] = {}
        self._scored = False
        self._pending = False
        """The rubric has trajectory components: an unfinished episode is scored by closing it."""
        self._terminated = self._truncated = False
        self._reset_info: dict[str, Any] = {}
        self._broken = False

    def reset(self, **row: Any) -> str | None:
        """Start an episode from a dataset row (`seed`, `options`, option columns); return its first observation.

        TRL keeps an instance for the whole run, so a connection that broke (the server died or
        restarted) is replaced here: stdio relaunches the command, HTTP opens a new session."""
        seed, options = row.get("seed"), episode_options(row, self._option_columns)
        self._running = False
        if self._broken or self._session is None or not self._session.alive:  # first use, close(), fork, lost
            self._reconnect()
        assert self._session is not None
        try:
            first = self._session.call(self._session.env.reset, seed, options)
        except MCPError as exc:
            if not connection_lost(exc):
                raise
            # Found broken only now (e.g. the server restarted between episodes): one fresh try.
            self._reconnect()
            first = self._session.call(self._session.env.reset, seed, options)
        self._return, self._steps, self._done, self._running, self._failed = 0.0, 0, False, True, False
        self._components, self._scored, self._terminated, self._truncated = {}, False, False, False
        self._pending = bool((first.info.get(RUBRIC_KEY) or {}).get("trajectory"))
        self._reset_info = dict(first.info)
        text = type(self)._render(first.observation)
        return None if text is None else separated(row.get("prompt"), text)

    def get_reward(self) -> float | None:
        """The episode's return (closing it, so a trajectory rubric scores it); None when the
        environment failed during the episode or its rubric could not score it (TRL then
        leaves the rollout unscored, never 0)."""
        self._finish()
        return None if self._failed or math.isnan(self._return) else self._return

    @property
    def components(self) -> dict[str, float | None]:
        """The episode's rubric components (each summed over its steps; trajectory components
        once the episode ends or `get_reward` closes it). Empty without a rubric."""
        return dict(self._components)

    @property
    def terminated(self) -> bool:
        """The episode ended on the task's own terms (Gymnasium's `terminated`)."""
        return self._terminated

    @property
    def truncated(self) -> bool:
        """The episode was cut short (a step limit): Gymnasium's `truncated`."""
        return self._truncated

    def _finish(self) -> None:
        """Close the running episode once and take its final return and components."""
        if not self._pending or self._done or self._scored or self._failed or self._session is None:
            return
        if not self._running:
            return
        self._scored, self._running = True, False
        try:
            final = self._session.call(self._session.env.close_episode)
        except Exception:
            self._failed = True  # the score could not be fetched: unscored, never 0
            return
        if final is not None:
            self._return, self._components = final.total_reward, dict(final.components)

    @property
    def failed(self) -> bool:
        """The environment (not the model) failed during the current episode."""
        return self._failed

    @property
    def done(self) -> bool:
        """The current episode has ended (the environment said done or truncated)."""
        return self._done

    @property
    def reset_info(self) -> dict[str, Any]:
        """The `info` the environment's `reset` returned (`mcpgym.Reset(..., info=...)`), e.g.
        for a reward function that needs the task's metadata; never shown to the model."""
        return self._reset_info

    @property
    def episode_return(self) -> float:
        return self._return

    @property
    def step_count(self) -> int:
        """Tool calls the environment answered in this episode."""
        return self._steps

    def _reconnect(self) -> None:
        self._broken = False
        if self._session is not None and self._session.alive:  # a forked child's belongs to its parent's loop
            self._close()
        self._session = runtime.open(self._target, self._connect_options)

    def _close(self) -> None:
        """Close this instance's connection (TRL never does; the process exit does it otherwise)."""
        session, self._session = self._session, None
        self._running = False
        if session is not None:
            try:
                session.close()
            except Exception:  # a broken connection may fail to close; its replacement must still open
                log.warning("mcpgym.trl: closing a broken environment connection failed", exc_info=True)

    def _call_tool(self, name: str, arguments: dict[str, Any]) -> str | list[dict[str, Any]]:
        if self._session is None or not self._running:
            raise EnvironmentToolError("No episode is running: the trainer must call reset() first.")
        if self._done:
            raise EpisodeOverError("The episode is over: stop calling tools and give your final answer.")
        try:
            if not self._session.alive:  # its loop is gone: a call would raise or hang forever
                raise RuntimeError("The environment connection was closed; reset() opens a new one.")
            result = self._session.call(self._session.env.call_tool, name, arguments)
        except Exception as exc:
            self._failed = True  # the infrastructure failed, not the model: the episode goes unscored
            self._broken = isinstance(exc, MCPError) and connection_lost(exc)  # the next reset reconnects
            raise
        self._return += result.reward
        self._steps += 1
        self._done = result.done
        self._terminated, self._truncated = result.terminated, result.truncated
        for component, value in result.components.items():
            before = self._components.get(component, 0.0)
            self._components[component] = None if before is None or value is None else before + value
        text = tool_text(result.observation)
        if result.is_error:
            raise ToolCallError(text or f"Tool {name!r} failed.")
        if self._multimodal and images(result.observation):
            return multimodal_content(result.observation)
        return text


def environment_class(
    target: Target,
    *,
    name: str | None = None,
    option_columns: Sequence[str] = (),
    observation: Callable[[Any], str | None] | None = None,
    multimodal: bool = False,
    **connect_options: Any,
) -> type[MCPEnvironment]:
    """A class for `GRPOTrainer(environment_factory=...)`, with one method per MCP tool of `target`.

    `target` is anything `mcpgym.connect` accepts; an Environment class (or
    `"package.module:Class"`, `"package.module"`, `"path/to/env.py"`) runs in-process, which
    is the cheapest door since calls multiply by rollouts x turns. The tools are listed once,
    now. `name` is the class name (TRL logs the reward as `rewards/<name>/mean`); by default the environment's name plus
    `Env`. Dataset columns named in `option_columns` are passed to `reset` inside `options`.
    `observation` turns the first observation into prompt text (default: strings as they
    are, anything else as JSON; None leaves the prompt alone). `multimodal=True` returns a
    result that holds images in TRL's multimodal tool-result form (`multimodal_content`; needs
    Pillow) for vision-language models; otherwise each image is a line of text naming it
    (`tool_text`). `connect_options` go to `mcpgym.connect` for every instance.
    """
    if multimodal:
        _pillow()
    if is_spec(target):  # an mcpgym.yaml run spec: its class (or partial), resolved once
        spec = load_spec(target)
        target, connect_options = spec_target(spec), {**connect_options_of(spec), **connect_options}
    parsed = parse(target)
    if parsed.form == "environment":
        target = parsed.value  # `module:Class`, `module`, `file.py`: a class, in-process for every instance
    if isinstance(target, SharedClient):  # bound to its own loop: ours shares the server through its own
        connect_options = {**target.options(), **connect_options}
        target = target.target
    tools, server_name, instructions = runtime.run(_discover, target, connect_options)
    namespace: dict[str, Any] = {
        # A partial as a plain class attribute becomes a method descriptor in newer Pythons
        # (3.13 warns): staticmethod keeps it the object itself.
        "_target": staticmethod(target) if isinstance(target, functools.partial) else target,
        "_connect_options": dict(connect_options),
        "_option_columns": tuple(option_columns),
        "_instructions": instructions,
        "_tool_shapes": tuple(tool_shape(t) for t in tools),
        "_render": staticmethod(observation or observation_text),
        "_multimodal": multimodal,
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


def connection_lost(exc: MCPError) -> bool:
    """The connection, not the request, failed: the server died, is unreachable, or (restarted)
    no longer knows this client's HTTP session."""
    return exc.code == CONNECTION_CLOSED or (exc.code == INVALID_REQUEST and "Session" in exc.message)


def tool_method(shape: ToolShape) -> Callable[..., str | list[dict[str, Any]]]:
    """A method that calls `shape`'s tool; TRL and transformers see its metadata, not its body."""
    wire = shape.wire_names()

    def call(self: MCPEnvironment, **arguments: Any) -> str | list[dict[str, Any]]:
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


def component_rewards(env: type[MCPEnvironment] | Any, names: Sequence[str] | None = None) -> list[Callable[..., Any]]:
    """TRL reward functions, one per rubric component of `env` (its generated class), each
    named after its component so TRL logs it as `rewards/<name>/mean`. `names` defaults to the
    components of the environment's declared rubric (in-process targets); pass them for others.
    Each reads the rollout's environment (TRL's `environments=`), closing the episode first as
    `get_reward` does. Give them weight 0 in `reward_weights` to log without training on them."""
    return [ComponentReward(name) for name in (_component_names(env) if names is None else names)]


class ComponentReward:
    """A TRL reward function reading one rubric component of each rollout's environment.

    A callable instance (picklable, unlike a closure) whose `__name__` is the component's,
    which is what TRL logs it by. It is None wherever `get_reward()` is None: TRL leaves a
    completion unscored only when *every* reward function says None, and a weight-0 column
    that still said 0.25 would turn an unscored episode into a scored 0."""

    def __init__(self, name: str) -> None:
        self.__name__ = name

    def __call__(self, environments: Sequence[MCPEnvironment] | None = None, **kwargs: Any) -> list[float | None]:
        values: list[float | None] = []
        for environment in environments or ():
            unscored = environment.get_reward() is None
            values.append(None if unscored else environment._components.get(self.__name__))
        return values

    def __repr__(self) -> str:
        return f"ComponentReward({self.__name__!r})"


def _component_names(env: Any) -> list[str]:
    target = getattr(env, "_target", env)
    parsed = parse(target)
    if parsed.form == "environment":
        target = parsed.value
    cls = target.func if isinstance(target, functools.partial) else target
    rubric = getattr(cls, "rubric", None)
    if isinstance(target, functools.partial) and target.keywords.get("rubric") is not None:
        rubric = target.keywords["rubric"]
    if rubric is None:
        raise ValueError(f"cannot find a rubric on {target!r}: pass the component names")
    return list(rubric.components)


def episode_options(row: dict[str, Any], columns: Sequence[str]) -> dict[str, Any] | None:
    options = row.get("options")
    if isinstance(options, str):  # `dataset()` stores options as JSON text (an Arrow struct would reshape them)
        options = json.loads(options)
    merged = dict(options) if isinstance(options, dict) else {}
    merged.update({c: row[c] for c in columns if c in row})
    return merged or None


def tool_text(observation: Any) -> str:
    """What an agent reads of a tool result: its text content, a line per image or audio block
    saying what it is (type, size, content hash), else its structured content as JSON (so a
    structured-only result is not empty). The harness shows the same text."""
    return result_text(observation)


def multimodal_content(observation: Any) -> list[dict[str, Any]]:
    """A tool result as TRL's multimodal tool content (trl 1.16 `GRPOTrainer._tool_call_loop`
    passes a returned list through as the tool message's content and feeds each
    `{"type": "image", "image": ...}` block's image to the processor): one block per image, as
    a `PIL.Image`, then the rest of the result as one text block."""
    Image = _pillow()
    parts: list[dict[str, Any]] = []
    for block in images(observation):
        picture = Image.open(io.BytesIO(decoded(block.data)))
        picture.load()
        parts.append({"type": "image", "image": picture})
    assert isinstance(observation, types.CallToolResult)
    rest = types.CallToolResult(
        content=[b for b in observation.content if not isinstance(b, types.ImageContent)],
        structured_content=observation.structured_content,
    )
    parts.append({"type": "text", "text": tool_text(rest)})
    return parts


def _pillow() -> Any:
    with needs("vision", "multimodal tool results (Pillow)"):
        from PIL import Image
    return Image


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
        session = getattr(env.door, "session", None)  # an MCP door's session: the server's own words
        if session is not None:
            info = session.server_info
            return tools, info.name if info else "MCP", session.instructions
    cls = target.func if isinstance(target, functools.partial) else target
    if isinstance(cls, Environment):
        cls = type(cls)
    if inspect.isclass(cls) and issubclass(cls, Environment):
        return tools, cls.__name__, cls.instructions or inspect.getdoc(cls)
    return tools, "MCP", None
