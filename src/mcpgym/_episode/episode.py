"""The episode core: one environment instance, its step accounting, and every tool call.

Layer: the one place that owns an episode. Protocol-free (it speaks in MCP *types*, never
in transports): the MCP server handlers and the in-process client both drive exactly this
code, which is why their results are identical. Imports `_environment`, `_tools`, `_protocol`.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import random
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import anyio
import mcp_types as types
import pydantic_core
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from mcpgym._core.errors import INTERNAL_ERROR, INVALID_PARAMS, MCPError
from mcpgym._core.fastpath import Turns
from mcpgym._core.protocol import RUBRIC_KEY, STEP_KEY, STEP_VERSION, SUCCESS_KEY, ResetResult
from mcpgym._core.tasks import CURRICULUM_KEY
from mcpgym._core.types import UNKNOWN_TOOL_INFO, EpisodeState, ToolStep, tool_step, unknown_tool_step
from mcpgym._episode.catalog import Task
from mcpgym._episode.config import CALL_TIMEOUT, CLOSE_WAIT
from mcpgym._episode.environment import LEDGER, Environment, Reset, StepLedger
from mcpgym._episode.host import Host
from mcpgym._episode.render import rendering
from mcpgym._episode.scoring import EpisodeScore
from mcpgym._episode.tools import BoundTool, LazyTools, UnsendableResult
from mcpgym._recording.recording import EpisodeLog, Recorder
from mcpgym.rubrics._core import Rubric

logger = logging.getLogger("mcpgym")

TaskList = Callable[[], Awaitable[Sequence[Task]]]
"""The environment's catalog, as whoever serves the episode loads it (once, on another instance)."""


