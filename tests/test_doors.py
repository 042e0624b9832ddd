"""The same scripted episodes over every door give identical results (the differential test)."""

from __future__ import annotations

from typing import Any

import pytest

import mcpgym
from mcpgym import CallToolAction, ListToolsAction
from servers.echo import Echo
from tests.conftest import DOORS, door
from tests.envs import Counter

pytestmark = pytest.mark.anyio


async def _script(env: mcpgym.AsyncEnv, calls: list[tuple[str, dict[str, Any]]], seed: int) -> list[Any]:
    """Run reset + calls + state; return a transcript with everything a door could get wrong."""
    first = await env.reset(seed=seed)
    transcript: list[Any] = [("reset", first.observation, first.reward, first.done)]
    listed = await env.step(ListToolsAction())
    transcript.append(("tools", [t.model_dump(mode="json") for t in listed.observation]))
    for name, arguments in calls:
        try:
            r = await env.step(CallToolAction(tool_name=name, arguments=arguments))
        except mcpgym.MCPError as exc:
            transcript.append(("error", name, exc.code, exc.message))
            continue
        transcript.append(("step", name, r.observation.model_dump(mode="json"), r.reward, r.done, r.truncated, r.info))
    state = (await env.state()).model_dump()
    state.pop("episode_id")
    transcript.append(("state", state))
    return transcript


ECHO_SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("repeat", {"message": "ab", "times": 3}),
    ("repeat", {"message": "ab", "times": "x"}),  # wrong type
    ("repeat", {"times": 2}),  # missing field
    ("repeat", {"message": "ab", "times": 11}),  # out of bounds
    ("no_such_tool", {}),  # unknown tool
    ("echo_message", {"message": "not the word"}),
    ("echo_message", {"message": "orbit"}),  # the seed-0 target: reward 1, done
    ("echo_message", {"message": "again"}),  # after done
]

COUNTER_SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("add", {"n": 5}),
    ("add", {"n": "7"}),  # the SDK coerces numeric strings, on every door alike
    ("slow_add", {"n": 1}),
    ("fail", {"kind": "tool"}),
    ("fail", {"kind": "crash"}),
    ("fail", {"kind": "unserialisable"}),
    ("fail", {"kind": "nope"}),  # not in the enum
    ("add", {"n": 1}),  # the 8th call: max_steps=7 already truncated the episode
]


async def _transcripts(env_cls: type[mcpgym.Environment], script: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in DOORS:
        async with door(kind, env_cls) as target, mcpgym.connect(target) as env:
            out[kind] = await _script(env, script, seed=0)
    return out


@pytest.mark.parametrize(("env_cls", "script"), [(Echo, ECHO_SCRIPT), (Counter, COUNTER_SCRIPT)])
async def test_every_door_gives_the_same_episode(
    env_cls: type[mcpgym.Environment], script: list[tuple[str, dict[str, Any]]]
) -> None:
    results = await _transcripts(env_cls, script)
    reference = results["inprocess"]
    for kind in DOORS[1:]:
        assert results[kind] == reference, f"{kind} differs from in-process"


async def test_echo_transcript_is_what_the_script_expects() -> None:
    async with mcpgym.connect(Echo) as env:
        t = await _script(env, ECHO_SCRIPT, seed=0)
    assert t[0][1]["target"] == "orbit"
    steps = {i: row for i, row in enumerate(t)}
    assert steps[2][2]["content"][0]["text"] == "ab ab ab" and steps[2][2]["structured_content"] == {
        "result": "ab ab ab"
    }
    for i, field in ((3, "times"), (4, "message"), (5, "times")):
        assert steps[i][2]["is_error"] is True and field in steps[i][2]["content"][0]["text"]
    assert steps[6][:3] == ("error", "no_such_tool", -32602)
    assert steps[7][3:5] == (0.0, False)
    assert steps[8][3:5] == (1.0, True)
    assert steps[9][2]["is_error"] is True and steps[9][4] is True and steps[9][3] == 0.0
    assert t[-1][1] == {
        "environment": "Echo",
        "step_count": 6,
        "total_reward": 1.0,
        "done": True,
        "truncated": False,
        "seed": 0,
        "info": {},
    }


async def test_counter_transcript_covers_failures_and_truncation() -> None:
    async with mcpgym.connect(Counter) as env:
        t = await _script(env, COUNTER_SCRIPT, seed=0)
    start = t[0][1]["start"]
    assert t[2][2]["content"][0]["text"] == str(start + 5) and t[2][3] == 0.5
    assert t[3][2]["structured_content"] == {"result": start + 12}
    assert t[5][2]["content"][0]["text"] == "the tool refused" and t[5][2]["is_error"]
    assert "ValueError: boom" in t[6][2]["content"][0]["text"]
    assert "does not match its output schema" in t[7][2]["content"][0]["text"]
    assert t[8][2]["is_error"] and "kind" in t[8][2]["content"][0]["text"]
    assert t[8][4:6] == (True, True)  # done and truncated at max_steps
    assert t[9][2]["is_error"] and "over" in t[9][2]["content"][0]["text"]


async def _failed_reset(env: mcpgym.AsyncEnv) -> list[Any]:
    """A reset that fails after a good one: what the client holds afterwards, and what it says."""
    await env.reset(seed=0)
    transcript: list[Any] = []
    try:
        await env.reset(seed=1, options={"refuse": True})
    except mcpgym.MCPError as exc:
        transcript.append(("reset failed", exc.code, exc.message))
    transcript.append(("episode", env.episode_id))
    with pytest.raises(RuntimeError, match=r"call reset\(\) first"):
        await env.call_tool("add", {"n": 1})
    again = await env.reset(seed=0)  # and the client recovers with the next reset
    transcript.append(("reset", again.observation, (await env.call_tool("add", {"n": 1})).reward))
    return transcript


async def test_a_failed_reset_leaves_every_door_with_no_episode() -> None:
    results: dict[str, Any] = {}
    for kind in DOORS:
        async with door(kind, Counter) as target, mcpgym.connect(target) as env:
            results[kind] = await _failed_reset(env)
    assert results["inprocess"][0][0] == "reset failed" and results["inprocess"][1] == ("episode", None)
    for kind in DOORS[1:]:
        assert results[kind] == results["inprocess"], f"{kind} differs from in-process"
