"""Rollouts: a tool-calling agent loop over an mcpgym environment, many episodes at once.

Layer: harness core. Drives environments only through `mcpgym.connect` (so every target kind
works: in-process class, URL, command) and models only through the `Policy` contract.

One episode (`run_episode`): reset → the observation becomes the user message → loop
{policy → for each tool call: `env.call_tool` → tool message} until the environment says
done, the model answers without tool calls, or `max_turns` replies were spent.

Many episodes (`rollout`): `concurrency` workers share a queue of episode indices. Each
worker keeps one connection and reuses it across its episodes (a stdio target starts
`concurrency` servers, not one per episode) and reconnects after a failed episode, whose
failure may have broken the connection. Every episode ends as a `Trajectory`: a failure is
recorded as data, never raised, so one bad episode cannot take the others with it, and each
trajectory is written out (and flushed) the moment it finishes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream

import mcpgym
from harness import target as targets
from harness.policy import Policy, openai_tools
from harness.progress import Progress
from harness.types import Message, Step, StopReason, ToolCall, Trajectory, Turn, Usage

log = logging.getLogger("harness")

SYSTEM_PROMPT = (
    "You are an agent acting in an environment through its tools. The user message is the task. "
    "Work on it by calling tools; the episode ends when the environment says so."
)

Options = dict[str, Any] | Sequence[dict[str, Any]] | None


@dataclass
class _Episode:
    """A trajectory under construction (mutable), so a failure keeps every turn before it."""

    index: int
    seed: int | None
    options: dict[str, Any] | None
    started: float = field(default_factory=time.time)
    episode_id: str | None = None
    observation: Any = None
    messages: list[Message] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    done: bool = False
    truncated: bool = False
    stop: StopReason = "error"

    def freeze(self, error: BaseException | None = None) -> Trajectory:
        usage = sum((t.assistant.usage for t in self.turns), Usage())
        return Trajectory(
            index=self.index,
            episode_id=self.episode_id,
            seed=self.seed,
            options=self.options,
            observation=self.observation,
            status="failed" if error else "ok",
            stop="error" if error else self.stop,
            error=_describe(error) if error else None,
            reward=sum(t.reward for t in self.turns),
            done=self.done,
            truncated=self.truncated,
            turns=list(self.turns),
            messages=list(self.messages),
            usage=usage,
            started=self.started,
            duration=time.time() - self.started,
        )


async def run_episode(
    env: mcpgym.AsyncEnv,
    policy: Policy,
    *,
    index: int = 0,
    seed: int | None = None,
    options: dict[str, Any] | None = None,
    max_turns: int = 20,
    system_prompt: str | None = SYSTEM_PROMPT,
    episode_timeout: float | None = None,
) -> Trajectory:
    """Play one episode on a connected `env`. Never raises `Exception`: failures are recorded."""
    episode = _Episode(index, seed, options)
    try:
        with anyio.fail_after(episode_timeout if episode_timeout is not None else math.inf):
            await _play(env, policy, episode, max_turns, system_prompt)
    except Exception as exc:  # recorded as data: the trajectory says how far it got and why it stopped
        return episode.freeze(exc)
    return episode.freeze()


async def _play(
    env: mcpgym.AsyncEnv, policy: Policy, episode: _Episode, max_turns: int, system_prompt: str | None
) -> None:
    first = await env.reset(seed=episode.seed, options=episode.options)
    episode.episode_id, episode.observation = env.episode_id, first.observation
    listed = await env.list_tools()
    names, tools = {t.name for t in listed}, openai_tools(listed)
    if system_prompt:
        episode.messages.append({"role": "system", "content": system_prompt})
    episode.messages.append({"role": "user", "content": render_observation(first.observation)})
    episode.stop = "max_turns"
    for _ in range(max_turns):
        reply = await policy(list(episode.messages), tools)
        episode.messages.append(reply.message())
        steps = [await _step(env, call, names, episode) for call in reply.tool_calls]
        episode.turns.append(Turn(assistant=reply, steps=steps))
        if episode.done or not reply.tool_calls:
            episode.stop = ("truncated" if episode.truncated else "done") if episode.done else "no_tool_calls"
            return


async def _step(env: mcpgym.AsyncEnv, call: ToolCall, names: set[str], episode: _Episode) -> Step:
    step = await _run_call(env, call, names, episode.done)
    episode.done = episode.done or step.done
    episode.truncated = episode.truncated or step.truncated
    episode.messages.append({"role": "tool", "tool_call_id": call.id, "content": step.output})
    return step


async def _run_call(env: mcpgym.AsyncEnv, call: ToolCall, names: set[str], done: bool) -> Step:
    def refuse(output: str) -> Step:
        # Answered by the harness, not the environment: the model sees why and can correct itself.
        return Step(
            call_id=call.id, tool=call.name, arguments=call.arguments, output=output, is_error=True, stepped=False
        )

    if done:
        return refuse("Error: the episode is over; this call was not run.")
    if call.name not in names:
        return refuse(f"Error: unknown tool {call.name!r}. Available tools: {', '.join(sorted(names))}.")
    if call.arguments is None:
        return refuse(
            f"Error: the arguments of {call.name} are not a JSON object: {call.arguments_json[:200]!r}. "
            "Call the tool again with valid JSON arguments."
        )
    result = await env.call_tool(call.name, call.arguments)
    return Step(
        call_id=call.id,
        tool=call.name,
        arguments=call.arguments,
        output=tool_output(result.observation),
        is_error=result.is_error,
        reward=result.reward,
        done=result.done,
        truncated=result.truncated,
    )


def render_observation(observation: Any) -> str:
    """The first observation as the user message: text as is, anything else as indented JSON."""
    return observation if isinstance(observation, str) else json.dumps(observation, indent=2, default=str)


def tool_output(result: types.CallToolResult) -> str:
    """A tool result as the tool message's content: its text, else its structured content as JSON."""
    text = "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content)
    return text


