"""The step's hot path: the few places written for speed rather than plainly, each one kept
because `benchmarks/bench_hotpath.py` shows it matters against the plain way, in one run.

Layer: core (pydantic, anyio). Everything else in mcpgym is written the obvious way; a trick
that stops paying for itself (the benchmark's ratio near 1) goes back to the plain form.

- `trusted`: a pydantic model built by setting its slots through their descriptors, for
  values we made ourselves (plain: validating them, or `model_construct`, which is slower
  still). Every step of every door builds a `StepResult` (`tool_step`) and its result this way.
- `Turns`: an episode's steps take turns with one flag test when nobody waits (plain: an
  `anyio.Lock`, whose acquire yields to the event loop even when it is free).

(The episode core's step also runs the tool call in its own frame rather than in a helper
coroutine: `Episode.step`, measured by the same benchmark.)
"""

from __future__ import annotations

from collections import deque
from typing import Any, TypeVar

import anyio
from pydantic import BaseModel

ModelT = TypeVar("ModelT", bound=BaseModel)


# The slots every BaseModel instance carries, set through their descriptors (what
# `model_construct` does, minus its per-field Python loop).
_new = object.__new__
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def trusted(cls: type[ModelT], values: dict[str, Any], fields_set: set[str]) -> ModelT:
    """The instance of `cls` that validating `values` would build, built without validating.

    Only for values the caller knows are already valid, of a model with no private attributes
    and no `extra="allow"` (that is, hot-path objects built from our own data). `values` holds
    every field by its Python name, exactly as the validated instance's `__dict__` would;
    `fields_set` is what `model_fields_set` would be. The result is a real `cls` instance,
    equal to the validated one (`==`, `model_dump`, fields set), and a frozen model stays
    frozen; tests/test_fastpath.py pins this for each use. It costs about a fifth of
    validation, which matters on the in-process step (rfcs/0002-in-process-mode.md).
    """
    obj = _new(cls)
    _set_dict(obj, values)
    _set_fields_set(obj, fields_set)
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj


class Turns:
    """Steps of one episode take turns: one at a time, in the order they arrive.

    Agents may send parallel calls to one episode. A free turn is taken with one flag test (a
    trainer awaiting one step at a time never waits, and `anyio.Lock`'s task bookkeeping costs
    more than the rest of such a step's accounting); a caller that finds the episode busy
    queues on an event and is handed the turn by the step before it.
    """

    __slots__ = ("_waiting", "busy")

    def __init__(self) -> None:
        self.busy = False
        self._waiting: deque[anyio.Event] = deque()

    def take_nowait(self) -> bool:
        """Take the turn if it is free; False if the caller must `wait()` for it."""
        if self.busy:
            return False
        self.busy = True
        return True

    async def wait(self) -> None:
        """Wait in line; returns holding the turn."""
        handed = anyio.Event()
        self._waiting.append(handed)
        try:
            await handed.wait()
        except BaseException:  # cancelled in line: leave it, or pass on a turn handed to us
            if handed.is_set():
                self.release()
            else:
                self._waiting.remove(handed)
            raise

    def release(self) -> None:
        """End this turn: hand it to the next caller in line (still busy), or free it."""
        if self._waiting:
            self._waiting.popleft().set()
        else:
            self.busy = False
