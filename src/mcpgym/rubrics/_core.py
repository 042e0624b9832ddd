"""Rubrics: named reward components, composed by weighted sum and gates.

Layer: bottom (plain values and pure functions; imports only `mcp_types`). The episode core
runs a declared rubric on every step and once when the episode ends (rfcs/0007-rewards.md).

A rubric sees only what a recording keeps (the tool call, its result, the environment's own
reward and the *signals* it reported with `Environment.signal`), never the live environment:
so `mcpgym rescore` reproduces every score offline, exactly.

    StepRubric          scores one step: `rubric(step) -> float`
    TrajectoryRubric    scores a finished episode: `await rubric(transcript) -> float | None`
                        (None: the episode is unscored, e.g. a judge that failed; never 0)
    Rubric              the named components an environment declares, their weights and gates
"""

from __future__ import annotations

import abc
import inspect
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import mcp_types as types


class Step(NamedTuple):
    """One scored step: what a step rubric reads. A named tuple: one is built per step, and a
    tuple is the cheapest object Python builds (rfcs/0007: the per-step budget)."""

    tool: str
    arguments: dict[str, Any]
    result: types.CallToolResult
    reward: float
    """What the environment's own `reward()` / `finish(reward=)` gave this step."""
    signals: Mapping[str, Any]
    """What the environment reported with `signal(name, value)` during this step."""
    before: Mapping[str, Any]
    """The latest value of every signal reported before this step."""
    number: int
    terminated: bool
    truncated: bool

    @property
    def is_error(self) -> bool:
        return bool(self.result.is_error)

    @property
    def text(self) -> str:
        return "\n".join(c.text for c in self.result.content if isinstance(c, types.TextContent))


@dataclass(frozen=True)
class Transcript:
    """A whole episode, as a trajectory rubric reads it."""

    environment: str
    task: Any
    """The episode's first observation (what `reset` returned): usually the task."""
    steps: list[Step] = field(default_factory=list)
    terminated: bool = False
    truncated: bool = False
    seed: int | None = None

    @property
    def signals(self) -> dict[str, Any]:
        """The latest value of every signal reported during the episode."""
        latest: dict[str, Any] = {}
        for step in self.steps:
            latest.update(step.signals)
        return latest


class StepRubric(abc.ABC):
    """Scores each step. Subclass and implement `__call__`, or wrap a function with `step_rubric`."""

    @abc.abstractmethod
    def __call__(self, step: Step) -> float: ...


class TrajectoryRubric(abc.ABC):
    """Scores an episode once, when it ends (finish, truncation or close). May be slow (a judge)."""

    @abc.abstractmethod
    async def __call__(self, transcript: Transcript) -> float | None: ...


Component = StepRubric | TrajectoryRubric


class _StepFunction(StepRubric):
    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Step], float]) -> None:
        self.fn = fn

    def __call__(self, step: Step) -> float:
        return self.fn(step)


def _direct(component: StepRubric) -> Callable[[Step], float]:
    # A wrapped function is called as itself in the per-step loop: one call, not two.
    return component.fn if isinstance(component, _StepFunction) else component


class _TrajectoryFunction(TrajectoryRubric):
    def __init__(self, fn: Callable[[Transcript], float | Awaitable[float | None] | None]) -> None:
        self.fn = fn

    async def __call__(self, transcript: Transcript) -> float | None:
        value = self.fn(transcript)
        return await value if inspect.isawaitable(value) else value


def step_rubric(fn: Callable[[Step], float]) -> StepRubric:
    """A step rubric from a function of the step."""
    return _StepFunction(fn)


def trajectory_rubric(fn: Callable[[Transcript], float | Awaitable[float | None] | None]) -> TrajectoryRubric:
    """A trajectory rubric from a (sync or async) function of the transcript."""
    return _TrajectoryFunction(fn)


def env_reward() -> StepRubric:
    """The environment's own `reward()` / `finish(reward=)` for the step (the plain reward)."""
    return _StepFunction(lambda step: step.reward)


def signal(name: str, default: float = 0.0) -> StepRubric:
    """The value the environment reported for signal `name` this step (`default` if none)."""
    return _StepFunction(lambda step: float(step.signals.get(name, default)))


