"""Rollouts: a tool-calling agent loop over an mcpgym environment, many episodes at once.

Layer: harness core. Drives environments only through `mcpgym.connect` (so every target kind
works: in-process class, URL, command) and models only through the `Policy` contract.

One episode (`run_episode`): reset → the observation becomes the user message → loop
{policy → for each tool call: `env.call_tool` → tool message} until the environment says
done, the model answers without tool calls, or `max_turns` replies were spent.

Many episodes (`rollout`): `concurrency` workers share a queue of episode indices. Each
worker opens one connection on first use and reuses it across its episodes (a stdio target
starts `concurrency` servers, not one per episode); it reconnects only after an episode failed
while waiting on the environment, whose failure may have broken the connection (a policy
failure cannot). Connecting counts against the episode timeout. Every episode ends as a
`Trajectory`: a failure is recorded as data, never raised, so one bad episode cannot take the
others with it. A failure mid-turn keeps the steps already taken; the calls it left unanswered
get an error tool message (`UNANSWERED`, `stepped=False`), so `messages` stays a valid
conversation. Each trajectory is written out (and flushed) the moment it finishes; a sink or
`on_trajectory` error is logged with its traceback and skipped (never raised at the end
either: the returned list is complete), costing no episode.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

import mcpgym
from mcpgym import RUBRIC_KEY, EpisodeState
from mcpgym._core.content import data_url, images
from mcpgym._core.protocol import new_episode_id
from mcpgym._core.tasks import CURRICULUM_KEY, TASK_INFO_KEY
from mcpgym._recording.blobs import BlobStore, restore
from mcpgym.gateway.merge import merge_turns
from mcpgym.gateway.types import TokenSequence
from mcpgym.harness import target as targets
from mcpgym.harness.policy import EPISODE, Policy, openai_tools
from mcpgym.harness.progress import Progress
from mcpgym.harness.types import CallOutcome, Message, StopReason, ToolCall, Trajectory, Turn, Usage
from mcpgym.trl import tool_text  # one rendering of tool results, shared with TRL training

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
    task_id: str | None = None
    started: float = field(default_factory=time.time)
    episode_id: str | None = None
    observation: Any = None
    messages: list[Message] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    done: bool = False
    truncated: bool = False
    terminated: bool = False
    final: EpisodeState | None = None
    """The episode's state when the harness closed it to have its trajectory scored."""
    stop: StopReason = "error"
    waiting_on: Literal["environment", "policy"] = "environment"
    """What the episode was waiting on; a failure there may have broken the connection, or not."""

    def freeze(self, error: BaseException | None = None) -> Trajectory:
        usage = sum((t.assistant.usage for t in self.turns), Usage())
        return Trajectory(
            index=self.index,
            episode_id=self.episode_id,
            seed=self.seed,
            options=self.options,
            task_id=self.task_id,
            observation=self.observation,
            status="failed" if error else "ok",
            stop="error" if error else self.stop,
            error=_describe(error) if error else None,
            reward=sum(t.reward for t in self.turns) if self.final is None else self.final.total_reward,
            done=self.done,
            truncated=self.truncated,
            terminated=self.terminated,
            components=self.components(),
            turns=list(self.turns),
            messages=list(self.messages),
            usage=usage,
            started=self.started,
            duration=time.time() - self.started,
            tokens=self.tokens(),
        )

    def tokens(self) -> list[TokenSequence]:
        replies = [t.assistant.tokens for t in self.turns]
        if not replies or any(r is None for r in replies):
            return []  # a reply without ids leaves a hole no sequence can bridge
        ids = [(r.prompt_token_ids, r.completion_token_ids, r.logprobs) for r in replies if r is not None]
        return merge_turns(ids, self.episode_id)

    def components(self) -> dict[str, float | None]:
        if self.final is not None:
            return dict(self.final.components)
        sums: dict[str, float | None] = {}
        for step in (s for t in self.turns for s in t.steps):
            for name, value in step.components.items():
                before = sums.get(name, 0.0)
                sums[name] = None if before is None or value is None else before + value
        return sums


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
    return episode.freeze(await _attempt(env, policy, episode, max_turns, system_prompt, episode_timeout))


async def _attempt(
    env: mcpgym.AsyncEnv,
    policy: Policy,
    episode: _Episode,
    max_turns: int,
    system_prompt: str | None,
    time_limit: float | None,
) -> Exception | None:
    """Play `episode`; the exception that ended it early (recorded as data), or None."""
    error: Exception | None = None
    with anyio.move_on_after(time_limit if time_limit is not None else math.inf) as deadline:
        try:
            await _play(env, policy, episode, max_turns, system_prompt)
        except Exception as exc:
            error = exc
    if deadline.cancel_called:  # only our own deadline is a timeout (a policy's TimeoutError is its own error)
        error = TimeoutError(f"the episode outlived its timeout ({time_limit:g}s)")
    return error


