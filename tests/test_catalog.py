"""The task catalog: tasks as MCP prompts and resources, paged listings, nothing secret reachable."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

import mcpgym
from mcpgym import harness
from mcpgym._core.errors import INVALID_PARAMS
from mcpgym._episode.catalog import PAGE_SIZE, TASK_KEY
from mcpgym.servers.blackjack import Blackjack
from mcpgym.servers.blackjack._game import Game
from mcpgym.servers.coding import Coding, load_tasks
from mcpgym.servers.echo import Echo
from tests.conftest import DOORS, door, serve_gym

pytestmark = pytest.mark.anyio


async def _walk(client: Client) -> tuple[list[types.Prompt], list[Any], list[types.Resource], list[Any]]:
    """Every prompt and resource, every page, each one fetched: all an MCP client can reach."""
    prompts: list[types.Prompt] = []
    resources: list[types.Resource] = []
    cursor: str | None = None
    while True:
        page = await client.list_prompts(cursor=cursor)
        assert len(page.prompts) <= PAGE_SIZE
        prompts += page.prompts
        if (cursor := page.next_cursor) is None:
            break
    while True:
        listed = await client.list_resources(cursor=cursor)
        resources += listed.resources
        if (cursor := listed.next_cursor) is None:
            break
    got = [await client.get_prompt(p.name) for p in prompts]
    read = [await client.read_resource(r.uri) for r in resources]
    templates = await client.list_resource_templates()
    assert templates.resource_templates == []
    return prompts, got, resources, read


def _text(*parts: Any) -> str:
    return json.dumps([[p.model_dump(mode="json") for p in part] for part in parts], ensure_ascii=False)


def _json(text: str) -> str:
    """`text` as it appears inside a JSON string."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


async def test_coding_tasks_are_prompts_and_resources_and_no_test_or_solution_leaks() -> None:
    tasks = load_tasks()
    async with Client(mcpgym.GymServer(Coding).mcp) as client:
        prompts, got, resources, read = await _walk(client)
    assert [p.name for p in prompts] == list(tasks) == [r.name for r in resources]  # every task, in file order
    assert len(prompts) > PAGE_SIZE  # the premise: the listing really was paged
    seen = _text(prompts, got, resources, read)
    for task in tasks.values():
        assert _json(task.prompt) in seen  # reachable: the premise that the walk read the content
        assert _json(task.test.strip()) not in seen and _json(task.test.strip().splitlines()[-1].strip()) not in seen
        assert task.canonical_solution and _json(task.canonical_solution.strip()) not in seen
    first = got[3].messages[0]
    assert first.role == "user" and isinstance(first.content, types.TextContent)
    assert tasks["HumanEval/3"].prompt in first.content.text
    assert prompts[3].meta == {TASK_KEY: {"seed": None, "options": {"task_id": "HumanEval/3"}}}


async def test_blackjack_catalog_shows_the_deal_but_never_the_hole_card_or_the_deck() -> None:
    async with Client(mcpgym.GymServer(Blackjack).mcp) as client:
        prompts, got, resources, read = await _walk(client)
    assert len(prompts) == len(resources) == 1000
    for prompt, result, contents in zip(prompts, got, read, strict=True):
        seed = prompt.meta[TASK_KEY]["seed"] if prompt.meta else None
        assert prompt.name == f"blackjack/seed/{seed}"
        game = Game.deal(__import__("random").Random(seed))
        text = _text([result], [contents])
        assert game.player[0] in text and game.dealer[0] in text  # the visible table is there
        assert game.dealer[1] not in text and game.deck[-1] not in text  # the hole card and next card are not


async def test_picking_a_prompt_starts_that_task_for_an_agent_that_never_resets() -> None:
    game = Game.deal(__import__("random").Random(5))
    # A session, as Claude Desktop holds one (legacy handshake); on the stateless wire each request
    # is its own connection, so there is no episode for a prompt to start.
    async with Client(mcpgym.GymServer(Blackjack).mcp, mode="legacy") as agent:
        await agent.call_tool("hit", {})  # an implicit episode is already running on some other deal
        await agent.get_prompt("blackjack/seed/5")
        result = await agent.call_tool("stand", {})
    table = result.structured_content
    assert table is not None and table["your_cards"] == game.player and table["dealer_cards"][:2] == game.dealer


