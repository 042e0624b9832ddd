"""`AsyncVectorEnv`: n episodes of one target stepped as a batch, Gymnasium's vector API.

Layer: client facade over `SharedClient` (so n episodes over HTTP are one connection pool and
one MCP client, over stdio one server process). Imports the client doors; nothing below it
imports it.

The contract, written once (Gymnasium's `VectorEnv`, with our step results):

- `reset(seed, options, mask)` resets every slot (or the slots where `mask` is true) and
  `step(actions)` takes one action per slot; both return a `VectorStep`: per slot the
  `StepResult` (None when the slot failed), reward, terminated, truncated and error.
- Slots run concurrently. A slot that raises (a protocol error such as an unknown or expired
  episode, or a lost server) does not fail the batch: its `errors[i]` carries the exception,
  its reward is 0 and both flags are False. Its episode is left as the server left it (a
  refused call counts no step); `reset(mask=...)` starts it over. A call to an unknown tool
  is no error: it is the counted `is_error` step every door returns (`info["unknown_tool"]`).
- `autoreset` is Gymnasium's `AutoresetMode`, by value: `"next_step"` (the default) resets a
  slot on the step after its episode ended, ignoring that step's action and returning the new
  episode's first observation with reward 0 and both flags False; `"same_step"` resets it
  within the ending step, returning the new episode's first result and the ended episode's
  last one in `final[i]` (if that reset fails, `results[i]` is None and `errors[i]` says why,
  while `final[i]`, the reward and the flags are still the ended step's); `"disabled"` never
  resets (use `reset(mask=...)`).
- `terminated` is the step's own `StepResult.terminated` ("ended on the task's own terms",
  as the environment stamped it).
- Where every slot rides one MCP session (a URL, a stdio command, an in-memory server), the
  slots' tool calls of one `step()` go as one `mcpgym/steps` request (`mcpgym._core.batch`):
  one stamp per slot, each slot's errors its own, the same results as one request per slot.
  `batch=False`, or a server without the method, steps them one request each.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, Literal, Self

import anyio

from mcpgym._client.api import FAILURES, AsyncEnv
from mcpgym._client.door import Forwarding
from mcpgym._client.session_door import SessionDoor
from mcpgym._client.shared import SharedClient
from mcpgym._core.errors import INVALID_PARAMS, MCPError
from mcpgym._core.types import Action, CallToolAction, StepResult
from mcpgym._targets.connect import Target

AutoresetMode = Literal["next_step", "same_step", "disabled"]
AUTORESET_MODES: Final = ("next_step", "same_step", "disabled")


@dataclass(frozen=True)
class VectorStep:
    """What `reset()` and `step()` of a vector env return: one entry per slot, in slot order."""

    results: list[StepResult[Any] | None]
    rewards: list[float]
    terminated: list[bool]
    truncated: list[bool]
    errors: list[Exception | None]
    final: list[StepResult[Any] | None] = field(default_factory=list)
    """`autoreset="same_step"`: the ended episode's last result where a slot was reset."""

    @property
    def done(self) -> list[bool]:
        """Per slot: the episode ended (terminated or truncated)."""
        return [a or b for a, b in zip(self.terminated, self.truncated, strict=True)]


@dataclass
class _Slot:
    """One slot's outcome of a batch call."""

    result: StepResult[Any] | None = None
    error: Exception | None = None
    final: StepResult[Any] | None = None

    @property
    def ended(self) -> bool:
        return self.result is not None and self.result.done


