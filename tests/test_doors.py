"""The same scripted episodes over every door give identical results (the differential test)."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

import mcpgym
from mcpgym.servers.echo import Echo
from mcpgym.testing import Script, assert_doors_agree, transcript
from tests.conftest import DOORS, door
from tests.envs import Briefed, Counter, Graded

pytestmark = pytest.mark.anyio


ECHO_SCRIPT: Script = [
    ("repeat", {"message": "ab", "times": 3}),
    ("repeat", {"message": "ab", "times": "x"}),  # wrong type
    ("repeat", {"times": 2}),  # missing field
    ("repeat", {"message": "ab", "times": 11}),  # out of bounds
    ("no_such_tool", {}),  # unknown tool
    ("echo_message", {"message": "not the word"}),
    ("echo_message", {"message": "orbit"}),  # the seed-0 target: reward 1, done
    ("echo_message", {"message": "again"}),  # after done
]

COUNTER_SCRIPT: Script = [
    ("add", {"n": 5}),
    ("add", {"n": "7"}),  # the SDK coerces numeric strings, on every door alike
    ("slow_add", {"n": 1}),
    ("fail", {"kind": "tool"}),
    ("fail", {"kind": "crash"}),
    ("fail", {"kind": "unserialisable"}),
    ("fail", {"kind": "nope"}),  # not in the enum
    ("add", {"n": 1}),  # the 8th call: max_steps=7 already truncated the episode
]


GRADED_UNFINISHED: Script = [("guess", {"text": "or"})]  # scored on close

GRADED_SCRIPT: Script = [
    ("guess", {"text": "xyz"}),  # nothing found: a well-formed step with a brevity cost
    ("guess", {"text": "o"}),  # one letter: progress shaping
    ("broken", {}),  # an error result: the format gate zeroes this step
    ("guess", {"text": "o"}),  # the same again: no progress earned twice
    ("guess", {"text": "orbit"}),  # solved: the trajectory component arrives on this step
    ("guess", {"text": "again"}),  # after done
]


@pytest.mark.parametrize(
    ("env_cls", "script"),
    [(Echo, ECHO_SCRIPT), (Counter, COUNTER_SCRIPT), (Graded, GRADED_SCRIPT), (Graded, GRADED_UNFINISHED)],
)
async def test_every_door_gives_the_same_episode(env_cls: type[mcpgym.Environment], script: Script) -> None:
    reference = await assert_doors_agree(env_cls, script, seed=0)
    assert len(reference) == len(script) + 4  # reset, tools, one row per call, state, closed


class Drifting(Counter):
    """Differs by door: `where` says whether it runs in a `python -m mcpgym` child (the stdio door)."""

    @mcpgym.tool
    async def where(self) -> str:
        """Say where the call runs."""
        return "child" if sys.argv[0].endswith(os.path.join("mcpgym", "__main__.py")) else "here"


async def test_a_door_that_differs_is_named_with_its_row() -> None:
    with pytest.raises(AssertionError, match=r"the stdio door differs from inprocess at row 3"):
        await assert_doors_agree(Drifting, [("add", {"n": 1}), ("where", {})], seed=0)


async def test_the_author_fixture_runs_once_per_door(mcpgym_env: mcpgym.AsyncEnv, mcpgym_door: str) -> None:
    result = await mcpgym_env.reset(seed=0)
    assert result.observation["target"] == "orbit", mcpgym_door


@pytest.fixture
def mcpgym_environment() -> type[mcpgym.Environment]:
    return Echo


async def test_echo_transcript_is_what_the_script_expects() -> None:
    async with mcpgym.connect(Echo) as env:
        t = await transcript(env, ECHO_SCRIPT, seed=0)
    assert t[0][1]["target"] == "orbit"
    steps = {i: row for i, row in enumerate(t)}
    assert steps[2][2]["content"][0]["text"] == "ab ab ab" and steps[2][2]["structured_content"] == {
        "result": "ab ab ab"
    }
    for i, field in ((3, "times"), (4, "message"), (5, "times")):
        assert steps[i][2]["is_error"] is True and field in steps[i][2]["content"][0]["text"]
    # An invented tool name is an is_error step on every door (counted, reward 0), marked in info.
    assert steps[6][:2] == ("step", "no_such_tool") and steps[6][2]["is_error"] is True
    assert steps[6][2]["content"][0]["text"].startswith("Unknown tool: 'no_such_tool'")
    assert steps[6][3:] == (0.0, False, False, {"step": 5, "unknown_tool": True}, False, {})
    assert steps[7][3:5] == (0.0, False)
    assert steps[8][3:5] == (1.0, True)
    assert steps[9][2]["is_error"] is True and steps[9][4] is True and steps[9][3] == 0.0
    assert t[-2][1] == {
        "environment": "Echo",
        "step_count": 7,
        "total_reward": 1.0,
        "done": True,
        "truncated": False,
        "seed": 0,
        "info": {},
        "terminated": True,  # Echo's episode ends on its own terms
        "components": {},  # no rubric: no components
    }
    assert t[-1] == ("closed", t[-2][1])


async def test_counter_transcript_covers_failures_and_truncation() -> None:
    async with mcpgym.connect(Counter) as env:
        t = await transcript(env, COUNTER_SCRIPT, seed=0)
    start = t[0][1]["start"]
    assert t[2][2]["content"][0]["text"] == str(start + 5) and t[2][3] == 0.5
    assert t[3][2]["structured_content"] == {"result": start + 12}
    assert t[5][2]["content"][0]["text"] == "the tool refused" and t[5][2]["is_error"]
    assert "ValueError: boom" in t[6][2]["content"][0]["text"]
    assert "does not match its output schema" in t[7][2]["content"][0]["text"]
    assert t[8][2]["is_error"] and "kind" in t[8][2]["content"][0]["text"]
    assert t[8][4:6] == (True, True)  # done and truncated at max_steps
    assert t[8][7] is False  # truncated, not terminated: a value bootstrap goes on from here
    assert t[9][2]["is_error"] and "over" in t[9][2]["content"][0]["text"]


async def _rl_loop(env: mcpgym.AsyncEnv) -> list[Any]:
    """A naive RL loop: step before reset, reset with info, then a policy that only invents names."""
    transcript: list[Any] = []
    try:
        await env.call_tool("noop")
    except RuntimeError as exc:  # step before reset: the client says so, on every door alike
        transcript.append(("before reset", str(exc)))
    first = await env.reset(seed=7)
    transcript.append(("reset", first.observation, first.info))
    result = None
    while result is None or not result.done:  # ends: invented calls count toward max_steps
        result = await env.call_tool("invented_tool", {"x": 1})
        transcript.append(
            ("step", result.is_error, result.text, result.reward, result.done, result.truncated, result.info)
        )
    after = await env.call_tool("also_invented")  # after done: nothing more is counted
    transcript.append(("after", after.is_error, after.done, after.info))
    transcript.append(("state", (await env.state()).step_count))
    return transcript


async def test_reset_info_and_invented_tools_are_the_same_on_every_door() -> None:
    results: dict[str, Any] = {}
    for kind in DOORS:
        async with door(kind, Briefed) as target, mcpgym.connect(target) as env:
            results[kind] = await _rl_loop(env)
    reference = results["inprocess"]
    assert reference[0] == ("before reset", "No episode is running: call reset() first")
    assert reference[1] == ("reset", {"prompt": "call noop"}, {"task_id": "t-1", "seed": 7})
    unknown = "Unknown tool: 'invented_tool'. This environment's tools: noop"
    assert reference[2] == ("step", True, unknown, 0.0, False, False, {"step": 1, "unknown_tool": True})
    assert reference[3] == ("step", True, unknown, 0.0, True, True, {"step": 2, "unknown_tool": True})
    assert reference[4] == ("after", True, True, {"step": 2, "unknown_tool": True})
    assert reference[5] == ("state", 2)
    for kind in DOORS[1:]:
        assert results[kind] == reference, f"{kind} differs from in-process"


async def test_plain_agents_still_get_the_protocol_error_for_an_unknown_tool() -> None:
    from mcp import Client

    from mcpgym._core.protocol import STEP_KEY, episode_meta

    server = mcpgym.GymServer(Briefed)
    async with mcpgym.connect(server) as env:  # an mcpgym client, to name an episode on the wire
        await env.reset()
        assert env.episode_id is not None
        meta = episode_meta(env.episode_id)
        async with Client(server.mcp, mode="legacy") as agent:
            with pytest.raises(mcpgym.MCPError) as caught:  # the wire stays spec-correct: -32602
                await agent.call_tool("invented_tool", {}, meta=meta)
    assert caught.value.code == -32602 and caught.value.message.startswith("Unknown tool")
    stamp = {"v": 2, "reward": 0.0, "done": False, "terminated": False, "truncated": False, "step": 1}
    assert caught.value.data == {STEP_KEY: stamp}


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
