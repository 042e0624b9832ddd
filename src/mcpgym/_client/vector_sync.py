"""`SyncVectorEnv`: the blocking twin of `AsyncVectorEnv`, for trainers without an event loop.

Layer: one thin layer over the async vector env, through an anyio blocking portal, exactly as
`SyncEnv` is over `AsyncEnv`; no second implementation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcpgym._client.sync import PortalTwin
from mcpgym._client.vector import AsyncVectorEnv, AutoresetMode, VectorStep
from mcpgym._core.types import Action
from mcpgym._targets.connect import Target


class SyncVectorEnv(PortalTwin[AsyncVectorEnv]):
    """Blocking vector env: `with mcpgym.connect_vector_sync(target, 8) as envs: envs.reset(seed=0)`."""

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