class AsyncVectorEnv:
    """n episodes stepped together. Get one from `mcpgym.connect_vector(target, n)`:

    ```python
    async with mcpgym.connect_vector(url, 64) as envs:
        batch = await envs.reset(seed=0)             # slot i gets seed 0 + i
        batch = await envs.step([CallToolAction(tool_name="echo_message", arguments={"message": m})
                                 for m in messages])
        batch.rewards, batch.terminated, batch.truncated, batch.errors
    ```
    """

    def __init__(
        self,
        target: Target | SharedClient,
        num_envs: int,
        *,
        autoreset: AutoresetMode = "next_step",
        batch: bool = True,
        **options: Any,
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, not {num_envs}")
        if autoreset not in AUTORESET_MODES:
            raise ValueError(f"autoreset must be one of {AUTORESET_MODES}, not {autoreset!r}")
        self.num_envs = num_envs
        self.autoreset: AutoresetMode = autoreset
        self.metadata: dict[str, Any] = {"autoreset_mode": autoreset}
        self._shared = target if isinstance(target, SharedClient) else SharedClient(target, **options)
        self._owns_shared = not isinstance(target, SharedClient)
        self.envs: list[AsyncEnv] = []
        self._ended = [False] * num_envs  # next_step: reset this slot instead of stepping it
        self._seen_reset = [False] * num_envs
        self._stack: AsyncExitStack | None = None
        self.batch = batch
        self._session: SessionDoor | None = None  # the one session every slot rides, if any

    async def __aenter__(self) -> Self:
        async with AsyncExitStack() as stack:
            if self._owns_shared:
                await stack.enter_async_context(self._shared)
            self.envs = [await stack.enter_async_context(self._shared.connect()) for _ in range(self.num_envs)]
            self._stack = stack.pop_all()
        sessions = {id(door): door for door in map(_session_door, self.envs)}
        only = next(iter(sessions.values())) if len(sessions) == 1 else None
        self._session = only if self.batch else None
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()  # each episode closes, then the shared client
        self.envs = []
        self._session = None

    async def reset(
        self,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
        mask: Sequence[bool] | None = None,
    ) -> VectorStep:
        """Reset every slot (or those where `mask` is true; the others report None, no error).
        An int `seed` gives slot i `seed + i`; a list gives each slot its own."""
        seeds = _seeds(seed, self.num_envs)
        wanted = list(mask) if mask is not None else [True] * self.num_envs
        if len(wanted) != self.num_envs:
            raise ValueError(f"mask has {len(wanted)} entries for {self.num_envs} envs")
        slots = [_Slot() for _ in range(self.num_envs)]
        async with anyio.create_task_group() as tg:
            for i in range(self.num_envs):
                if wanted[i]:
                    tg.start_soon(self._reset_slot, i, slots[i], seeds[i], options)
        return self._batch(slots)

    async def step(self, actions: Sequence[Action]) -> VectorStep:
        """One action per slot; see the module docstring for autoreset and failing slots."""
        if len(actions) != self.num_envs:
            raise ValueError(f"got {len(actions)} actions for {self.num_envs} envs")
        if not all(self._seen_reset):
            raise RuntimeError("call reset() on every slot before step()")
        slots = [_Slot() for _ in range(self.num_envs)]
        together = self._batchable(actions)
        async with anyio.create_task_group() as tg:
            if together:
                tg.start_soon(self._step_together, together, slots, actions)
            for i, action in enumerate(actions):
                if i not in together:
                    tg.start_soon(self._step_slot, i, slots[i], action)
        return self._batch(slots)

    def _batchable(self, actions: Sequence[Action]) -> list[int]:
        """The slots whose action is a tool call of a live episode on the one shared session."""
        if self._session is None:
            return []
        return [
            i
            for i, action in enumerate(actions)
            if isinstance(action, CallToolAction)
            and self.envs[i].episode_id is not None
            and not (self.autoreset == "next_step" and self._ended[i])
        ]

    async def _step_together(self, together: list[int], slots: list[_Slot], actions: Sequence[Action]) -> None:
        assert self._session is not None
        calls = [(self.envs[i].episode_id or "", _call(actions[i])) for i in together]
        try:
            outcomes = await self._session.call_many([(e, a.tool_name, a.arguments) for e, a in calls])
            if outcomes is not None and len(outcomes) != len(together):
                raise MCPError(INVALID_PARAMS, f"mcpgym/steps answered {len(outcomes)} of {len(together)} steps")
        except Exception as exc:  # the request failed as a whole: every slot in it carries why
            for i in together:
                slots[i].error = _mapped(self.envs[i], exc)
            return
        async with anyio.create_task_group() as tg:
            if outcomes is None:  # a server without mcpgym/steps: one request per slot
                for i in together:
                    tg.start_soon(self._step_slot, i, slots[i], actions[i])
                return
            for i, outcome in zip(together, outcomes, strict=True):
                if isinstance(outcome, Exception):
                    slots[i].error = outcome
                else:
                    slots[i].result = outcome
                    if self._resets_now(i, slots[i]):  # a task only where one is needed (a tenth of the CPU)
                        tg.start_soon(self._reset_slot, i, slots[i], None, None)

    async def _reset_slot(self, i: int, slot: _Slot, seed: int | None, options: dict[str, Any] | None) -> None:
        try:
            slot.result = await self.envs[i].reset(seed=seed, options=options)
        except Exception as exc:  # the slot carries it; the batch goes on
            slot.result, slot.error = None, exc  # (same_step: not the ended step's result, now in `final`)
        self._seen_reset[i] = True
        self._ended[i] = False

    async def _step_slot(self, i: int, slot: _Slot, action: Action) -> None:
        if self.autoreset == "next_step" and self._ended[i]:
            await self._reset_slot(i, slot, None, None)
            return
        try:
            slot.result = await self.envs[i].step(action)
        except Exception as exc:
            slot.error = exc
            return
        if self._resets_now(i, slot):
            await self._reset_slot(i, slot, None, None)

    def _resets_now(self, i: int, slot: _Slot) -> bool:
        """Note whether the slot's episode ended; True where same_step resets it in this step
        (its ended step then moves to `final`)."""
        self._ended[i] = slot.ended
        if self.autoreset == "same_step" and slot.ended:
            slot.final = slot.result
            return True
        return False

    def _batch(self, slots: list[_Slot]) -> VectorStep:
        # Reward and flags are the step's own, also where same_step has already reset the slot.
        stepped = [s.final if s.final is not None else s.result for s in slots]
        return VectorStep(
            results=[s.result for s in slots],
            rewards=[r.reward if r is not None else 0.0 for r in stepped],
            terminated=[_terminated(r) for r in stepped],
            truncated=[r is not None and r.truncated for r in stepped],
            errors=[s.error for s in slots],
            final=[s.final for s in slots],
        )


def _session_door(env: AsyncEnv) -> SessionDoor | None:
    """The MCP session an env's door speaks through in the end, if it has one."""
    door: object = env.door
    while isinstance(door, Forwarding):
        door = door.inner
    return door if isinstance(door, SessionDoor) else None


def _call(action: Action) -> CallToolAction:
    assert isinstance(action, CallToolAction)
    return action


def _mapped(env: AsyncEnv, exc: Exception) -> Exception:
    """`exc` as the env's own step would have raised it (a transport failure as MCPError)."""
    if not isinstance(exc, FAILURES):
        return exc
    try:
        env._fail(exc)
    except MCPError as mapped:
        return mapped


def _terminated(result: StepResult[Any] | None) -> bool:
    return result is not None and result.terminated


def _seeds(seed: int | Sequence[int | None] | None, n: int) -> list[int | None]:
    if seed is None:
        return [None] * n
    if isinstance(seed, int):
        return [seed + i for i in range(n)]
    if len(seed) != n:
        raise ValueError(f"got {len(seed)} seeds for {n} envs")
    return list(seed)


def connect_vector(
    target: Target | SharedClient,
    num_envs: int,
    *,
    autoreset: AutoresetMode = "next_step",
    batch: bool = True,
    **options: Any,
) -> AsyncVectorEnv:
    """`num_envs` episodes of `target` as one vector env: `async with connect_vector(url, 64) as envs:`.

    `target` is anything `mcpgym.connect` takes (or an open `SharedClient` to share with other
    code); `options` are `connect`'s and `SharedClient`'s (`connections=`). `batch=False` sends
    one request per slot even where one `mcpgym/steps` request could carry them all."""
    return AsyncVectorEnv(target, num_envs, autoreset=autoreset, batch=batch, **options)