async def test_listings_are_deterministic_and_bad_names_are_clear_errors() -> None:
    async with serve_gym(Blackjack) as (_, url), mcpgym.connect(url) as env:
        assert isinstance(env, mcpgym.AsyncEnv)
        client = env.session
        first = await client.list_prompts()
        again = await client.list_prompts()
        assert first == again and first.next_cursor is not None
        second = await client.list_prompts(params=types.PaginatedRequestParams(cursor=first.next_cursor))
        assert second.prompts[0].name == f"blackjack/seed/{PAGE_SIZE}"
        with pytest.raises(MCPError) as bad_cursor:
            await client.list_prompts(params=types.PaginatedRequestParams(cursor="not-a-cursor"))
        assert bad_cursor.value.code == -32602 and "cursor" in bad_cursor.value.message
        with pytest.raises(MCPError) as unknown:
            await client.get_prompt("blackjack/seed/100000")
        assert unknown.value.code == -32602 and "blackjack/seed/0" in unknown.value.message
        with pytest.raises(MCPError) as missing:
            await client.read_resource("mcpgym://tasks/nope")
        assert missing.value.code == -32002


async def test_a_server_without_tasks_lists_none() -> None:
    async with Client(mcpgym.GymServer(Echo).mcp) as client:
        assert (await client.list_prompts()).prompts == []
        assert (await client.list_resources()).resources == []
    assert await mcpgym.list_tasks(Echo) == []


async def test_list_tasks_is_the_same_in_process_and_over_mcp() -> None:
    local = await mcpgym.list_tasks(Blackjack, limit=PAGE_SIZE + 1)  # across a page boundary
    async with serve_gym(Blackjack) as (_, url):
        remote = await mcpgym.list_tasks(url, limit=PAGE_SIZE + 1)
    assert len(local) == PAGE_SIZE + 1 and [t.id for t in local] == [t.id for t in remote]
    assert [(t.prompt, t.seed, t.options) for t in local] == [(t.prompt, t.seed, t.options) for t in remote]
    async with serve_gym(Blackjack) as (_, url):
        bare = await mcpgym.list_tasks(url, limit=3, prompts=False)
    assert [(t.id, t.seed, t.prompt) for t in bare] == [(t.id, t.seed, "") for t in local[:3]]
    async with mcpgym.connect(Blackjack) as env:
        first = await env.reset(**local[42].reset_arguments())  # type: ignore[arg-type]
    assert first.observation["prompt"] == local[42].prompt


async def test_harness_rollout_plays_the_catalog_tasks_in_order() -> None:
    from mcpgym.harness.policy import tool_call
    from mcpgym.harness.types import AssistantTurn, ChatTool, Message

    async def stand(messages: list[Message], tools: list[ChatTool]) -> AssistantTurn:
        return AssistantTurn(tool_calls=[tool_call(f"c{len(messages)}", "stand", {})])

    tasks = await mcpgym.list_tasks(Blackjack, limit=3)
    trajectories = await harness.rollout(Blackjack, stand, episodes=5, concurrency=2, tasks=tasks)
    assert [t.seed for t in trajectories] == [0, 1, 2, 0, 1]
    assert [t.observation["prompt"] for t in trajectories[:3]] == [t.prompt for t in tasks]
    assert trajectories[0].reward == trajectories[3].reward and all(t.done for t in trajectories)
    with pytest.raises(ValueError, match="empty"):
        await harness.rollout(Blackjack, stand, tasks=[])


@pytest.mark.trl  # needs the trl extra (datasets / transformers): run on 3.11 only
def test_trl_dataset_draws_rows_from_the_catalog() -> None:
    import mcpgym.trl

    tasks = anyio.run(lambda: mcpgym.list_tasks("mcpgym.servers.coding:Coding", limit=4))
    rows = mcpgym.trl.dataset(Coding, tasks=tasks)
    assert len(rows) == 4 and rows[2]["seed"] is None
    assert [json.loads(r) if isinstance(r, str) else r for r in rows["options"]][2] == {"task_id": "HumanEval/2"}
    with pytest.raises(ValueError, match="not both"):
        mcpgym.trl.dataset(Coding, 4, tasks=tasks)
    whole = mcpgym.trl.dataset(mcpgym.trl.environment_class(Blackjack), tasks=True)  # the whole catalog
    assert len(whole) == 1000 and whole[7]["seed"] == 7


async def test_listing_a_shared_instance_leaves_its_episode_alone() -> None:
    shared = Blackjack()
    async with mcpgym.connect(shared) as env:
        first = await env.reset(seed=3)
        assert len(await mcpgym.list_tasks(shared, limit=5)) == 5
        result = await env.step(mcpgym.CallToolAction(tool_name="stand"))
    table = result.observation.structured_content
    assert table is not None and table["your_cards"] == first.observation["your_cards"]