def progress(name: str) -> StepRubric:
    """Shaping by progress: how much signal `name` rose this step. Potential-based with the
    potential the signal itself, so the per-step values telescope to the final value: going
    back and forth earns nothing, and the episode's sum is the same as scoring the end state."""

    def rise(step: Step) -> float:
        if name not in step.signals:
            return 0.0
        return float(step.signals[name]) - float(step.before.get(name, 0.0))

    return _StepFunction(rise)


def final(name: str, default: float = 0.0) -> TrajectoryRubric:
    """The last value signal `name` had when the episode ended."""
    return _TrajectoryFunction(lambda transcript: float(transcript.signals.get(name, default)))


class Rubric:
    """What an environment declares (class attribute `rubric`, or passed to the constructor):
    named components, each a `StepRubric` or a `TrajectoryRubric`, summed with `weights`
    (default 1 each) into the reward. A component named in `gates` is a pass/fail check: while
    it scores <= 0 nothing positive is earned (a step gate zeroes its step's reward, a trajectory
    gate the whole episode's return), but a negative total stands: were a penalty waived too,
    failing a gate on purpose would be a way to dodge it. A gate's own weight defaults to 0:
    passing it is not a bonus.

    ```python
    rubric = Rubric(
        {"correct": signal("passed"), "length": step_rubric(lambda s: -len(s.text) / 1e4),
         "safe": final("clean")},
        weights={"length": 0.1},
        gates=["safe"],
    )
    ```
    """

    def __init__(
        self,
        components: Mapping[str, Component],
        *,
        weights: Mapping[str, float] | None = None,
        gates: Iterable[str] = (),
    ) -> None:
        gates = tuple(gates)
        weights = dict(weights or {})
        for name in [*weights, *gates]:
            if name not in components:
                raise ValueError(f"rubric has no component {name!r}; its components: {', '.join(components)}")
        for name, component in components.items():
            if not isinstance(component, StepRubric | TrajectoryRubric):
                raise TypeError(f"component {name!r} must be a StepRubric or TrajectoryRubric, not {component!r}")
            weight = weights.get(name, 0.0 if name in gates else 1.0)
            if not math.isfinite(weight):
                raise ValueError(f"weight of {name!r} must be finite, not {weight}")
            weights[name] = float(weight)
        self.components = dict(components)
        self.weights = weights
        self.gates = gates
        # Precomputed for the per-step loop (rfcs/0007: a 3-component rubric costs < 2 µs a step).
        self.step_parts = tuple((n, _direct(c), weights[n]) for n, c in components.items() if isinstance(c, StepRubric))
        self.step_gates = tuple(n for n in gates if isinstance(components[n], StepRubric))
        self.trajectory_parts = tuple(
            (n, c, weights[n]) for n, c in components.items() if isinstance(c, TrajectoryRubric)
        )
        self.trajectory_gates = tuple(n for n in gates if isinstance(components[n], TrajectoryRubric))

    @property
    def has_trajectory(self) -> bool:
        return bool(self.trajectory_parts)

    def score_step(self, step: Step) -> tuple[float, dict[str, float]]:
        """This step's reward and its step components (NaN everywhere if a component raised)."""
        values: dict[str, float] = {}
        total = 0.0
        for name, component, weight in self.step_parts:
            value = values[name] = float(component(step))
            total += weight * value
        for name in self.step_gates:
            if not values[name] > 0 and total > 0:
                total = 0.0
        return total, values

    async def score_trajectory(self, transcript: Transcript) -> tuple[float, bool, dict[str, float | None]]:
        """The trajectory components: their weighted sum, whether every gate passed, and the
        values (None for a component that could not score: the episode is then unscored)."""
        values: dict[str, float | None] = {}
        total = 0.0
        for name, component, weight in self.trajectory_parts:
            value = await component(transcript)
            if value is None or not math.isfinite(value):
                values[name] = None
                total = math.nan
            else:
                values[name] = float(value)
                total += weight * float(value)
        passed = all((v := values[n]) is not None and v > 0 for n in self.trajectory_gates)
        return total, passed, values