async def rollout(
    env_target: mcpgym.Target,
    policy: Policy,
    *,
    episodes: int = 1,
    concurrency: int = 8,
    max_turns: int = 20,
    seed: int | None = None,
    options: Options = None,
    system_prompt: str | None = SYSTEM_PROMPT,
    episode_timeout: float | None = None,
    out: str | Path | None = None,
    on_trajectory: Callable[[Trajectory], None] | None = None,
    progress: bool = False,
) -> list[Trajectory]:
    """Play `episodes` episodes of `env_target` with `policy`, at most `concurrency` at a time.

    Episode i is reset with `seed + i` (when `seed` is given) and `options` (one dict for all,
    or a sequence cycled through by index, e.g. one `{"task_id": ...}` per task). Each finished
    trajectory is appended to `out` as one JSON line (flushed at once) and passed to
    `on_trajectory`. Returns all trajectories in index order, failed ones included.
    """
    run = _Run(
        targets.resolve(env_target),
        policy,
        max_turns=max_turns,
        system_prompt=system_prompt,
        timeout=episode_timeout,
        seed=seed,
        options=options,
        on_trajectory=on_trajectory,
    )
    send, receive = anyio.create_memory_object_stream[int](episodes)
    with send:
        for index in range(episodes):
            send.send_nowait(index)
    with contextlib.ExitStack() as stack:
        if out is not None:
            run.sinks.append(_jsonl_sink(stack, Path(out)))
        if progress:
            bar = stack.enter_context(Progress(episodes))
            run.sinks.append(bar.update)
        async with anyio.create_task_group() as tg:
            for _ in range(max(1, min(concurrency, episodes))):
                tg.start_soon(run.worker, receive.clone())
        receive.close()
    return sorted(run.finished, key=lambda t: t.index)


@dataclass
class _Run:
    target: mcpgym.Target
    policy: Policy
    max_turns: int
    system_prompt: str | None
    timeout: float | None
    seed: int | None
    options: Options
    on_trajectory: Callable[[Trajectory], None] | None
    sinks: list[Callable[[Trajectory], None]] = field(default_factory=list)
    finished: list[Trajectory] = field(default_factory=list)

    async def worker(self, receive: MemoryObjectReceiveStream[int]) -> None:
        with receive:
            index = await _next(receive)
            while index is not None:
                index = await self._connection(index, receive)

    async def _connection(self, index: int, receive: MemoryObjectReceiveStream[int]) -> int | None:
        """Play episodes over one connection, starting with `index`. Returns the episode to play
        on a fresh connection (one failed, and its failure may have broken this connection),
        or None when the queue is empty."""
        current: int | None = index  # in flight: recorded as failed if the connection dies under it
        upcoming: int | None = None
        try:
            async with mcpgym.connect(self.target) as env:
                while current is not None:
                    trajectory = await self._episode(env, current)
                    current, upcoming = None, await _next(receive)
                    if trajectory.failed:
                        break
                    current, upcoming = upcoming, None
        except Exception as exc:  # connecting, or the connection itself, failed: record it, keep the worker
            if current is None:
                log.warning("harness: closing an environment connection failed: %s", _describe(exc))
            else:
                self._finish(_Episode(current, self._seed(current), self._options(current)).freeze(exc))
                upcoming = await _next(receive)
        return upcoming

    async def _episode(self, env: mcpgym.AsyncEnv, index: int) -> Trajectory:
        trajectory = await run_episode(
            env,
            self.policy,
            index=index,
            seed=self._seed(index),
            options=self._options(index),
            max_turns=self.max_turns,
            system_prompt=self.system_prompt,
            episode_timeout=self.timeout,
        )
        self._finish(trajectory)
        return trajectory

    def _finish(self, trajectory: Trajectory) -> None:
        self.finished.append(trajectory)
        for sink in self.sinks:
            sink(trajectory)
        if self.on_trajectory is not None:
            self.on_trajectory(trajectory)

    def _seed(self, index: int) -> int | None:
        return None if self.seed is None else self.seed + index

    def _options(self, index: int) -> dict[str, Any] | None:
        if self.options is None or isinstance(self.options, dict):
            return self.options
        return dict(self.options[index % len(self.options)])


def _jsonl_sink(stack: contextlib.ExitStack, path: Path) -> Callable[[Trajectory], None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    file = stack.enter_context(path.open("a", encoding="utf-8"))  # append: never clobber an earlier run

    def write(trajectory: Trajectory) -> None:
        file.write(trajectory.model_dump_json() + "\n")
        file.flush()

    return write


async def _next(receive: MemoryObjectReceiveStream[int]) -> int | None:
    try:
        return await receive.receive()
    except anyio.EndOfStream:
        return None


def read_rollout(path: str | Path) -> list[Trajectory]:
    """The trajectories a rollout wrote to `path`. A last line cut short by a kill is skipped;
    a bad line anywhere else is an error (the file is not a rollout's output)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    trajectories = []
    for number, line in enumerate(lines, start=1):
        try:
            trajectories.append(Trajectory.model_validate_json(line))
        except ValueError:
            if number < len(lines):
                raise
    return trajectories


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "TimeoutError: the episode outlived its timeout"
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _describe(exc.exceptions[0])
    return f"{type(exc).__name__}: {exc}"
