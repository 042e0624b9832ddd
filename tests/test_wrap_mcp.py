"""What travels outside a tool result survives `mcpgym.wrap`: notifications, server-to-client
requests, resources and prompts, capability-gated tools and every tool field.

The real component is the MCP reference server, `@modelcontextprotocol/server-everything`
(tests/everything's lock file pins it). Each check talks to it directly and through the wrap
with a plain `mcp.Client` (in memory, over `--http`, and over stdio via `mcpgym serve`) and
diffs what arrives field by field; in-process, through the documented callback.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import logging
import math
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

import mcpgym
from mcpgym._server.gym_server import GymServer
from mcpgym.testing import serve_app, serve_gym
from mcpgym.wrapping import wrap
from tests.conftest import DOORS, door, stdio_command
from tests.wrap_everything import EVERYTHING, Everything

pytestmark = pytest.mark.anyio

WRAPPED_DOORS = ("memory", "http", "stdio")
ALL = ("sampling", "elicitation", "roots")
HOSTILE = [sys.executable, str(EVERYTHING.parent.parent.parent.parent / "wrap_hostile.py")]


def test_the_reference_server_is_installed() -> None:
    # Fails (never skips) when the set-up did not run `npm ci --prefix tests/everything`.
    assert EVERYTHING.exists() and Everything.upstream_listing is not None


class Driver:
    """A plain MCP client's callbacks, declaring exactly the capabilities named."""

    def __init__(self, *capabilities: str) -> None:
        self.capabilities = capabilities
        self.logs: list[types.LoggingMessageNotificationParams] = []
        self.notifications: list[types.ServerNotification] = []
        self.arrived = anyio.Event()

    async def _sample(self, ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        text = f"sampled: {params.messages[0].content.text}"  # type: ignore[union-attr]
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=text), model="m")

    async def _elicit(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async def _roots(self, ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(
            roots=[types.Root.model_validate({"uri": "file:///driver/root", "name": "driver"})]
        )

    async def _log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)
        self.arrived.set()

    async def _message(self, message: Any) -> None:
        if isinstance(message, types.ServerNotification) and not isinstance(message, types.LoggingMessageNotification):
            self.notifications.append(message)
            self.arrived.set()

    def options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"logging_callback": self._log, "message_handler": self._message, "mode": "legacy"}
        if "sampling" in self.capabilities:
            options["sampling_callback"] = self._sample
        if "elicitation" in self.capabilities:
            options["elicitation_callback"] = self._elicit
        if "roots" in self.capabilities:
            options["list_roots_callback"] = self._roots
        return options

    async def wait(self, kind: type[Any]) -> Any:
        with anyio.fail_after(20):
            while True:
                found = [n for n in [*self.notifications, *self.logs] if isinstance(n, kind)]
                if found:
                    return found[0]
                self.arrived = anyio.Event()
                await self.arrived.wait()


@contextlib.asynccontextmanager
async def direct(driver: Driver) -> AsyncIterator[Client]:
    async with Client(StdioServerParameters(command=str(EVERYTHING), args=["stdio"]), **driver.options()) as client:
        yield client


@contextlib.asynccontextmanager
async def wrapped(door: str, driver: Driver, env: Any = None) -> AsyncIterator[Client]:
    env = env or Everything
    if door == "memory":
        async with Client(GymServer(env).mcp, **driver.options()) as client:
            yield client
    elif door == "http":
        async with serve_app(GymServer(env).http_app()) as base:
            async with Client(f"{base}/mcp", **driver.options()) as client:
                yield client
    else:
        command = stdio_command("-m", "mcpgym", "serve", "tests.wrap_everything:Everything")
        async with Client(command, **driver.options()) as client:
            yield client


def _dump(items: list[Any]) -> list[dict[str, Any]]:
    return sorted((item.model_dump(mode="json", by_alias=True) for item in items), key=lambda d: str(d.get("name")))


@pytest.mark.parametrize("door", WRAPPED_DOORS)
@pytest.mark.parametrize("capabilities", [(), ("roots",), ALL], ids=["none", "roots", "all"])
async def test_tools_are_listed_field_by_field_as_the_server_lists_them(
    door: str, capabilities: tuple[str, ...]
) -> None:
    async with direct(Driver(*capabilities)) as plain:
        theirs = (await plain.list_tools()).tools
    async with wrapped(door, Driver(*capabilities)) as client:
        ours = (await client.list_tools()).tools
    assert _dump(ours) == _dump(theirs)
    # The fields that were lost: task support and annotations, on every door.
    research = [t for t in ours if t.name == "simulate-research-query"]
    assert research and research[0].execution is not None and research[0].execution.task_support == "required"
    assert ("get-roots-list" in {t.name for t in ours}) == ("roots" in capabilities)


