"""`SyncVectorEnv`: the blocking twin of `AsyncVectorEnv`, for trainers without an event loop.

Layer: one thin layer over the async vector env, through an anyio blocking portal, exactly as
`SyncEnv` is over `AsyncEnv`; no second implementation.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, ExitStack
from types import TracebackType
from typing import Any, Self

from anyio.from_thread import BlockingPortal, start_blocking_portal

from mcpgym._connect import Target
from mcpgym._types import Action
from mcpgym._vector import AsyncVectorEnv, AutoresetMode, VectorStep


class SyncVectorEnv(AbstractContextManager["SyncVectorEnv"]):
    """Blocking vector env: `with mcpgym.connect_vector_sync(target, 8) as envs: envs.reset(seed=0)`."""

    def __init__(self, env: AsyncVectorEnv) -> None:
        self.env = env
        self._stack = ExitStack()
        self._portal: BlockingPortal | None = None

    def __enter__(self) -> Self:
        with ExitStack() as stack:
            self._portal = stack.enter_context(start_blocking_portal())
            stack.enter_context(self._portal.wrap_async_context_manager(self.env))
            self._stack = stack.pop_all()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stack.__exit__(exc_type, exc, tb)
        self._portal = None

    @property
    def portal(self) -> BlockingPortal:
        if self._portal is None:
            raise RuntimeError("use SyncVectorEnv inside a `with` block")
        return self._portal

    @property
    def num_envs(self) -> int:
        return self.env.num_envs

    @property
    def metadata(self) -> dict[str, Any]:
        return self.env.metadata

    def reset(
        self,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
        mask: Sequence[bool] | None = None,
    ) -> VectorStep:
        batch: VectorStep = self.portal.call(self.env.reset, seed, options, mask)
        return batch

    def step(self, actions: Sequence[Action]) -> VectorStep:
        return self.portal.call(self.env.step, actions)


def connect_vector_sync(
    target: Target, num_envs: int, *, autoreset: AutoresetMode = "next_step", **options: Any
) -> SyncVectorEnv:
    """The blocking twin of `connect_vector`: `with mcpgym.connect_vector_sync(target, 8) as envs: ...`."""
    return SyncVectorEnv(AsyncVectorEnv(target, num_envs, autoreset=autoreset, **options))
