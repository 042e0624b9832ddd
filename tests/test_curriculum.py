"""The curriculum (#27): the server's task sampler, what it counts, who may read it, and how a
rollout, a GRPO group and a TRL dataset draw from it."""

from __future__ import annotations

import json
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

import mcpgym
from mcpgym import harness
from mcpgym._core.errors import MCPError
from mcpgym._core.tasks import CURRICULUM_KEY, TASK_INFO_KEY, TaskStatsParams, TaskStatsRequest, TaskStatsResult
from mcpgym._episode.sampler import Learnability, Sampler, SamplerConfig
from mcpgym._targets.spec import SpecError, load_spec
from mcpgym.servers.echo import Echo

pytestmark = pytest.mark.anyio

TASKS = [mcpgym.Task(id=f"t{i}", prompt=f"task {i}", seed=100 + i, options={"n": i}) for i in range(6)]


class Parity(mcpgym.Environment):
    """Say whether the task's number is even. Tasks t0..t5."""

    max_reward = 1.0

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> dict[str, Any]:
        self.n = int((options or {}).get("n", 0))
        return {"n": self.n, "seed": seed}

    @mcpgym.tool
    async def answer(self, even: bool) -> str:
        """Answer."""
        self.finish(reward=float(even == (self.n % 2 == 0)))
        return "ok"

    def catalog(self) -> list[mcpgym.Task]:
        return TASKS


async def says_even(messages: list[Any], tools: list[Any]) -> harness.AssistantTurn:
    """Always answers "even": solves t0, t2, t4 and fails the others."""
    if any(m["role"] == "assistant" for m in messages):
        return harness.AssistantTurn(content="done")
    call = harness.ToolCall(id="c", name="answer", arguments_json="{}", arguments={"even": True})
    return harness.AssistantTurn(tool_calls=[call])


def _seen(sampler: Sampler, task_id: str, successes: int, failures: int) -> None:
    for outcome in [True] * successes + [False] * failures:
        sampler.observe(task_id, outcome)


def test_learnability_draws_tasks_by_p_times_one_minus_p() -> None:
    sampler = Learnability(TASKS, SamplerConfig(sampler="learnability", explore=0.0, decay=1.0, seed=1))
    assert len({sampler.draw().id for _ in range(200)}) == 6  # nothing observed yet: every draw explores
    _seen(sampler, "t0", 8, 0)  # always solved: no gradient
    _seen(sampler, "t1", 0, 8)  # never solved: no gradient
    _seen(sampler, "t2", 4, 4)  # p = 0.5: the most to learn
    _seen(sampler, "t3", 1, 7)
    for task in ("t4", "t5"):
        _seen(sampler, task, 8, 0)
    drawn = Counter(sampler.draw().id for _ in range(4000))
    assert set(drawn) == {"t2", "t3"}  # explore=0: only tasks with a positive weight
    assert drawn["t2"] / drawn["t3"] == pytest.approx(0.25 / (1 / 8 * 7 / 8), rel=0.15)


def test_exploration_measures_unseen_tasks_first() -> None:
    sampler = Learnability(TASKS, SamplerConfig(sampler="learnability", explore=1.0, seed=2))
    for task in TASKS[:5]:
        _seen(sampler, task.id, 4, 4)
    assert {sampler.draw().id for _ in range(50)} == {"t5"}
    _seen(sampler, "t5", 0, 1)
    assert len({sampler.draw().id for _ in range(200)}) == 6  # all seen: exploring is uniform again


def test_decay_tracks_a_policy_that_improved() -> None:
    sampler = Learnability(TASKS, SamplerConfig(sampler="learnability", decay=0.8))
    _seen(sampler, "t0", 0, 50)
    _seen(sampler, "t0", 10, 0)  # the policy learned it
    rate = sampler.stats["t0"].success_rate
    assert rate is not None and rate > 0.85  # without decay it would read 10/60
    assert sampler.stats["t0"].episodes == 60 and sampler.stats["t0"].successes == 10


def test_uniform_is_uniform_and_seeded() -> None:
    one, two = (Sampler(TASKS, SamplerConfig(seed=3)) for _ in range(2))
    assert [one.draw().id for _ in range(50)] == [two.draw().id for _ in range(50)]
    counts = Counter(one.draw().id for _ in range(6000))
    assert all(900 < n < 1100 for n in counts.values())