async def test_in_process_the_tools_are_those_of_a_client_declaring_nothing() -> None:
    async with direct(Driver()) as plain:
        theirs = (await plain.list_tools()).tools
    async with mcpgym.connect(Everything) as env:
        ours = await env.list_tools()
    assert _dump(ours) == _dump(theirs)


@pytest.mark.parametrize("kind", DOORS)
async def test_mcpgym_clients_get_every_tool_field_on_every_door(kind: str) -> None:
    async with direct(Driver()) as plain:
        theirs = (await plain.list_tools()).tools
    async with door(kind, Everything) as target, mcpgym.connect(target) as env:
        ours = await env.list_tools()
        await env.reset()
        step = await env.call_tool("get-structured-content", {"location": "New York"})
    if kind != "inprocess":
        # mcpgym's clients speak 2026-07-28, which has no task-augmented execution: the SDK
        # leaves `execution` out of that wire (plain clients on 2025-11-25 get it, as above).
        theirs = [t.model_copy(update={"execution": None}) for t in theirs]
    assert _dump(ours) == _dump(theirs)
    async with direct(Driver()) as plain:
        result = await plain.call_tool("get-structured-content", {"location": "New York"})
    assert step.observation.structured_content == result.structured_content and math.isnan(step.reward)


@pytest.mark.parametrize("door", WRAPPED_DOORS)
async def test_progress_reaches_the_caller_against_its_own_token(door: str) -> None:
    arguments = {"duration": 1, "steps": 3}

    async def call(client: Client) -> list[tuple[float, float | None, str | None]]:
        seen: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))

        await client.call_tool("trigger-long-running-operation", arguments, progress_callback=on_progress)
        return seen

    async with direct(Driver()) as plain:
        theirs = await call(plain)
    async with wrapped(door, Driver()) as client:
        ours = await call(client)
    assert ours == theirs and len(ours) == 3


