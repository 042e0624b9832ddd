"""`read_traces`: what a gateway recorded, per episode, joined to the server's recordings and a rollout's trajectories.

Layer: reading files (the gateway's DIR, `mcpgym.read_recordings`, `harness.read_rollout`);
the join key is the episode id, which the server assigns, the rollout records and the
gateway gets with every call (`Mcpgym-Episode`, the path, or a registered key). The harness
is built on the core, so its reader is looked up by name when a rollout file is given (as the
CLI finds the harness's commands), never imported here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpgym.gateway.merge import merge
from mcpgym.gateway.record import read_calls
from mcpgym.gateway.types import Call, TokenSequence

if TYPE_CHECKING:
    from mcpgym import Recording


@dataclass(frozen=True)
class Trace:
    """One episode's model calls, merged into token sequences, with what else was recorded of it."""

    episode_id: str | None
    """None for the calls that named no episode."""
    calls: list[Call] = field(default_factory=list)
    tokens: list[TokenSequence] = field(default_factory=list)
    """One sequence per branch (`merge`); empty when the engine gave no token ids."""
    recording: Recording | None = None
    """The server's record of the episode (`recordings=`), if one has this id."""
    trajectory: Any = None
    """The rollout's `harness.Trajectory` of the episode (`rollout=`), if one has this id."""


def read_traces(
    directory: str | Path, *, recordings: str | Path | None = None, rollout: str | Path | None = None
) -> list[Trace]:
    """Every episode the gateway recorded under `directory`, in the order of their first call.

    `recordings` is a server's `--record` directory and `rollout` a rollout's `--out` file; an
    episode found there is attached by id. Episodes found only there are not listed: the
    traces are the gateway's.
    """
    by_id = {r.episode_id: r for r in _recordings(recordings)}
    trajectories = {t.episode_id: t for t in _rollout(rollout) if t.episode_id is not None}
    traces = [
        Trace(
            episode_id=episode,
            calls=calls,
            tokens=merge(calls, episode),
            recording=by_id.get(episode) if episode is not None else None,
            trajectory=trajectories.get(episode) if episode is not None else None,
        )
        for episode, calls in read_calls(directory).items()
    ]
    return sorted(traces, key=lambda t: t.calls[0].time if t.calls else 0.0)


def _recordings(directory: str | Path | None) -> list[Recording]:
    if directory is None:
        return []
    from mcpgym import read_recordings

    return read_recordings(directory)


def _rollout(path: str | Path | None) -> list[Any]:
    if path is None:
        return []
    trajectories: list[Any] = importlib.import_module("mcpgym.harness").read_rollout(path)
    return trajectories