async def _play(
    env: mcpgym.AsyncEnv, policy: Policy, episode: _Episode, max_turns: int, system_prompt: str | None
) -> None:
    first = await env.reset(seed=episode.seed, options=episode.options)
    episode.episode_id, episode.observation = env.episode_id, first.observation
    if isinstance(played := first.info.get(TASK_INFO_KEY), dict):  # the task the server drew (or recognised)
        episode.task_id, episode.seed, episode.options = played.get("id"), played.get("seed"), played.get("options")
    EPISODE.set(env.episode_id)  # the policy names it to its endpoint (a gateway joins the calls by it)
    listed = await env.list_tools()
    names, tools = {t.name for t in listed}, openai_tools(listed)
    if system_prompt:
        episode.messages.append({"role": "system", "content": system_prompt})
    episode.messages.append({"role": "user", "content": render_observation(first.observation)})
    episode.stop = "max_turns"
    for _ in range(max_turns):
        episode.waiting_on = "policy"
        reply = await policy(list(episode.messages), tools)
        episode.waiting_on = "environment"
        episode.messages.append(reply.message())
        steps: list[CallOutcome] = []
        try:
            for call in reply.tool_calls:
                steps.append(await _step(env, call, names, episode))
        finally:
            # A failure mid-turn keeps the steps already taken (their rewards happened) and answers
            # the calls it left unanswered as refused, so every tool call has its tool message.
            for call in reply.tool_calls[len(steps) :]:
                steps.append(_answer(episode, call, _refusal(call, UNANSWERED)))
            episode.turns.append(Turn(assistant=reply, steps=steps))
            if pictures := image_message(steps):
                episode.messages.append(pictures)
        if episode.done or not reply.tool_calls:
            episode.stop = ("truncated" if episode.truncated else "done") if episode.done else "no_tool_calls"
            break
    if not episode.done and (first.info.get(RUBRIC_KEY) or {}).get("trajectory"):
        # The agent stopped before the episode ended: closing it has the server score the trajectory.
        episode.final = await env.close_episode()


def image_message(steps: list[CallOutcome]) -> Message | None:
    """The images this turn's tool results returned, as one user message of OpenAI-style image
    parts (chat-completions tool messages carry text only), after the turn's tool messages."""
    parts: list[dict[str, Any]] = []
    for step in steps:
        for url in step.images:
            parts.append({"type": "image_url", "image_url": {"url": url}})
    if not parts:
        return None
    intro = {"type": "text", "text": "The images returned by the tool calls above, in order:"}
    return {"role": "user", "content": [intro, *parts]}


UNANSWERED = "Error: the episode failed before this call was answered; the environment may or may not have run it."


async def _step(env: mcpgym.AsyncEnv, call: ToolCall, names: set[str], episode: _Episode) -> CallOutcome:
    return _answer(episode, call, await _run_call(env, call, names, episode.done))


def _answer(episode: _Episode, call: ToolCall, step: CallOutcome) -> CallOutcome:
    episode.done = episode.done or step.done
    episode.truncated = episode.truncated or step.truncated
    episode.terminated = episode.terminated or step.terminated
    episode.messages.append({"role": "tool", "tool_call_id": call.id, "content": step.output})
    return step


def _refusal(call: ToolCall, output: str) -> CallOutcome:
    # Answered by the harness, not the environment: the model sees why and can correct itself.
    return CallOutcome(
        call_id=call.id, tool=call.name, arguments=call.arguments, output=output, is_error=True, stepped=False
    )


async def _run_call(env: mcpgym.AsyncEnv, call: ToolCall, names: set[str], done: bool) -> CallOutcome:
    if done:
        return _refusal(call, "Error: the episode is over; this call was not run.")
    if call.name not in names:
        return _refusal(call, f"Error: unknown tool {call.name!r}. Available tools: {', '.join(sorted(names))}.")
    if call.arguments is None:
        return _refusal(
            call,
            f"Error: the arguments of {call.name} are not a JSON object: {call.arguments_json[:200]!r}. "
            "Call the tool again with valid JSON arguments.",
        )
    result = await env.call_tool(call.name, call.arguments)
    return CallOutcome(
        call_id=call.id,
        tool=call.name,
        arguments=call.arguments,
        output=tool_text(result.observation),
        images=[data_url(image) for image in images(result.observation)],
        is_error=result.is_error,
        reward=result.reward,
        done=result.done,
        truncated=result.truncated,
        terminated=result.terminated,
        components=result.components,
    )


