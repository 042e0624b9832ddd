"""The differential check: a scripted episode gives the same transcript through every door.

Layer: testing tools over the public API.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcpgym._client.api import AsyncEnv
from mcpgym._core.errors import MCPError
from mcpgym._core.types import CallToolAction, ListToolsAction
from mcpgym._episode.environment import Environment
from mcpgym._targets.connect import connect
from mcpgym.testing._doors import DOORS, Door, door

Script = Sequence[tuple[str, dict[str, Any]]]
"""Tool calls to make after `reset`: `[(tool_name, arguments), ...]`; bad calls are welcome."""


async def transcript(
    env: AsyncEnv, script: Script, *, seed: int = 0, options: dict[str, Any] | None = None
) -> list[Any]:
    """Play reset + `tools/list` + `script` + state on `env`; return everything a door could get wrong.

    Each call becomes `("step", name, result, reward, done, truncated, info, terminated,
    components)`, or `("error", name, code, message)` when the call is a protocol error (e.g. an
    unknown tool). Then the state, and the final state that closing the episode returns; their
    episode id (minted per episode) is left out, so transcripts compare.
    """
    first = await env.reset(seed=seed, options=options)
    rows: list[Any] = [("reset", first.observation, first.reward, first.done)]
    listed = await env.step(ListToolsAction())
    rows.append(("tools", [t.model_dump(mode="json") for t in listed.observation]))
    for name, arguments in script:
        try:
            r = await env.step(CallToolAction(tool_name=name, arguments=arguments))
        except MCPError as exc:
            rows.append(("error", name, exc.code, exc.message))
            continue
        row = ("step", name, r.observation.model_dump(mode="json"), r.reward, r.done, r.truncated, r.info)
        rows.append((*row, r.terminated, r.components))
    state = (await env.state()).model_dump()
    state.pop("episode_id")
    if state["render"] is None:
        del state["render"]  # no render() to compare: the row stays what it was before render existed
    rows.append(("state", state))
    final = await env.close_episode()  # what closing scores (a rubric's trajectory components) counts too
    closed = final.model_dump(exclude={"render"}) if final is not None else None  # never rendered
    if closed is not None:
        closed.pop("episode_id")
    rows.append(("closed", closed))
    return rows


async def transcripts(
    env: type[Environment],
    script: Script,
    *,
    seed: int = 0,
    options: dict[str, Any] | None = None,
    doors: Sequence[Door] = DOORS,
) -> dict[str, list[Any]]:
    """`transcript` of the same episode through each of `doors`, by door name."""
    out: dict[str, list[Any]] = {}
    for kind in doors:
        async with door(kind, env) as target, connect(target) as client:
            out[kind] = await transcript(client, script, seed=seed, options=options)
    return out


async def assert_doors_agree(
    env: type[Environment],
    script: Script,
    *,
    seed: int = 0,
    options: dict[str, Any] | None = None,
    doors: Sequence[Door] = DOORS,
) -> list[Any]:
    """Play `script` through every door; fail naming the first row where a door differs from the first.

    Returns the first door's transcript (in-process by default), for further asserts.
    """
    results = await transcripts(env, script, seed=seed, options=options, doors=doors)
    reference_door, reference = next(iter(results.items()))
    for kind, rows in results.items():
        if rows == reference:
            continue
        at = next(
            (i for i, (a, b) in enumerate(zip(rows, reference, strict=False)) if a != b), min(len(rows), len(reference))
        )
        mine = rows[at] if at < len(rows) else "<missing>"
        theirs = reference[at] if at < len(reference) else "<missing>"
        raise AssertionError(
            f"{env.__name__}: the {kind} door differs from {reference_door} at row {at}:\n"
            f"  {kind}: {mine!r}\n  {reference_door}: {theirs!r}"
        )
    return reference