class Episode:
    """One episode: created by `start()`, driven by `call()`, ended by `close()` (exactly once)."""

    def __init__(
        self,
        env: Environment,
        episode_id: str,
        *,
        owns_env: bool = True,
        recorder: Recorder | None = None,
        implicit: bool = False,
        call_timeout: float | None = CALL_TIMEOUT,
        time_async_tools: bool = False,
        host: Host | None = None,
    ) -> None:
        self.env = env
        if host is not None:
            env.host = host
        self.id = episode_id
        self.owns_env = owns_env
        self.recorder = recorder
        self.implicit = implicit
        self.owner: str | None = None
        self.call_timeout = env.call_timeout if env.call_timeout is not None else call_timeout
        # The call timeout always bounds sync tools (a worker thread cannot be cancelled by the
        # caller); async tools only where asked (the server), since a cancel scope per step costs
        # more than an in-process step itself, whose caller can cancel an async tool on its own.
        self._await_directly = self.call_timeout is None or not time_async_tools
        self._log: EpisodeLog | None = None
        tools = type(env).__mcpgym_tools__
        # A lazy table (a wrapped server's) is read through once: lookups then hit a plain dict.
        self.tools: Mapping[str, BoundTool] = tools.loaded() if isinstance(tools, LazyTools) else tools
        self.step_count = 0
        self.total_reward = 0.0
        self.done = False
        self.truncated = False
        self.seed: int | None = None
        self.task_id: str | None = None
        """The catalog task this episode plays, when the server knows it (`_server.curriculum`)."""
        self.last_active = time.monotonic()
        self.closed = False
        self.score: EpisodeScore | None = None
        """The rubric's state when the environment has one (set by `start`)."""
        self.final: EpisodeState | None = None
        """The state as the episode closed (its return includes a trajectory score made then)."""
        self._turns = Turns()
        self._abandoned: threading.Event | None = None
        """Set once the worker thread of a sync tool abandoned by a timeout or a cancellation ends."""

    async def start(
        self, seed: int | None, options: dict[str, Any] | None, tasks: TaskList | None = None
    ) -> ResetResult:
        """Reset the environment. `tasks`: the catalog, read only when a reset that names a
        `task_id` fails, to tell an unknown task (the caller's mistake) from a broken reset."""
        if options and CURRICULUM_KEY in options:  # a server resolves it before the episode starts
            raise MCPError(
                INVALID_PARAMS,
                f"{CURRICULUM_KEY}: drawing a task from the curriculum needs a server (its sampler lives there); "
                "serve the environment (mcpgym serve ... --curriculum learnability) and connect to it",
            )
        self.seed = seed
        self.env.rng = random.Random(seed)
        try:
            returned = await _run_user(self.env.reset, seed=seed, options=options)
            observation, info = (returned.observation, returned.info) if isinstance(returned, Reset) else (returned, {})
            if not isinstance(info, dict):
                raise TypeError(f"Reset.info must be a dict, not {type(info).__name__}")
            jsonable = pydantic_core.to_jsonable_python(observation)  # raises on what JSON cannot carry
            # An episode may have tools of its own (a wrapped server lists some only to clients
            # declaring a capability): an instance attribute set by reset, else the class's.
            self.tools = self.env.__mcpgym_tools__
            info = dict(pydantic_core.to_jsonable_python(info))
        except Exception as exc:
            unknown = await _unknown_task(options, tasks, f"{type(self.env).__name__}.reset", exc)
            if unknown is not None:
                raise unknown from exc  # the caller's mistake, said once to the caller: no traceback
            logger.exception("%s.reset failed", type(self.env).__name__)
            raise MCPError(INTERNAL_ERROR, f"{type(self.env).__name__}.reset raised {_describe(exc)}") from exc
        if (rubric := self.env.rubric) is not None:
            if not isinstance(rubric, Rubric):  # set by a constructor (a class attribute is checked at definition)
                raise MCPError(INTERNAL_ERROR, f"{type(self.env).__name__}.rubric is not an mcpgym.rubrics.Rubric")
            self.score = EpisodeScore(rubric, jsonable)
            trajectory = [name for name, _, _ in rubric.trajectory_parts]
            info[RUBRIC_KEY] = {"components": list(rubric.components), "trajectory": trajectory}
        if (best := type(self.env).max_reward) is not None:
            info[SUCCESS_KEY] = {"max_reward": best}
        if self.recorder is not None:
            name = type(self.env).__name__
            self._log = self.recorder.open(self.id, name, seed, options, self.implicit, task_id=self.task_id)
            await self._log.reset(jsonable, render=self._recorded_render())
        return ResetResult(observation=jsonable, info=info)

    @property
    def busy(self) -> bool:
        """A tool call is running (idle expiry leaves such an episode alone)."""
        return self._turns.busy

    def _recorded_render(self) -> dict[str, Any] | None:
        """The environment's render() for the record (what the viewer shows after each step);
        None when it has none. A render that fails is left out: it must not fail a step."""
        if type(self.env).render is Environment.render:
            return None  # nothing to show: skip the call
        try:
            picture = rendering(self.env.render())
        except Exception:
            logger.exception("%s.render failed; the step is recorded without it", type(self.env).__name__)
            return None
        if picture is None:
            return None
        recorded: dict[str, Any] = picture.model_dump(exclude_none=True, exclude={"image", "mime_type"})
        if picture.image is not None:  # as an image block, so the recorder stores it once as a blob
            recorded["image"] = {"type": "image", "data": picture.image, "mimeType": picture.mime_type}
        return recorded

    def state(self, *, render: bool = True) -> EpisodeState:
        """The episode's snapshot; `render=False` leaves out the environment's `render()`."""
        try:
            info = pydantic_core.to_jsonable_python(self.env.state_info())
        except Exception as exc:
            raise MCPError(INTERNAL_ERROR, f"{type(self.env).__name__}.state_info raised {_describe(exc)}") from exc
        picture = None
        if render and not self.closed:
            try:
                picture = rendering(self.env.render())
            except Exception as exc:
                raise MCPError(INTERNAL_ERROR, f"{type(self.env).__name__}.render raised {_describe(exc)}") from exc
        return EpisodeState(
            episode_id=self.id,
            environment=type(self.env).__name__,
            step_count=self.step_count,
            total_reward=self.total_reward if self.score is None else self.score.total,
            done=self.done,
            truncated=self.truncated,
            seed=self.seed,
            info=info,
            terminated=self.done and not self.truncated,
            components={} if self.score is None else dict(self.score.components),
            render=picture,
        )

    async def call(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        """One step, as the MCP server answers it: the result with its step stamp in `_meta`.

        An unknown tool is a protocol error on the wire, as the MCP spec has it; the step it
        counted rides in the error's `data`, from which mcpgym's client rebuilds the same
        `is_error` step the in-process door returns."""
        step = await self.step(name, arguments)
        result = step.observation  # always this step's own object (see _convert), so stamp it in place
        stamp = {
            "v": STEP_VERSION,
            "reward": step.reward,
            "done": step.done,
            "terminated": step.terminated,
            "truncated": step.truncated,
            "step": step.info["step"],
        }
        if step.components:
            stamp["components"] = step.components
        if self.seed is not None:
            stamp["seed"] = self.seed
        if self.task_id is not None:
            stamp["task"] = self.task_id
        if stamp["reward"] != stamp["reward"]:  # NaN: unscored. JSON has no NaN: null says it.
            stamp["reward"] = None
        if UNKNOWN_TOOL_INFO in step.info:  # on the wire a protocol error, its step in the data
            raise MCPError(INVALID_PARAMS, step.text, {STEP_KEY: stamp})
        result.meta = {**(result.meta or {}), STEP_KEY: stamp}
        return result

    async def step(self, name: str, arguments: dict[str, Any] | None) -> ToolStep:
        """Run one tool call as one step, with its reward and done attached (what the in-process
        door returns as it stands). Every call is a result; an unknown tool's is an `is_error`
        step marked `info[UNKNOWN_TOOL_INFO]` (rfcs/0001: what an RL loop sees), counted like
        any other call so `max_steps` still ends a policy that only invents names."""
        spec = self.tools.get(name)
        if spec is None:
            return await self._unknown(name, arguments)
        if not self._turns.take_nowait():
            await self._turns.wait()
        try:
            if self.closed:  # closed while this call waited its turn
                raise unknown_episode()
            arguments = arguments or {}
            started = time.time() if self._log is not None else 0.0  # wall time only for the record
            ledger = StepLedger()  # this step's own: what its tool reports (none runs once it is over)
            refused = self.done  # a call after the end: no tool runs, and it is not a step of the record
            if refused:
                over = _error("The episode is over; start a new one with reset().")
                outcome = tool_step(over, 0.0, True, self.truncated, self.step_count)
            else:
                # Validate, call, convert: every failure becomes an `isError` result, never a
                # raise. Written out here rather than in a helper coroutine: one frame less per step
                # (benchmarks/bench_hotpath.py, "inline step body").
                token = LEDGER.set(ledger)
                kwargs: dict[str, Any] | None = None
                try:
                    kwargs = spec.validate(arguments)
                    method = getattr(self.env, spec.method_name)
                    if spec.is_async and self._await_directly:
                        value = await method(**kwargs)  # the common case, awaited here: no helper frame
                    else:
                        value = await self._call_guarded(spec, method, kwargs)
                except MCPError:
                    raise
                except Exception as exc:
                    if kwargs is not None:
                        result = _tool_failure(spec.name, exc)
                    elif isinstance(exc, ValidationError):
                        result = _error(f"Invalid arguments for tool {spec.name!r}: {_summarise(exc)}")
                    else:  # not a tool call MCP could carry (say, arguments that are not an object)
                        malformed = f"Malformed call of tool {spec.name!r}: {_describe(exc)}"
                        raise MCPError(INVALID_PARAMS, malformed) from exc
                else:
                    result = _convert(spec, value)
                finally:
                    LEDGER.reset(token)
                    self.last_active = time.monotonic()
                outcome = self._account(result, ledger, name, arguments)
            if self.score is not None and self.done and not self.score.finished:
                outcome = await self._finish_scoring(outcome)
            if self._log is not None and not refused:
                own = None if self.score is None else ledger.reward  # with a rubric, the rubric's input
                picture = self._recorded_render()
                await self._log.step(name, arguments, outcome, own, ledger.signals, started=started, render=picture)
            return outcome
        finally:
            self._turns.release()

    async def _unknown(self, name: str, arguments: dict[str, Any] | None) -> ToolStep:
        """An unknown tool's step: counted (reward 0) unless the episode is already over."""
        if not self._turns.take_nowait():
            await self._turns.wait()
        try:
            if self.closed:
                raise unknown_episode()
            message = unknown_tool(name, self.tools).message
            if self.done:
                return unknown_tool_step(message, True, self.truncated, self.step_count)  # counts nothing
            arguments = arguments or {}
            started = time.time()
            ledger = StepLedger()
            outcome = self._account(_error(message), ledger, name, arguments, unknown=True)
            if self.score is not None and self.done and not self.score.finished:
                outcome = await self._finish_scoring(outcome)
            if self._log is not None:
                own = None if self.score is None else ledger.reward
                await self._log.step(name, arguments, outcome, own, ledger.signals, started=started)
            return outcome
        finally:
            self._turns.release()

    async def _call_guarded(self, spec: BoundTool, method: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        """A sync tool (in a worker thread unless inline), or any tool under the call timeout."""
        if spec.is_async or spec.inline:
            if self._await_directly:
                return await _call_tool(spec, method, kwargs)
            with anyio.move_on_after(self.call_timeout):
                return await _call_tool(spec, method, kwargs)
            # Only a timeout gets here. A ToolError's message is the whole result text (_tool_failure).
            raise ToolError(f"Tool {spec.name!r} timed out after {self.call_timeout:g}s; the episode goes on")
        ended = threading.Event()
        try:
            with anyio.move_on_after(math.inf if self.call_timeout is None else self.call_timeout):
                return await _call_in_thread(method, kwargs, ended)
        finally:
            if not ended.is_set():
                # Timed out or cancelled (a client gone, a request cancelled) while the worker
                # thread runs on: it cannot be stopped, so the episode ends here (done and
                # truncated) rather than let the next step or close() use the instance with it.
                self._abandoned = ended
                self.done = self.truncated = True
        ledger = LEDGER.get()
        assert ledger is not None
        ledger.stranded = True
        raise ToolError(
            f"Tool {spec.name!r} timed out after {self.call_timeout:g}s; its worker thread cannot be stopped, "
            "so the episode ends"
        )

    def _account(
        self,
        result: types.CallToolResult,
        ledger: StepLedger,
        name: str,
        arguments: dict[str, Any],
        *,
        unknown: bool = False,
    ) -> ToolStep:
        self.step_count += 1
        if ledger.stranded:
            self.done = self.truncated = True
        elif ledger.finished:
            self.done = True
            self.truncated = ledger.truncated
        elif self.env.max_steps is not None and self.step_count >= self.env.max_steps:
            self.done = self.truncated = True
        if self.score is None:
            self.total_reward += ledger.reward
            return tool_step(result, ledger.reward, self.done, self.truncated, self.step_count, unknown=unknown)
        # With a rubric, the environment's own reward is one of the rubric's inputs.
        terminated = self.done and not self.truncated
        reward, components = self.score.step(
            name, arguments, result, ledger.reward, ledger.signals, self.step_count, terminated, self.truncated
        )
        self.total_reward = self.score.total
        return tool_step(result, reward, self.done, self.truncated, self.step_count, components, unknown=unknown)

    async def _finish_scoring(self, last: ToolStep) -> ToolStep:
        """The last step also carries the trajectory components (awaited here: the final
        result waits for a judge)."""
        assert self.score is not None
        added, final = await self.score.finish(type(self.env).__name__, self.seed, last.terminated, last.truncated)
        self.total_reward = self.score.total
        components = {**last.components, **final}
        unknown = UNKNOWN_TOOL_INFO in last.info
        reward = last.reward + added
        return tool_step(
            last.observation, reward, last.done, last.truncated, self.step_count, components, unknown=unknown
        )

    def _final_state(self) -> EpisodeState | None:
        try:
            return self.state(render=False)  # the final state is data, not a picture
        except MCPError:
            return None  # state_info raised: the close goes on without a final state

    async def close(self) -> None:
        """Release the environment: idempotent; `env.close()` runs once, after a running step
        ends (waiting at most the call timeout), and even under cancellation. Steps still
        queued get the unknown-episode error."""
        if self.closed:
            return
        self.closed = True
        with anyio.CancelScope(shield=True):
            waited = False
            with anyio.move_on_after(CLOSE_WAIT):
                if not self._turns.take_nowait():
                    await self._turns.wait()
                waited = True
            if self._abandoned is not None and not self._abandoned.is_set():
                # A sync tool's thread still runs on this instance: env.close() must not race it.
                await anyio.to_thread.run_sync(self._abandoned.wait, CLOSE_WAIT, abandon_on_cancel=True)
            try:
                if self.score is not None and not self.score.finished:
                    await self.score.finish_on_close(type(self.env).__name__, self.seed, self.truncated)
                    self.total_reward = self.score.total
                self.final = self._final_state()
                if self._log is not None:
                    components = None if self.score is None else self.score.components
                    await self._log.close(self.step_count, self.total_reward, self.done, self.truncated, components)
                if self.owns_env:
                    with anyio.move_on_after(CLOSE_WAIT):
                        await _run_user(self.env.close)
            except Exception:
                logger.exception("%s.close failed for episode %s", type(self.env).__name__, self.id)
            finally:
                # Whatever close() did, and for a shared instance too: held for this episode only.
                await _release_held(self.env)
                if waited:
                    self._turns.release()


async def _release_held(env: Environment) -> None:
    """Start exiting what the episode held with `hold()`, last first (after `close()`, which may
    still use it)."""
    held, env.__mcpgym_held__ = env.__mcpgym_held__, None
    for release in reversed(held or ()):
        await release()


def build(factory: Callable[[], Environment]) -> Environment:
    """A new instance for an episode; a constructor that fails is an internal error, said plainly."""
    try:
        return factory()
    except Exception as exc:
        raise MCPError(INTERNAL_ERROR, f"Building the environment failed: {_describe(exc)}") from exc


def unknown_tool(name: str, tools: Mapping[str, BoundTool]) -> MCPError:
    """A protocol error, as the spec lists unknown tools (rfcs/0001)."""
    return MCPError(INVALID_PARAMS, f"Unknown tool: {name!r}. This environment's tools: {', '.join(tools)}")


def unknown_episode() -> MCPError:
    """The one error for an episode id this caller cannot use (closed, expired, another
    session's, never reset): the same words whatever the reason, so a guess learns nothing."""
    return MCPError(
        INVALID_PARAMS,
        "Unknown episode: it was closed, expired after the idle timeout, or never reset on this "
        "server. Call reset() to start a new episode.",
    )


def _convert(spec: BoundTool, value: Any) -> types.CallToolResult:
    if isinstance(value, types.CallToolResult):
        value = value.model_copy()  # the tool may hand back an object it keeps; we stamp ours
    try:
        return spec.convert(value)
    except ValidationError as exc:
        return _error(f"Tool {spec.name!r} returned a value that does not match its output schema: {_summarise(exc)}")
    except UnsendableResult as exc:
        return _error(f"Tool {spec.name!r} {exc}")
    except Exception as exc:
        return _error(f"Tool {spec.name!r} returned a value that cannot be sent: {_describe(exc)}")


async def _call_tool(spec: BoundTool, method: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    if spec.is_async:
        return await method(**kwargs)
    return method(**kwargs)  # inline: a sync tool its author marked cheap enough for the event loop


async def _call_in_thread(method: Callable[..., Any], kwargs: dict[str, Any], ended: threading.Event) -> Any:
    """A sync tool in a worker thread; `ended` is set when the thread is done, even if the call
    was abandoned (its result is then ignored)."""

    def run() -> Any:
        try:
            return method(**kwargs)
        finally:
            ended.set()

    return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)


async def _run_user(fn: Callable[..., Any], **kwargs: Any) -> Any:
    """Run `reset`/`close`, which authors may write sync (then: a worker thread) or async."""
    if inspect.iscoroutinefunction(fn):
        return await fn(**kwargs)
    return await anyio.to_thread.run_sync(functools.partial(fn, **kwargs))


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _tool_failure(name: str, exc: Exception) -> types.CallToolResult:
    if isinstance(exc, ToolError):
        return _error(str(exc))
    logger.warning("tool %r raised", name, exc_info=exc)
    return _error(f"Tool {name!r} raised {_describe(exc)}")


SOME_TASKS = 5
"""How many task ids an unknown `task_id` error lists."""


async def _unknown_task(
    options: dict[str, Any] | None, tasks: TaskList | None, where: str, exc: Exception
) -> MCPError | None:
    """The error for a reset that failed on a `task_id` its catalog does not list; None when
    none was given, the catalog lists it (the reset itself is broken) or there is no catalog."""
    wanted = (options or {}).get("task_id")
    if wanted is None or tasks is None:
        return None
    try:
        ids = [str(task.options.get("task_id", task.id)) for task in await tasks()]
    except Exception:  # the catalog is broken too (in-process: its own exception): report the reset's failure
        return None
    if not ids or str(wanted) in ids:
        return None
    some = ", ".join(ids[:SOME_TASKS]) + (", ..." if len(ids) > SOME_TASKS else "")
    return MCPError(
        INVALID_PARAMS,
        f"Unknown task_id {wanted!r}. This environment's tasks include: {some} ({len(ids)} in all; "
        f"mcpgym.list_tasks lists them). {where} said: {_describe(exc)}",
    )


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _summarise(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)