def render_observation(observation: Any) -> str:
    """The first observation as the user message: text as is, anything else as indented JSON."""
    return observation if isinstance(observation, str) else json.dumps(observation, indent=2, default=str)


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
    tasks: Sequence[mcpgym.Task] | None = None,
    headers: dict[str, str] | None = None,
    curriculum: int | None = None,
) -> list[Trajectory]:
    """Play `episodes` episodes of `env_target` with `policy`, at most `concurrency` at a time.

    Episode i is reset with `seed + i` (when `seed` is given) and `options` (one dict for all,
    or a sequence cycled through by index, e.g. one `{"task_id": ...}` per task). Each finished
    trajectory is appended to `out` as one JSON line (flushed at once) and passed to
    `on_trajectory`. Returns all trajectories in index order, failed ones included.

    `tasks` (e.g. `await mcpgym.list_tasks(target)`, the server's task catalog) replaces `seed`
    and `options`: episode i plays task i, cycling through them when there are more episodes.
    `headers` go to an HTTP target (e.g. `{"Authorization": "Bearer T"}` for a server run with `--token`).

    `curriculum=G` has the server's task sampler choose the tasks instead (docs/curriculum.md):
    episodes 0..G-1 are one group, G..2G-1 the next, and every episode of a group plays the one
    task (and seed) the server drew for it. Each trajectory's `task_id`, `seed` and `options`
    say what it played. Needs a server (a URL, a command, a GymServer), not an in-process class.
    """
    if tasks is not None and not tasks:
        raise ValueError("tasks is empty: this environment's catalog lists no tasks")
    if curriculum is not None and (curriculum < 1 or tasks is not None or seed is not None or options is not None):
        raise ValueError("curriculum=G (a group size >= 1) draws each group's task: give no tasks, seed or options")
    run = _Run(
        targets.resolve(env_target),
        policy,
        max_turns=max_turns,
        system_prompt=system_prompt,
        timeout=episode_timeout,
        seed=seed,
        options=options,
        on_trajectory=on_trajectory,
        tasks=tasks,
        headers=headers,
        curriculum=curriculum,
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
        async with _shared(run.target, episode_timeout, headers) as run.target, anyio.create_task_group() as tg:
            for _ in range(max(1, min(concurrency, episodes))):
                tg.start_soon(run.worker, receive.clone())
        receive.close()
    return sorted(run.finished, key=lambda t: t.index)


@contextlib.asynccontextmanager
async def _shared(
    target: mcpgym.Target, connect_within: float | None = None, headers: dict[str, str] | None = None
) -> AsyncIterator[mcpgym.Target]:
    """An HTTP server's episodes share one client (one connection pool, rfcs/0014). If it cannot
    be reached within `connect_within` seconds, or at all, each episode connects (and fails, recorded) on its
    own as before."""
    if not (isinstance(target, str) and target.startswith(("http://", "https://"))):
        yield target
        return
    # The deadline scope encloses the client's whole life (cancel scopes nest) and is lifted once
    # connected, as `_Connection` does.
    with anyio.move_on_after(math.inf if connect_within is None else connect_within) as scope:
        async with contextlib.AsyncExitStack() as stack:
            shared: mcpgym.Target = target
            try:
                shared = await stack.enter_async_context(mcpgym.SharedClient(target, headers=headers))
            except mcpgym.MCPError as exc:
                log.warning("harness: no shared connection to %s (%s); connecting per worker", target, _describe(exc))
            scope.deadline = math.inf
            yield shared
    if scope.cancelled_caught:  # connecting timed out: the episodes will say so themselves
        log.warning("harness: no shared connection to %s within %gs; connecting per worker", target, connect_within)
        yield target


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
    tasks: Sequence[mcpgym.Task] | None = None
    headers: dict[str, str] | None = None
    curriculum: int | None = None
    run_id: str = field(default_factory=new_episode_id)
    """Names this run's curriculum groups, so no two runs share one."""
    sinks: list[Callable[[Trajectory], None]] = field(default_factory=list)
    finished: list[Trajectory] = field(default_factory=list)

    async def worker(self, receive: MemoryObjectReceiveStream[int]) -> None:
        with receive:
            async with _Connection(self.target, self.timeout, self.headers) as connection:
                async for index in receive:
                    self._finish(await self._episode(connection, index))

    async def _episode(self, connection: _Connection, index: int) -> Trajectory:
        task_id = self.tasks[index % len(self.tasks)].id if self.tasks else None
        episode = _Episode(index, self._seed(index), self._options(index), task_id)
        try:
            env = await connection.env()
        except Exception as exc:  # the environment cannot be reached: this episode fails, the worker goes on
            return episode.freeze(exc)
        error = await _attempt(env, self.policy, episode, self.max_turns, self.system_prompt, self.timeout)
        if error is not None and episode.waiting_on == "environment":
            await connection.drop()  # an environment failure may have broken the connection; a policy's did not
        return episode.freeze(error)

    def _finish(self, trajectory: Trajectory) -> None:
        # Outside any episode: a failing sink or callback is the caller's bug, not the episode's.
        # It is logged and skipped, and costs neither this trajectory's other sinks nor later episodes.
        self.finished.append(trajectory)
        for deliver in [*self.sinks, *([self.on_trajectory] if self.on_trajectory else [])]:
            try:
                deliver(trajectory)
            except Exception:
                log.exception("harness: delivering episode %d to %r failed", trajectory.index, deliver)

    def _seed(self, index: int) -> int | None:
        if self.tasks:
            return self.tasks[index % len(self.tasks)].seed
        return None if self.seed is None else self.seed + index

    def _options(self, index: int) -> dict[str, Any] | None:
        if self.curriculum is not None:
            group = f"{self.run_id}/{index // self.curriculum}"
            return {CURRICULUM_KEY: {"group": group, "size": self.curriculum}}
        if self.tasks:
            return dict(self.tasks[index % len(self.tasks)].options)
        if self.options is None or isinstance(self.options, dict):
            return self.options
        return dict(self.options[index % len(self.options)])


class _Connection:
    """A worker's environment connection: opened on first use, kept across episodes, dropped
    (and reopened by the next episode) after an episode failure that may have broken it."""

    def __init__(self, target: mcpgym.Target, timeout: float | None, headers: dict[str, str] | None = None) -> None:
        self._target = target
        self._timeout = timeout
        self._headers = headers
        self._stack: contextlib.AsyncExitStack | None = None
        self._env: mcpgym.AsyncEnv | None = None

    async def env(self) -> mcpgym.AsyncEnv:
        if self._env is None:
            self._env = await self._open()
        return self._env

    async def _open(self) -> mcpgym.AsyncEnv:
        stack = contextlib.AsyncExitStack()
        # Connecting is under the episode timeout too: a server that accepts and never answers
        # would hang forever. The deadline scope must enclose the connection's whole life (cancel
        # scopes nest), so it is lifted once connected instead of being left.
        timeout = self._timeout if self._timeout is not None else math.inf
        deadline = stack.enter_context(anyio.CancelScope(deadline=anyio.current_time() + timeout))
        try:
            env = await stack.enter_async_context(mcpgym.connect(self._target, headers=self._headers))
        except BaseException as exc:
            if not await stack.__aexit__(type(exc), exc, exc.__traceback__):
                raise
        if deadline.cancel_called:
            raise TimeoutError(f"connecting to the environment took longer than the episode timeout ({timeout:g}s)")
        deadline.deadline = math.inf
        self._stack = stack
        return env

    async def drop(self) -> None:
        stack, self._stack, self._env = self._stack, None, None
        if stack is not None:
            try:
                await stack.aclose()
            except Exception as exc:  # the connection was already broken; the next episode opens a new one
                log.warning("harness: closing an environment connection failed: %s", _describe(exc))

    async def __aenter__(self) -> _Connection:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.drop()


def _jsonl_sink(stack: contextlib.ExitStack, path: Path) -> Callable[[Trajectory], None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    file = stack.enter_context(path.open("a+b"))  # append: never clobber an earlier run
    if file.seek(0, os.SEEK_END) and (file.seek(-1, os.SEEK_END), file.read(1))[1] != b"\n":
        file.write(b"\n")  # an earlier run was killed mid-line: start ours on a line of its own

    blobs = BlobStore(path.parent)  # images once each under blobs/, referenced from the line

    def write(trajectory: Trajectory) -> None:
        record = blobs.externalize(trajectory.model_dump(mode="json"))
        file.write(json.dumps(record, ensure_ascii=False).encode() + b"\n")
        file.flush()

    return write


def read_rollout(path: str | Path) -> list[Trajectory]:
    """The trajectories a rollout wrote to `path`. Lines that are not JSON are skipped: a line cut
    short by a kill (a rerun appends after it, on a fresh line) or a blank one. A JSON line that
    is not a trajectory is an error (the file is not a rollout's output)."""
    trajectories = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        trajectories.append(Trajectory.model_validate(restore(record, Path(path).parent)))
    return trajectories


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _describe(exc.exceptions[0])
    return f"{type(exc).__name__}: {exc}"