async def test_a_rollout_group_shares_one_drawn_task_and_the_server_counts_outcomes(tmp_path: Path) -> None:
    server = mcpgym.GymServer(
        Parity, curriculum=SamplerConfig(sampler="learnability", explore=0.2, seed=0), record=tmp_path
    )
    played = await harness.rollout(server, says_even, episodes=24, concurrency=4, curriculum=4)
    assert all(t.status == "ok" for t in played)
    for group in range(6):
        members = [t for t in played if t.index // 4 == group]
        assert len({(t.task_id, t.seed, json.dumps(t.options)) for t in members}) == 1, members
        (task,) = [t for t in TASKS if t.id == members[0].task_id]
        assert members[0].seed == task.seed and members[0].options == task.options
        assert members[0].observation == {"n": task.options["n"], "seed": task.seed}  # the env played that task
    stats = {s["id"]: s for s in (await mcpgym.task_stats(server)).tasks}
    assert sum(s["episodes"] for s in stats.values()) == 24
    for task_id, s in stats.items():
        if s["episodes"]:
            assert s["successes"] == (s["episodes"] if int(task_id[1:]) % 2 == 0 else 0)
    assert sum(s["drawn"] for s in stats.values()) == 6  # one draw per group
    recordings = mcpgym.read_recordings(tmp_path)
    assert {r.task_id for r in recordings} == {t.task_id for t in played}  # recordings echo the task id
    assert all(r.seed == TASKS[int(str(r.task_id)[1:])].seed for r in recordings)


async def test_resets_to_a_tasks_own_seed_and_options_are_attributed_and_stamped() -> None:
    server = mcpgym.GymServer(Parity, curriculum=SamplerConfig(sampler="learnability"))
    async with mcpgym.connect(server) as env:
        first = await env.reset(seed=103, options={"n": 3})
        assert first.info[TASK_INFO_KEY] == {"id": "t3", "seed": 103, "options": {"n": 3}}
        await env.call_tool("answer", {"even": False})
        await env.reset(seed=7, options={"n": 3})  # not a catalog task: nothing attributed
        await env.reset(seed=104, options={"n": 4})  # a reset that never steps (a probe) counts nothing
        await env.reset(seed=0)
    stats = {s["id"]: s for s in (await mcpgym.task_stats(server)).tasks}
    assert (stats["t3"]["episodes"], stats["t3"]["successes"]) == (1, 1) and stats["t4"]["episodes"] == 0


async def test_the_step_stamp_echoes_seed_and_task_id() -> None:
    server = mcpgym.GymServer(Parity)
    async with Client(server.mcp, mode="legacy") as client:  # a plain agent picking the task's prompt
        await client.get_prompt("t3")
        result = await client.call_tool("answer", {"even": False})
    assert result.meta is not None
    stamp = result.meta[mcpgym.STEP_KEY]
    assert (stamp["seed"], stamp["task"], stamp["reward"]) == (103, "t3", 1.0)


async def test_plain_agents_cannot_read_the_statistics() -> None:
    server = mcpgym.GymServer(Parity, curriculum=SamplerConfig(sampler="learnability"))
    async with Client(server.mcp, mode="legacy") as client:  # an MCP client that does not speak mcpgym
        tools = [t.name for t in (await client.list_tools()).tools]
        resources = [str(r.uri) for r in (await client.list_resources()).resources]
        with pytest.raises(MCPError, match="operators"):
            await client.session.send_request(TaskStatsRequest(params=TaskStatsParams()), TaskStatsResult)
    assert tools == ["answer"] and not any("stats" in uri for uri in resources)
    assert (await mcpgym.task_stats(server)).sampler["sampler"] == "learnability"  # an operator may


@pytest.mark.parametrize(
    ("request_", "match"),
    [
        ("t1", "must be an object"),
        ({"size": 2}, "group must be a string"),
        ({"group": "g", "size": 0}, "size must be a whole number"),
        ({"group": "g", "size": 10**6}, "size must be a whole number"),
        ({"group": "x" * 300}, "group must be a string"),
    ],
)
async def test_bad_draw_requests_are_refused_and_the_server_goes_on(request_: object, match: str) -> None:
    server = mcpgym.GymServer(Parity)
    async with mcpgym.connect(server) as env:
        with pytest.raises(MCPError, match=match):
            await env.reset(options={CURRICULUM_KEY: request_})
        assert (await env.reset(options={CURRICULUM_KEY: {"group": "ok", "size": 1}})).info[TASK_INFO_KEY]


async def test_drawing_needs_a_catalog_and_a_server() -> None:
    async with mcpgym.connect(mcpgym.GymServer(Echo)) as env:
        with pytest.raises(MCPError, match="no task catalog"):
            await env.reset(options={CURRICULUM_KEY: {"group": "g"}})
    async with mcpgym.connect(Parity) as env:  # in-process: there is no server to hold a sampler
        with pytest.raises(MCPError, match="needs a server"):
            await env.reset(options={CURRICULUM_KEY: {"group": "g"}})
    with pytest.raises(ValueError, match="curriculum=G"):
        await harness.rollout(Parity, says_even, curriculum=4, seed=0)


def test_the_run_spec_chooses_the_sampler(tmp_path: Path) -> None:
    spec = tmp_path / "mcpgym.yaml"
    spec.write_text(
        "environment: mcpgym.servers.blackjack:Blackjack\ncurriculum: {sampler: learnability, decay: 0.8}\n"
    )
    loaded = load_spec(spec)
    assert (loaded.curriculum.sampler, loaded.curriculum.decay, loaded.curriculum.explore) == ("learnability", 0.8, 0.1)
    spec.write_text("environment: mcpgym.servers.blackjack:Blackjack\ncurriculum: {sampler: hardest}\n")
    with pytest.raises(SpecError, match=r"mcpgym.yaml:2: curriculum.sampler"):
        load_spec(spec)


@pytest.mark.trl  # needs the trl extra (the datasets package): run on 3.11 only
def test_a_trl_dataset_names_one_group_per_row() -> None:
    from mcpgym.trl import dataset

    rows = dataset("http://127.0.0.1:9/mcp", 3, prompt="play", curriculum=8)
    groups = [row["options"][CURRICULUM_KEY] for row in rows]
    assert [g["size"] for g in groups] == [8, 8, 8] and len({g["group"] for g in groups}) == 3
    again = dataset("http://127.0.0.1:9/mcp", 3, prompt="play", curriculum=8)
    assert not {g["group"] for g in groups} & {row["options"][CURRICULUM_KEY]["group"] for row in again}
    with pytest.raises(ValueError, match="curriculum=G"):
        dataset("http://127.0.0.1:9/mcp", 3, prompt="play", curriculum=8, options={"a": 1})


def test_random_is_not_the_global_one() -> None:
    state = random.getstate()
    Sampler(TASKS, SamplerConfig(seed=1)).draw()
    assert random.getstate() == state


async def test_mcpgym_serve_runs_the_sampler_its_flags_choose() -> None:
    argv = [sys.executable, "-m", "mcpgym", "serve", "blackjack", "--http", "--port", "0"]
    server = mcpgym.ServerProcess([*argv, "--curriculum", "learnability", "--curriculum-seed", "1"])
    await anyio.to_thread.run_sync(server.start)

    async def stand(messages: list[Any], tools: list[Any]) -> harness.AssistantTurn:
        if any(m["role"] == "assistant" for m in messages):
            return harness.AssistantTurn(content="done")
        return harness.AssistantTurn(
            tool_calls=[harness.ToolCall(id="c", name="stand", arguments_json="{}", arguments={})]
        )

    try:
        played = await harness.rollout(server.url, stand, episodes=6, concurrency=3, curriculum=3)
        stats = await mcpgym.task_stats(server.url)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(server.stop)
    assert [t.status for t in played] == ["ok"] * 6
    assert played[0].task_id == played[2].task_id and played[3].task_id == played[5].task_id
    assert played[0].task_id is not None and played[0].task_id.startswith("blackjack/")
    assert stats.sampler["sampler"] == "learnability" and sum(s["episodes"] for s in stats.tasks) == 6
