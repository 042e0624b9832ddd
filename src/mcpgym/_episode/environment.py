"""`Environment`: the class an environment author subclasses.

Layer: bottom. The contract, written once here (cf. gymnasium.Env):

- Each episode gets its own instance. `reset(seed, options)` starts the episode and returns
  the first observation (anything JSON can carry), or `Reset(observation, info)` to attach an
  `info` dict as well (Gymnasium's `(obs, info)`; clients get it as `reset().info`). It may be
  `async def` or plain `def`.
- Methods decorated with `@mcpgym.tool` are the actions. Inside one, `self.reward(x)` adds
  `x` to this step's reward and `self.finish(reward=None)` ends the episode after this step,
  optionally with a final reward (`finish(truncated=True)`: cut short, not ended on its own
  terms). A tool's return value is its observation, converted to MCP content exactly as the
  MCP SDK converts tool results.
- `self.signal(name, value)` reports a named fact about this step (tests passed, a hack
  detected) for the environment's `rubric` (class attribute or set in `__init__`), which then
  makes the reward from named components (`mcpgym.rubrics`, rfcs/0007-rewards.md). Without a
  rubric the reward is what `reward()` / `finish()` gave.
- `max_steps` (class attribute) truncates an episode after that many tool calls.
- `self.rng` is a `random.Random` seeded from `reset(seed=...)` before `reset` runs.
- `close()` releases resources; mcpgym calls it exactly once per instance.
- `await self.hold(cm)` enters an async context manager (an MCP client session, a process) for
  the rest of the episode; it is exited after `close()`. `self.host.state` is shared by every
  episode of whoever serves the class (a server, an in-process client).
- `render()` shows people the current state (text, markdown or an image: `mcpgym.Render`) on
  the web page, in `mcpgym play` and in `env.state().render`; agents never see it.
- `catalog()` lists the tasks the environment offers (MCP prompts and resources; see `_catalog`).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import math
import random
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from mcpgym._episode.catalog import Task
from mcpgym._episode.host import Host, Release
from mcpgym._episode.render import Render
from mcpgym._episode.tools import BoundTool, collect_tools
from mcpgym.rubrics._core import Rubric

T = TypeVar("T")


@dataclass
class StepLedger:
    """What a tool call reported through `reward()` / `finish()`; owned by the episode core."""

    reward: float = 0.0
    finished: bool = False
    truncated: bool = False
    """`finish(truncated=True)`: the episode was cut short (a foreign time limit), not ended on its own terms."""
    signals: dict[str, Any] | None = None
    stranded: bool = False
    """The call timed out in a worker thread that cannot be stopped: the episode must end."""


@dataclass(frozen=True)
class Reset:
    """What `Environment.reset` may return to give the first observation *and* an `info` dict
    (JSON-compatible; never shown to agents), which `env.reset()` returns as `StepResult.info`
    on every door. A bare return value is the observation with empty info, as before.

    A class rather than a tuple: a tuple is a valid observation (a JSON list) today, and reading
    `(a, b)` as `(obs, info)` would silently change what such environments return."""

    observation: Any = None
    info: dict[str, Any] = field(default_factory=dict)


LEDGER: contextvars.ContextVar[StepLedger | None] = contextvars.ContextVar("mcpgym_ledger", default=None)
"""The running tool call's ledger. A context variable, not an attribute: a sync tool's worker
thread gets a copy of the context, so a thread abandoned after a timeout can only ever write to
its own (already accounted) ledger, never to a later step's."""