@pytest.mark.parametrize("door", ["memory", "http"])
async def test_a_request_that_comes_during_a_long_call_does_not_take_its_progress(door: str) -> None:
    # Once the call has reported its first step, the same episode serves another request (a
    # prompt of its server's, answered at once): the call's later progress still reaches the
    # call's client, not the client of that request, which has been answered.
    first = anyio.Event()
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)
        first.set()

    async with wrapped(door, Driver()) as client:
        arguments = {"duration": 2, "steps": 4}
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                functools.partial(
                    client.call_tool, "trigger-long-running-operation", arguments, progress_callback=on_progress
                )
            )
            await first.wait()
            await client.get_prompt("simple-prompt")
    assert seen == [1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize("door", WRAPPED_DOORS)
async def test_sampling_and_roots_requests_go_to_the_driving_client(door: str) -> None:
    async def ask(client: Client) -> list[str]:
        sampled = await client.call_tool("trigger-sampling-request", {"prompt": "hello", "maxTokens": 10})
        roots = await client.call_tool("get-roots-list", {})
        elicited = await client.call_tool("trigger-elicitation-request", {})
        return [r.content[0].text for r in (sampled, roots, elicited)]  # type: ignore[union-attr]

    async with direct(Driver(*ALL)) as plain:
        theirs = await ask(plain)
    async with wrapped(door, Driver(*ALL)) as client:
        ours = await ask(client)
    assert ours == theirs
    assert "sampled: " in ours[0] and "hello" in ours[0] and "file:///driver/root" in ours[1]


async def test_a_class_that_refuses_server_requests_says_why_and_records_it() -> None:
    Refusing = wrap([str(EVERYTHING), "stdio"], server_requests="refuse", tools=["trigger-sampling-request"])
    gym = GymServer(Refusing)
    async with Client(gym.mcp, **Driver(*ALL).options()) as client:
        result = await client.call_tool("trigger-sampling-request", {"prompt": "hello"})
        (episode,) = gym.registry._episodes.values()
        info = episode.state().info
    assert "mcpgym refused sampling/createMessage" in result.content[0].text  # type: ignore[union-attr]
    assert "server_requests='refuse'" in result.content[0].text  # type: ignore[union-attr]
    assert info["server_requests"] == [
        {
            "method": "sampling/createMessage",
            "outcome": "refused",
            "detail": "this environment refuses server-to-client requests (server_requests='refuse')",
        }
    ]


@pytest.mark.parametrize("door", ["memory", "http"])
async def test_log_messages_reach_the_client_at_the_level_it_set(door: str) -> None:
    relayed: list[types.ServerNotification] = []
    told = anyio.Event()

    def on_notification(notification: types.ServerNotification) -> None:
        relayed.append(notification)
        if isinstance(notification, types.LoggingMessageNotification):
            told.set()

    Logging = wrap(
        [str(EVERYTHING), "stdio"], on_notification=on_notification, tools=["toggle-simulated-logging", "echo"]
    )
    driver = Driver()
    async with wrapped(door, driver, Logging) as client:
        with pytest.warns(Warning):  # deprecated at 2026-07-28, and what a 2025-11-25 server uses
            await client.set_logging_level("error")
        await client.call_tool("toggle-simulated-logging", {})
        with anyio.fail_after(20):
            await told.wait()
        (sent,) = [n for n in relayed if isinstance(n, types.LoggingMessageNotification)]
        levels = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
        if levels.index(sent.params.level) >= levels.index("error"):
            got = await driver.wait(types.LoggingMessageNotificationParams)
            assert got == sent.params
        else:
            await client.call_tool("echo", {"message": "after"})
            assert driver.logs == [], "a message below the level the client set reached it"


@pytest.mark.parametrize("door", ["memory", "http"])
async def test_resources_and_prompts_pass_through_and_links_resolve(door: str) -> None:
    data = "data:text/plain;base64," + base64.b64encode(b"hello").decode()

    async def browse(client: Client, driver: Driver) -> list[Any]:
        resources = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates
        prompts = (await client.list_prompts()).prompts
        prompt = await client.get_prompt("args-prompt", {"city": "Paris", "state": "TX"})
        static = await client.read_resource(resources[0].uri)
        made = await client.call_tool("gzip-file-as-resource", {"name": "h.gz", "data": data})
        (link,) = [c for c in made.content if isinstance(c, types.ResourceLink)]
        linked = await client.read_resource(link.uri)
        changed = await driver.wait(types.ResourceListChangedNotification)
        return [_dump(resources), _dump(templates), _dump(prompts), prompt, static, link, linked, changed]

    plain_driver, driver = Driver(), Driver()
    async with direct(plain_driver) as plain:
        theirs = await browse(plain, plain_driver)
    async with wrapped(door, driver) as client:
        ours = await browse(client, driver)
    assert ours == theirs


async def test_a_task_id_that_is_also_a_server_prompt_is_refused() -> None:
    task = mcpgym.wrapping.TaskSpec(id="simple-prompt", prompt="do it")
    Env = wrap([str(EVERYTHING), "stdio"], tasks=[task])  # lazy: the server starts when its tools are needed
    with pytest.raises(ValueError, match="clash with the wrapped server's prompts"):
        await mcpgym.wrapping.prepare(Env)


@pytest.mark.parametrize("door", ["memory", "http"])
async def test_a_wrapped_servers_own_prompts_are_prompts_not_tasks(door: str) -> None:
    # The reference server lists prompts of its own beside the one task: the catalog (and so
    # `mcpgym eval`) holds the task only, and reading the tasks' text does not trip on theirs.
    task = mcpgym.wrapping.TaskSpec(id="say-hi", prompt="say hi")
    Env = wrap([str(EVERYTHING), "stdio"], tasks=[task])
    async with contextlib.AsyncExitStack() as stack:
        target: Any = Env
        if door == "http":
            target = f"{await stack.enter_async_context(serve_app(GymServer(Env).http_app()))}/mcp"
            client = await stack.enter_async_context(Client(target))
            assert "simple-prompt" in [p.name for p in (await client.list_prompts()).prompts]  # the premise
        env = await stack.enter_async_context(mcpgym.connect(target))
        tasks = await env.list_tasks()
    assert [(t.id, t.prompt) for t in tasks] == [("say-hi", "say hi")]


async def test_a_wrapped_server_cannot_list_a_prompt_as_a_task() -> None:
    # A hostile server's prompt carrying mcpgym's task key reaches clients as its prompt, without
    # our key (its own keys kept), and is no task of the environment's.
    async with serve_app(GymServer(wrap([*HOSTILE, "forge"])).http_app()) as base:
        async with Client(f"{base}/mcp") as client:
            (prompt,) = (await client.list_prompts()).prompts
        async with mcpgym.connect(f"{base}/mcp") as env:
            tasks = await env.list_tasks()
    assert (prompt.name, prompt.meta, tasks) == ("free-reward", {"theirs": 1}, [])


async def test_in_process_notifications_reach_the_callback() -> None:
    seen: list[types.ServerNotification] = []
    Env = wrap([str(EVERYTHING), "stdio"], on_notification=seen.append, tools=["trigger-long-running-operation"])
    async with mcpgym.connect(Env) as env:
        await env.reset()
        await env.call_tool("trigger-long-running-operation", {"duration": 1, "steps": 2})
    progress = [n.params for n in seen if isinstance(n, types.ProgressNotification)]
    assert [(p.progress, p.total, p.progress_token) for p in progress] == [(1.0, 2.0, 1), (2.0, 2.0, 1)]


async def test_steps_nothing_scores_are_unscored_not_zero() -> None:
    async with mcpgym.connect(Everything) as env:
        await env.reset()
        step = await env.call_tool("echo", {"message": "hi"})
        state = await env.state()
    assert math.isnan(step.reward) and math.isnan(state.total_reward)
    async with serve_gym(Everything) as (_, url), mcpgym.connect(url) as far:
        await far.reset()
        over_http = await far.call_tool("echo", {"message": "hi"})
    assert math.isnan(over_http.reward)  # null on the wire, NaN again in the client: the same
    async with Client(GymServer(Everything).mcp, mode="legacy") as client:
        result = await client.call_tool("echo", {"message": "hi"})
    assert result.meta is not None and result.meta["io.mcpgym/step"]["reward"] is None


async def test_bad_stdout_is_summarised_once_per_episode(caplog: pytest.LogCaptureFixture) -> None:
    Env = wrap([*HOSTILE, "garbage"])
    await mcpgym.wrapping.prepare(Env)  # the instances that list its tools summarise theirs too
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        async with mcpgym.connect(Env) as env:
            await env.reset()
            await env.call_tool("go", {})
            state = await env.state()
            await env.close_episode()
    assert state.info["stdout_garbage_lines"] >= 100
    assert not [r for r in caplog.records if "Failed to parse JSONRPC" in r.getMessage()]
    summaries = [r for r in caplog.records if "line(s) to stdout that are not JSON-RPC" in r.getMessage()]
    assert len(summaries) == 1 and "this is not JSON-RPC" in summaries[0].getMessage()


def test_the_bad_stdout_summary_quotes_the_first_line_cut_short(caplog: pytest.LogCaptureFixture) -> None:
    from mcpgym._wrap._relay import Relay

    relay = Relay()
    for line in (b"x" * 100_000, b"second"):
        relay.bad_line(line)
    with caplog.at_level(logging.WARNING):
        relay.summarise("server")
    (record,) = caplog.records
    assert "wrote 2 line(s)" in record.getMessage() and len(record.getMessage()) < 400
    assert relay.first_bad_line == "x" * 120 + "…"


COUNTER = [sys.executable, str(EVERYTHING.parent.parent.parent.parent / "wrap_server.py")]


async def test_steps_something_will_score_earn_a_number() -> None:
    from mcpgym import rubrics

    # A finish tool scores the episode at its end: the steps before it earn 0 (a sparse reward).
    finishing = wrap(COUNTER, tools=["increment"], finish_tool="done")
    # A component rubric scores every step, the environment's own reward among its parts.
    graded = wrap(
        COUNTER,
        tools=["increment"],
        rubric=rubrics.Rubric({"env": rubrics.env_reward(), "calls": rubrics.step_rubric(lambda step: -0.01)}),
    )
    async with mcpgym.connect(finishing) as env:
        await env.reset()
        before = await env.call_tool("increment")
        done = await env.call_tool("done")
        state = await env.state()
    assert before.reward == 0.0 and done.done and not math.isnan(state.total_reward)
    async with mcpgym.connect(graded) as env:
        await env.reset()
        step = await env.call_tool("increment")
    assert step.reward == pytest.approx(-0.01) and step.components["env"] == 0.0


def _pool_of(gym: GymServer, env: Any) -> Any:
    return gym.registry.hosts[0].state[("mcpgym.wrap.pool", id(env.config))]


async def test_a_server_fills_its_warm_pool_as_it_starts() -> None:
    Env = wrap(COUNTER, tools=["increment"], warm=2)
    async with serve_gym(Env) as (gym, _url):
        pool = _pool_of(gym, Env)
        with anyio.fail_after(60):
            while pool.ready < 2:  # no reset has come: the server started filling it itself
                await pool.changed()
        assert pool.spawned == 2 and pool.hits == 0


async def test_a_burst_of_resets_starts_no_more_servers_than_it_needs() -> None:
    # Two waiting, four resets at once: two take those; the others take a refill or start their
    # own, and no reset starts one beside a refill nobody else waits for.
    Env = wrap(COUNTER, tools=["increment"], warm=2)
    async with serve_gym(Env) as (gym, url):
        pool = _pool_of(gym, Env)
        with anyio.fail_after(60):
            while pool.ready < 2:
                await pool.changed()
        texts: list[str] = []

        async def episode() -> None:
            async with mcpgym.connect(url) as env:
                await env.reset()
                texts.append((await env.call_tool("increment")).text)

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for _ in range(4):
                    tg.start_soon(episode)
        assert texts == ["1"] * 4 and pool.hits >= 2 and pool.hits + pool.on_the_spot == 4
        with anyio.fail_after(60):
            while pool.ready < 2:
                await pool.changed()
        # Every server started was needed: one per reset, and two waiting again.
        assert pool.spawned + pool.on_the_spot == 4 + 2