async def test_the_rollout_cli_plays_the_catalog(tmp_path: Path) -> None:
    from mcpgym.harness import _scripted
    from tests.conftest import serve_app

    out = tmp_path / "x.jsonl"
    async with serve_app(_scripted.ScriptedEndpoint().app()) as base:
        argv = ["rollout", "mcpgym.servers.coding", "--model", "solve", "--base-url", f"{base}/v1", "--tasks"]
        argv += ["--episodes", "3", "--concurrency", "1", "--out", str(out), "--no-progress"]
        done = await anyio.run_process([sys.executable, "-m", "mcpgym", *argv], check=False)
        refused = await anyio.run_process([sys.executable, "-m", "mcpgym", *argv, "--seed", "1"], check=False)
        echo = [
            sys.executable,
            "-m",
            "mcpgym",
            "rollout",
            "mcpgym.servers.echo",
            "--model",
            "solve",
            "--base-url",
            base,
        ]
        nothing = await anyio.run_process([*echo, "--tasks"], check=False)
    assert done.returncode == 0, done.stderr.decode()
    played = harness.read_rollout(out)
    assert [t.options for t in played] == [{"task_id": f"HumanEval/{i}"} for i in range(3)]
    assert [t.reward for t in played] == [1.0, 1.0, 1.0]
    assert refused.returncode == 1 and "drop --seed" in refused.stderr.decode()
    assert nothing.returncode == 1 and "lists no tasks" in nothing.stderr.decode()


async def test_picking_a_prompt_over_stdio_starts_that_task() -> None:
    """As Claude Desktop does it: launch the server, pick a prompt, play with tools, never reset."""
    from tests.conftest import stdio_command

    game = Game.deal(__import__("random").Random(11))
    async with Client(stdio_command("-m", "mcpgym.servers.blackjack")) as agent:
        await agent.get_prompt("blackjack/seed/11")
        result = await agent.call_tool("stand", {})
    table = result.structured_content
    assert table is not None and table["your_cards"] == game.player and table["dealer_cards"][:2] == game.dealer


class Levels(mcpgym.Environment):
    """Three tasks named by `options["task_id"]`, as wrapped servers and reasoning-gym name theirs."""

    LEVELS = ("level/1", "level/2", "level/3")

    def catalog(self) -> list[mcpgym.Task]:
        return [mcpgym.Task(id=name, prompt=f"Play {name}.", options={"task_id": name}) for name in self.LEVELS]

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> str:
        wanted = (options or {}).get("task_id", "level/1")
        if wanted == "level/3":
            raise RuntimeError("level 3 is broken")  # a real bug: kept loud
        if wanted not in self.LEVELS:
            raise ValueError(f"no level {wanted!r}")
        return f"playing {wanted}"

    @mcpgym.tool
    async def win(self) -> str:
        """Win."""
        return "won"


@pytest.mark.parametrize("kind", DOORS)
async def test_an_unknown_task_id_is_said_once_with_some_valid_ids(kind: str, caplog: pytest.LogCaptureFixture) -> None:
    async with door(kind, Levels) as target, mcpgym.connect(target) as env:
        assert (await env.reset(options={"task_id": "level/2"})).observation == "playing level/2"
        with pytest.raises(MCPError) as refused:
            await env.reset(options={"task_id": "level/9"})
        assert refused.value.error.code == INVALID_PARAMS
        assert refused.value.error.message == (
            "Unknown task_id 'level/9'. This environment's tasks include: level/1, level/2, level/3 (3 in all; "
            "mcpgym.list_tasks lists them). Levels.reset said: ValueError: no level 'level/9'"
        )
        assert not [r for r in caplog.records if r.exc_info]  # no server traceback for the caller's mistake
        with pytest.raises(MCPError, match=r"Levels\.reset raised RuntimeError: level 3 is broken") as broken:
            await env.reset(options={"task_id": "level/3"})  # a listed task whose reset fails is a bug
        assert broken.value.error.code != INVALID_PARAMS


async def test_a_wrapped_server_says_the_same_of_an_unknown_task_id(caplog: pytest.LogCaptureFixture) -> None:
    from tests.wrap_envs import WrappedCounter

    async with mcpgym.connect(mcpgym.GymServer(WrappedCounter)) as env:
        with pytest.raises(MCPError, match=r"^Unknown task_id 'nope'\. This environment's tasks include: reach-3 \("):
            await env.reset(options={"task_id": "nope"})
    assert not [r for r in caplog.records if r.exc_info]