class Environment:
    """Base class of every mcpgym environment. Its contract is this module's docstring (on the
    documentation site: API reference, mcpgym, The Environment contract)."""

    max_steps: ClassVar[int | None] = None
    """Truncate the episode (done, truncated) after this many tool calls; None: no limit."""

    max_reward: ClassVar[float | None] = None
    """The best return an episode can earn, sent in `reset`'s info (`SUCCESS_KEY`): `mcpgym eval`
    counts an episode whose return reaches it a success. None: not declared."""

    call_timeout: ClassVar[float | None] = None
    """Seconds a tool call may run before it fails with a timeout result; None: the server's
    setting (300 s by default; in-process: none). An `async` tool is cancelled and the episode
    goes on; a sync tool's worker thread cannot be stopped, so its timeout ends the episode.
    `inline=True` tools block the loop and cannot be timed out."""

    instructions: ClassVar[str | None] = None
    """Shown to MCP clients as the server's instructions; defaults to the class docstring."""

    __mcpgym_tools__: ClassVar[Mapping[str, BoundTool]] = {}

    rubric: Rubric | None = None
    """Scores every episode from named components (`mcpgym.rubrics`); None: the reward is what
    the tools' `reward()` / `finish()` calls add up to."""

    rng: random.Random

    host: Host | None = None
    """Whoever serves this episode (set by mcpgym before `reset`); None when nothing does, e.g.
    an instance driven without `async with mcpgym.connect(...)`."""

    __mcpgym_held__: list[Release] | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Built at class creation so a bad signature fails where it is written, not at serve time.
        cls.__mcpgym_tools__ = collect_tools(cls)
        _check_rubric(cls.rubric, cls.__name__)

    @classmethod
    def tools_for(cls, capabilities: Any) -> Mapping[str, BoundTool]:
        """The tools listed to an MCP client declaring `capabilities` (`mcp_types.ClientCapabilities`
        or None). Every client sees the class's tools; `mcpgym.wrap` classes override it."""
        return cls.__mcpgym_tools__

    @classmethod
    async def start_hosting(cls, host: Host) -> None:
        """Called when a server that serves the class starts, with its host, before any episode:
        start what its episodes will share (`mcpgym.wrap`'s warm pool). Override; the default
        does nothing. A failure is logged, and the server starts all the same."""

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        """Start an episode and return its first observation. Override; the default returns None."""
        return None

    async def close(self) -> None:
        """Release what the episode holds. Override; called exactly once per instance."""

    def state_info(self) -> dict[str, Any]:
        """Extra, JSON-compatible facts for `env.state()` (never shown to agents). Override."""
        return {}

    def render(self) -> str | Render | None:
        """The current state for people to look at: plain text, an `mcpgym.Render` (text,
        markdown and/or an image) or None (the page then shows the latest observation). Called
        after reset and each step by whoever shows the episode; it must not change the state.
        Override; the default shows nothing."""
        return None

    async def hold(self, cm: AbstractAsyncContextManager[T]) -> T:
        """Enter `cm` for the rest of this episode and return what it yields; it is exited when
        the episode ends, after `close()` (last held, first exited; for a shared instance, when
        each episode ends, and even when `close()` fails). Use it for what must stay open across steps and runs
        tasks of its own, such as an MCP client session: each step arrives in a task of its own,
        and anyio lets only the task that entered such a context exit it, so the host holds it."""
        if self.host is None:
            raise RuntimeError(
                "hold() needs a host: serve the environment, or drive it with `async with mcpgym.connect(...)`"
            )
        value, release = await self.host.enter(cm)
        if self.__mcpgym_held__ is None:
            self.__mcpgym_held__ = []
        self.__mcpgym_held__.append(release)
        return value

    def catalog(self) -> Sequence[Task]:
        """The tasks this environment offers, in a stable order: served as MCP prompts and
        resources and listed by `mcpgym.list_tasks`. Override; called once per server on an
        instance that is never reset (then closed). Nothing a grader uses may go in a Task."""
        return ()

    def reward(self, value: float) -> None:
        """Add `value` to the reward of the current tool call."""
        _ledger().reward += _finite(value)

    def signal(self, name: str, value: Any) -> None:
        """Report a named, JSON-compatible fact about the current tool call (e.g. the fraction
        of hidden tests passed) for the rubric to score; recorded, never shown to the agent."""
        ledger = _ledger()
        if ledger.signals is None:
            ledger.signals = {}
        ledger.signals[name] = value

    def finish(self, reward: float | None = None, *, truncated: bool = False) -> None:
        """End the episode after the current tool call, optionally adding a final reward;
        `truncated=True` says it was cut short (a time limit of its own, as a bridged Gymnasium
        environment's `TimeLimit`) rather than ended on the task's terms."""
        ledger = _ledger()
        ledger.finished = True
        ledger.truncated = ledger.truncated or truncated
        if reward is not None:
            ledger.reward += _finite(reward)


def _check_rubric(rubric: object, owner: str) -> None:
    if rubric is not None and not isinstance(rubric, Rubric):
        raise TypeError(f"{owner}.rubric must be an mcpgym.rubrics.Rubric or None, not {type(rubric).__name__}")


def _ledger() -> StepLedger:
    ledger = LEDGER.get()
    if ledger is None:
        raise RuntimeError("reward() and finish() can only be called while one of this environment's tools runs")
    return ledger


def _finite(value: float) -> float:
    # JSON has no NaN or infinity: such a reward could not travel, so it is refused where it is made.
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"a reward must be a finite number, not {number}")
    return number


def resolve_factory(env: object) -> tuple[type[Environment], Callable[[], Environment]]:
    """The class and per-episode factory behind an Environment subclass or a
    `functools.partial(Subclass, ...)` (how constructor arguments are passed)."""
    cls = env.func if isinstance(env, functools.partial) else env
    if not (inspect.isclass(cls) and issubclass(cls, Environment)):
        raise TypeError(f"expected an mcpgym.Environment subclass or functools.partial(Subclass, ...), not {env!r}")
    return cls, env  # type: ignore[return-value]
