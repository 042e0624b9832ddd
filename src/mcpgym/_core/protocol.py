"""The mcpgym wire contract: `_meta` keys, the control-plane methods and their models.

Layer: protocol vocabulary only. Imported by the server and by every client door; imports
nothing from mcpgym but `_types`. See rfcs/0001-protocol-mapping.md for why each piece looks
the way it does.

- Every request that belongs to an episode carries its id in `params._meta[EPISODE_KEY]`
  (and, over HTTP, in the `EPISODE_HEADER` header so a router can hash on it). The client
  mints the id before its first request, so the id is routable from the first byte.
- Every `tools/call` result carries `_meta[STEP_KEY] = {"v", "reward", "done", "terminated",
  "truncated", "step"}`, plus `"components"` (named reward parts) when the environment has a
  rubric (rfcs/0007-rewards.md). `v` is `STEP_VERSION`; keys are only ever added, and readers
  default what an older stamp lacks (no `v`: version 1, before `terminated`, which then reads
  as `done and not truncated`). `reward` is null when the step is unscored (a judge failed).
  Ordinary MCP clients ignore the stamp.
- The Gym control plane is three extension request methods (`mcpgym/reset`, `mcpgym/state`,
  `mcpgym/close`). They are not tools, so they never appear in `tools/list` and an agent
  cannot call them through `tools/call`.
"""

from __future__ import annotations

import re
import secrets
from typing import Any, Final, Literal, cast

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field, model_validator

from mcpgym._core.types import Components, EpisodeState, JSONValue, Score

EXTENSION_ID: Final = "io.mcpgym/gym"
"""Advertised under `capabilities.extensions`; its settings name the control-plane methods."""

EPISODE_KEY: Final = "io.mcpgym/episode"
STEP_KEY: Final = "io.mcpgym/step"
EPISODE_HEADER: Final = "Mcpgym-Episode"
STEP_VERSION: Final = 2
"""The step stamp's layout version: 2 added `terminated` and `components` (rfcs/0007-rewards.md)."""
RUBRIC_KEY: Final = "io.mcpgym/rubric"
"""In `reset`'s `info` when the environment has a rubric: `{"components": [...], "trajectory":
[...]}`, the names of its components and of those scored only when the episode ends."""

SUCCESS_KEY: Final = "io.mcpgym/success"
"""In `reset`'s `info` when the environment declares `max_reward`: `{"max_reward": float}`, the
best return an episode can earn (`mcpgym eval` counts an episode reaching it a success)."""

# `_meta` prefixes a wrapped server may not send through: the SDK's own (they describe its hop) and ours.
RESERVED_META: Final = ("io.mcpgym/", "io.modelcontextprotocol/")

RESET_METHOD: Final = "mcpgym/reset"
STATE_METHOD: Final = "mcpgym/state"
CLOSE_METHOD: Final = "mcpgym/close"

# 128 bits of randomness, URL- and header-safe. The server refuses anything shorter so a
# buggy client cannot collide with (or guess) another client's episode.
_EPISODE_ID_RE: Final = re.compile(r"[A-Za-z0-9_-]{22,128}")


def new_episode_id() -> str:
    """A fresh, unguessable episode id (what a client mints before `reset`)."""
    return secrets.token_urlsafe(16)


def episode_meta(episode_id: str) -> types.RequestParamsMeta:
    """The `_meta` that names an episode on a request."""
    return cast(types.RequestParamsMeta, {EPISODE_KEY: episode_id})


def is_valid_episode_id(value: object) -> bool:
    # fullmatch, not match with "$": "$" also matches before a trailing newline.
    return isinstance(value, str) and _EPISODE_ID_RE.fullmatch(value) is not None


class ResetParams(types.RequestParams):
    seed: int | None = None
    options: dict[str, Any] | None = None
    previous: str | None = None
    """An episode this client is done with; the server closes it in the same round trip."""


class EpisodeParams(types.RequestParams):
    """Params of `mcpgym/state` and `mcpgym/close`: the episode is named in `_meta`."""


class ResetResult(types.Result):
    observation: JSONValue = None
    info: dict[str, JSONValue] = Field(default_factory=dict)


class StateResult(types.Result):
    state: EpisodeState


class CloseResult(types.Result):
    """What `mcpgym/close` answers: the episode's final state (its return including a
    trajectory score made at close), or None when there was no such live episode. Older
    clients read it as an empty result."""

    state: EpisodeState | None = None


class ResetRequest(types.Request[ResetParams, Literal["mcpgym/reset"]]):
    method: Literal["mcpgym/reset"] = "mcpgym/reset"
    params: ResetParams


class StateRequest(types.Request[EpisodeParams, Literal["mcpgym/state"]]):
    method: Literal["mcpgym/state"] = "mcpgym/state"
    params: EpisodeParams


class CloseRequest(types.Request[EpisodeParams, Literal["mcpgym/close"]]):
    method: Literal["mcpgym/close"] = "mcpgym/close"
    params: EpisodeParams


class StepMeta(BaseModel):
    """The value under `_meta[STEP_KEY]` of every `tools/call` result."""

    model_config = ConfigDict(frozen=True)

    v: int = 1
    reward: Score = 0.0
    done: bool = False
    truncated: bool = False
    step: int = 0
    terminated: bool = False
    components: Components = Field(default_factory=dict)
    seed: int | None = None
    """The episode's reset seed, when it had one."""
    task: str | None = None
    """The catalog task the episode plays, when the server knows it (`mcpgym._core.tasks`)."""

    @model_validator(mode="before")
    @classmethod
    def _before_terminated(cls, data: Any) -> Any:
        if isinstance(data, dict) and "terminated" not in data:
            return {**data, "terminated": bool(data.get("done")) and not data.get("truncated")}
        return data


def split_meta(meta: dict[str, Any] | None) -> tuple[StepMeta | None, dict[str, Any] | None]:
    """Separate our step stamp (and the SDK's own reserved stamps) from a tool's own `_meta`."""
    if not meta:
        return None, None
    raw = meta.get(STEP_KEY)
    step = StepMeta.model_validate(raw) if isinstance(raw, dict) else None
    return step, unreserved(meta)


def unreserved(meta: dict[str, Any] | None) -> dict[str, Any] | None:
    """`meta` less its `RESERVED_META` keys (None when nothing is left); `meta` itself when it has none."""
    if not meta or not any(key.startswith(RESERVED_META) for key in meta):
        return meta
    return {key: value for key, value in meta.items() if not key.startswith(RESERVED_META)} or None
