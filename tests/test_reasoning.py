"""mcpgym.servers.reasoning: reasoning-gym tasks with stable ids, graded by reasoning-gym's scorers."""

from __future__ import annotations

import functools
import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

import mcpgym
from mcpgym import CallToolAction
from mcpgym.servers.reasoning import Mix, Reasoning
from mcpgym.testing import transcripts as _transcripts

pytestmark = pytest.mark.anyio
REPO = Path(__file__).resolve().parent.parent


def truth(task_id: str) -> dict[str, Any]:
    """The entry behind a task id, straight from reasoning-gym (the test's oracle)."""
    import reasoning_gym  # type: ignore[import-untyped]

    name, seed, index = task_id.split("/")
    entry: dict[str, Any] = reasoning_gym.create_dataset(name, size=1000, seed=int(seed))[int(index)]
    return entry


async def test_right_answers_earn_one_and_wrong_or_gamed_answers_earn_nothing() -> None:
    async with mcpgym.connect(Reasoning) as env:
        for seed in range(6):
            first = await env.reset(seed=seed)
            entry = truth(first.observation["task_id"])
            assert first.observation["question"] == entry["question"] and "answer" not in first.observation
            right = await env.step(CallToolAction(tool_name="answer", arguments={"text": entry["answer"]}))
            assert (right.reward, right.done, right.text) == (1.0, True, "Correct.")
        for gamed in ["", "I don't know", " ".join(str(n) for n in range(-100, 101)), "0\n1\n2\n3\n4\n5\n6\n7\n8\n9"]:
            await env.reset(seed=0)
            result = await env.step(CallToolAction(tool_name="answer", arguments={"text": gamed}))
            assert result.reward == 0.0 and result.done, gamed[:40]
        again = await env.step(CallToolAction(tool_name="answer", arguments={"text": "1"}))
        assert again.is_error and again.reward == 0.0  # one answer per episode


async def test_task_ids_are_stable_and_name_the_task() -> None:
    async with mcpgym.connect(Reasoning) as env:
        a = await env.reset(options={"task_id": "leg_counting/0/17"})
        b = await env.reset(seed=99, options={"task_id": "leg_counting/0/17"})
        assert a.observation == b.observation and a.observation["question"] == truth("leg_counting/0/17")["question"]
        with pytest.raises(mcpgym.MCPError, match="unknown task id"):
            await env.reset(options={"task_id": "leg_counting/5/17"})  # another generation seed
        with pytest.raises(mcpgym.MCPError, match="DATASET/SEED/INDEX"):
            await env.reset(options={"task_id": "leg_counting"})


def test_datasets_are_drawn_by_weight() -> None:
    mix = Mix.parse("chain_sum:3, leg_counting", size=50, seed=1)
    rng = random.Random(0)
    drawn = Counter(mix.draw(rng).split("/")[0] for _ in range(800))
    assert 2.4 < drawn["chain_sum"] / drawn["leg_counting"] < 3.7, drawn
    with pytest.raises(ValueError, match="unknown dataset"):
        Mix.parse("no_such_thing")
    with pytest.raises(ValueError, match="positive"):
        Mix.parse("chain_sum:0")


async def test_every_door_gives_the_same_task_and_grade() -> None:
    script: list[tuple[str, dict[str, Any]]] = [("get_task", {}), ("answer", {"text": "7"}), ("answer", {"text": "8"})]
    results = await _transcripts(Reasoning, script)
    reference = results["inprocess"]
    assert reference[0][1]["task_id"] == "leg_counting/0/776"  # the premise: seed 0 draws a known task
    for kind, transcript in results.items():
        assert transcript == reference, f"{kind} differs from in-process"


async def test_the_catalog_lists_questions_and_never_answers() -> None:
    async with Client(mcpgym.GymServer(Reasoning).mcp) as client:
        prompts = []
        cursor = None
        while True:
            page = await client.list_prompts(cursor=cursor)
            prompts += page.prompts
            if (cursor := page.next_cursor) is None:
                break
        got = await client.get_prompt("leg_counting/0/3")
        resources = (await client.list_resources()).resources
        read = await client.read_resource(resources[5].uri)
    assert len(prompts) == 300 and prompts[0].name == "chain_sum/0/0"
    question = truth("leg_counting/0/3")["question"]
    assert got.messages[0].content.text == question  # type: ignore[union-attr]
    blob = json.dumps([p.model_dump(mode="json") for p in prompts]) + got.model_dump_json() + read.model_dump_json()
    assert '"answer"' not in blob and "source_dataset" not in blob and "metadata" not in blob


def test_cli_refuses_unknown_datasets_plainly() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcpgym.servers.reasoning", "--dataset", "chain_sum,nope"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode != 0 and "unknown dataset(s) nope" in done.stderr


async def test_partial_credit_only_when_asked_for() -> None:
    mix = Mix.parse("spell_backward", size=50, seed=0)
    entry = truth("spell_backward/0/0")
    almost = entry["answer"][:-1]  # one letter short: reasoning-gym's scorer gives partial credit
    rewards = []
    for partial in (False, True):
        async with mcpgym.connect(functools.partial(Reasoning, mix=mix, partial_credit=partial)) as env:
            await env.reset(options={"task_id": "spell_backward/0/0"})
            result = await env.step(CallToolAction(tool_name="answer", arguments={"text": almost}))
            rewards.append(result.reward)
            assert "Partly correct" in result.text
    assert rewards[0] == 0.0 and 0.5 < rewards[1] < 1.0, rewards


async def test_an_oversized_answer_is_refused_not_graded() -> None:
    async with mcpgym.connect(Reasoning) as env:
        await env.reset(seed=0)
        result = await env.step(CallToolAction(tool_name="answer", arguments={"text": "1" * 20_001}))
        assert result.is_error and not result.done and "text" in result.text
