"""The web page in a real browser: Debian's Chromium, driven by Playwright for Python.

One browser for the module; each test serves its own app on a free loopback port (in a
thread, since Playwright's sync API runs outside any event loop) and saves a screenshot of
what it checked under test-artifacts/web/. A missing Chromium fails the suite, never skips it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from playwright.sync_api import Browser, Page, expect, sync_playwright
from starlette.types import ASGIApp

import mcpgym
from mcpgym import ServerProcess
from mcpgym._core.protocol import new_episode_id
from mcpgym.servers.echo import Echo
from tests.conftest import serve_app
from tests.web_envs import Forms

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts" / "web"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One browser for every browser test (they all live in this module). Module-scoped, not
    session-scoped: Playwright's sync API holds an event loop in the main thread while it runs,
    which the anyio tests of later modules could not start beside."""
    assert os.path.exists(CHROMIUM), (
        f"{CHROMIUM} is missing: the web tests need Debian's chromium (bash scripts/setup.sh --test installs it)"
    )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()  # before the server stops: no live stream is left open
    assert not errors, f"the page threw: {errors}"


@contextlib.contextmanager
def served(app: ASGIApp) -> Iterator[str]:
    """`app` on 127.0.0.1:<free port> in a worker thread's event loop; yields the base URL."""
    with start_blocking_portal("asyncio") as portal, portal.wrap_async_context_manager(serve_app(app)) as base:
        yield base


def shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def tool(page: Page, name: str) -> Any:
    return page.locator(f"form.tool[data-tool='{name}']")


def test_echo_episode_to_reward_one(page: Page) -> None:
    gym = mcpgym.GymServer(Echo)
    with served(gym.http_app(web=True)) as base:
        # A link to an episode the server no longer has says so (and stops following it).
        page.goto(f"{base}/web#episode={new_episode_id()}")
        expect(page.locator("#banner")).to_contain_text("This episode is gone")
        expect(page.locator("#env-name")).to_have_text("Echo")
        page.fill("#seed", "3")
        page.click("#reset")
        expect(page.locator("#observation")).to_contain_text("Say the word")
        expect(page.locator("#banner")).to_be_hidden()
        target = page.locator("#observation tr[data-key=target] td").inner_text()
        echo = tool(page, "echo_message")
        echo.locator("input[name=message]").fill("not it")
        echo.locator("button.call").click()
        expect(page.locator("#history > li")).to_have_count(1)
        expect(page.locator("#total-reward")).to_have_text("0")
        # Client-side validation stops a bad call; the server would have refused it too.
        repeat = tool(page, "repeat")
        repeat.locator("input[name=message]").fill("x")
        repeat.locator("input[name=times]").fill("99")
        repeat.locator("button.call").click()
        expect(repeat.locator(".form-error")).to_contain_text("times: must be ≤ 10")
        expect(page.locator("#history > li")).to_have_count(1)
        echo.locator("input[name=message]").fill(target)
        echo.locator("button.call").click()
        expect(page.locator("#history > li")).to_have_count(2)
        expect(page.locator("#total-reward")).to_have_text("1")
        expect(page.locator("#episode-flags")).to_contain_text("done")
        expect(page.locator("#result pre.text")).to_have_text(target)
        expect(page.locator("#live")).to_have_text("live")
        page.locator("#history details.step").first.locator("> summary").click()  # expand the first step
        expect(page.locator("#history details.step").first.locator(".result pre.text")).to_have_text("not it")
        shot(page, "echo")
        expect(tool(page, "repeat").locator("button.call")).to_be_disabled()  # the episode is over
        # The page's episode is an explicit one in the server's own registry, owned by the page.
        episode_id = page.locator("#episode-id").inner_text()
        episode = gym.registry.get(episode_id, "mcpgym-web")
        assert (episode.step_count, episode.total_reward, episode.done) == (2, 1.0, True)


def test_coding_episode_run_code_then_submit(page: Page, tmp_path: Path) -> None:
    from tests.coding.helpers import coding

    task = {
        "task_id": "web/add",
        "prompt": 'def add(a, b):\n    """Return a + b."""\n',
        "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(2, 5) == 7\n",
        "entry_point": "add",
    }
    (tmp_path / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    from mcpgym.servers.coding import load_tasks

    with served(mcpgym.GymServer(coding(tasks=load_tasks(tmp_path / "tasks.jsonl"))).http_app(web=True)) as base:
        page.goto(f"{base}/web")
        page.fill("#options", '{"task_id": "web/add"}')
        page.click("#reset")
        expect(page.locator("#observation")).to_contain_text("Return a + b.")
        run = tool(page, "run_python")
        run.locator("textarea[name=code]").fill("print(sum(range(10)))\nprint('<b>not bold</b>')")
        run.locator("textarea[name=code]").press("Control+Enter")
        expect(page.locator("#result pre.text")).to_contain_text("45")
        expect(page.locator("#result pre.text")).to_contain_text("<b>not bold</b>")
        submit = tool(page, "submit")
        submit.locator("textarea[name=code]").fill("def add(a, b):\n    return a + b\n")
        submit.locator("button.call").click()
        expect(page.locator("#total-reward")).to_have_text("1")
        expect(page.locator("#episode-flags")).to_contain_text("done")
        expect(page.locator("#history > li")).to_have_count(2)
        shot(page, "coding")


def test_every_schema_feature_and_live_second_tab(page: Page, browser: Browser) -> None:
    gym = mcpgym.GymServer(Forms)
    with served(gym.http_app(web=True)) as base:
        page.goto(f"{base}/web")
        page.fill("#options", '{"level": 2}')
        page.click("#reset")
        expect(page.locator("#observation")).to_contain_text("forms")
        form = tool(page, "configure")
        # What the schema says is on the form: bounds, defaults, enums as selects, a code box.
        assert form.locator("input[name=count]").get_attribute("max") == "5"
        assert form.locator("input[name=count]").input_value() == "2"
        assert form.locator("select[name=mode] option").all_inner_texts() == ["fast", "slow"]
        assert form.locator("textarea[name=code]").count() == 1
        assert form.locator("input[name=verbose][type=checkbox]").count() == 1
        assert form.locator("fieldset input[name='point.x']").count() == 1
        # A second tab watching the same episode gets every step pushed to it.
        watcher = browser.new_page()
        watcher.goto(page.url)
        expect(watcher.locator("#live")).to_have_text("live")
        # Client-side validation: required fields, bounds, lengths.
        form.locator("input[name=name]").fill("a")
        form.locator("input[name=ratio]").fill("1")
        form.locator("button.call").click()
        errors = form.locator(".form-error")
        expect(errors).to_contain_text("name: at least 2 characters")
        expect(errors).to_contain_text("ratio: must be < 1")
        expect(errors).to_contain_text("code: required")
        expect(errors).to_contain_text("point.x: required")
        form.locator("input[name=name]").fill("ada")
        form.locator("input[name=ratio]").fill("0.25")
        form.locator("textarea[name=code]").fill("def f():\n    return 1")
        form.locator("input[name='point.x']").fill("4")
        form.locator("input[name='point.label']").fill("p")
        form.locator("input[name=count]").fill("3")
        form.locator("input[name=verbose]").check()
        form.locator("select[name=mode]").select_option(label="slow")
        tags = form.locator(".field[data-path=tags]")
        for tag in ("a", "b"):
            tags.locator("button.add").click()
            tags.locator(".array-items input").last.fill(tag)
        path = form.locator(".field[data-path=path]")  # an optional array of objects
        path.locator("button.add").click()
        path.locator("input[name='path[0].x']").fill("7")
        path.locator("input[name='path[0].label']").fill("first")
        form.locator("button.call").click()
        expect(page.locator("#total-reward")).to_have_text("1")
        structured = json.loads(page.locator("#result pre.structured").text_content() or "")
        assert structured == {
            "name": "ada",
            "code": "def f():\n    return 1",
            "point": {"x": 4, "y": 0, "label": "p"},
            "count": 3,
            "ratio": 0.25,
            "verbose": True,
            "mode": "slow",
            "tags": ["a", "b"],
            "path": [{"x": 7, "y": 0, "label": "first"}],
            "note": None,
        }
        expect(watcher.locator("#history > li")).to_have_count(1)
        expect(watcher.locator("#total-reward")).to_have_text("1")
        shot(page, "forms")
        watcher.close()


def test_server_side_validation_images_and_escaping(page: Page) -> None:
    with served(mcpgym.GymServer(Forms).http_app(web=True)) as base:
        page.goto(f"{base}/web")
        page.click("#reset")
        expect(page.locator("#observation")).to_contain_text("forms")
        # Raw JSON bypasses the page's checks: the server's validation answers with an error result.
        form = tool(page, "configure")
        form.locator("button.toggle-json").click()
        form.locator("textarea.raw").fill('{"name": "ada", "code": "", "point": {"x": 1}, "count": 99}')
        form.locator("button.call").click()
        expect(page.locator("#result .result.is-error")).to_contain_text("Invalid arguments for tool 'configure'")
        expect(page.locator("#result .result.is-error")).to_contain_text("count")
        tool(page, "picture").locator("button.call").click()
        image = page.locator("#result img.result-image")
        expect(image).to_be_visible()
        assert image.evaluate("img => img.naturalWidth") == 16  # decoded, not a broken image
        tool(page, "html").locator("button.call").click()
        expect(page.locator("#result pre.text")).to_have_text(mcpgym_hostile())
        assert page.title() != "pwned"
        assert page.locator("#result script, #result b, #result img").count() == 0
        shot(page, "escaping")
        # Whatever the step stamp carries is shown, generically: flags and reward components too.
        stamp = {"reward": 0.75, "done": True, "truncated": False, "terminated": True, "components": {"tests": 0.5}}
        result = {"content": [{"type": "text", "text": "ok"}], "_meta": {"io.mcpgym/step": stamp}}
        rows = page.evaluate(
            "r => [...renderResult(r).querySelectorAll('table.stamp tr')].map(t => t.dataset.key)", result
        )
        assert rows == ["reward", "done", "truncated", "terminated", "components", "tests"]
        assert page.evaluate("s => trueFlags(s)", stamp) == ["done", "terminated"]


def test_blackjack_page_shows_the_table_as_it_is_now_and_ends_the_episode(page: Page) -> None:
    from mcpgym.servers.blackjack import Blackjack

    with served(mcpgym.GymServer(Blackjack).http_app(web=True)) as base:
        page.goto(f"{base}/web")
        expect(page.locator("#env-name")).to_have_text("Blackjack")
        expect(page.locator("#env-description code").first).to_have_text("hit")  # `hit`, as code, not backticks
        expect(page.locator("#live")).to_be_hidden()  # no "offline" before there is anything to follow
        expect(tool(page, "stand").locator("button.call")).to_be_disabled()  # no episode yet
        page.fill("#seed", "3")
        page.click("#reset")
        observation = page.locator("#observation")
        expect(observation).to_contain_text("render() of its current state")
        expect(observation).to_contain_text("Your turn: hit or stand?")
        expect(page.locator("#live")).to_have_text("live")
        tool(page, "stand").locator("button.call").click()
        # The pane follows the state: the hand is over, not "your turn" as at reset.
        dealer = observation.locator("table.md tr").nth(2)
        expect(dealer).to_have_text("dealerQ♦ 9♠19")
        expect(dealer.locator("b")).to_have_text("19")  # markdown bold, built as an element
        expect(observation).to_contain_text("You lose.")
        expect(observation).not_to_contain_text("Your turn")
        expect(page.locator("#episode-flags")).to_contain_text("done")
        for name in ("hit", "stand"):  # nothing left to do but reset
            expect(tool(page, name).locator("button.call")).to_be_disabled()
        expect(page.locator("#reset")).to_be_enabled()
        expect(page.locator("#result table.stamp tr[data-key=reward]")).to_contain_text("-1")
        assert page.locator("#result table.stamp tr[data-key=v]").count() == 0  # the protocol version is not for people
        expect(page.locator("#result-card")).to_be_in_viewport()
        # A call after the end (another client, an old tab) is refused, numbered as a call of its own.
        episode_id = page.locator("#episode-id").inner_text()
        page.request.post(f"{base}/web/api/step", data={"episode_id": episode_id, "tool": "hit", "arguments": {}})
        expect(page.locator("#history > li")).to_have_count(2)
        numbers = page.locator("#history .num").all_inner_texts()
        assert numbers == ["#1", "#2"]
        expect(page.locator("#history > li").nth(1)).to_contain_text("not counted")
        expect(observation).to_contain_text("You lose.")  # a refused call changes nothing
        expect(page.locator("#last-reward")).to_have_text("-1")
        shot(page, "blackjack-finished")


def test_a_gymnasium_frame_shows_its_text_with_the_agent_marked_and_its_image(page: Page) -> None:
    with served(mcpgym.GymServer(mcpgym.load_environment("gym:FrozenLake-v1")).http_app(web=True)) as base:
        page.goto(f"{base}/web")
        page.fill("#seed", "0")
        page.click("#reset")
        observation = page.locator("#observation")
        expect(observation.locator("mark.ansi")).to_have_text("S")  # the agent's cell, coloured on a terminal
        expect(observation.locator("img.result-image")).to_have_count(1)  # the rgb_array frame
        assert "[41m" not in observation.inner_text() and "[41m" not in page.locator("#result").inner_text()
        step = tool(page, "step")
        step.locator("input").first.fill("2")
        step.locator("button.call").click()
        expect(page.locator("#history > li")).to_have_count(1)
        expect(observation.locator("mark.ansi")).to_have_count(1)
        shot(page, "gym-frozenlake")


def test_the_result_stays_in_view_after_a_tool_far_down_the_list(page: Page) -> None:
    from tests.web_envs import ManyTools

    with served(mcpgym.GymServer(ManyTools).http_app(web=True)) as base:
        page.set_viewport_size({"width": 1280, "height": 600})
        page.goto(f"{base}/web")
        page.click("#reset")
        expect(page.locator("#observation")).to_contain_text("ready")
        last = tool(page, "tool_29")
        last.scroll_into_view_if_needed()
        expect(page.locator("#result-card")).not_to_be_in_viewport()
        last.locator("button.call").click()
        expect(page.locator("#result")).to_contain_text("called 29")
        expect(page.locator("#result-card")).to_be_in_viewport()
        # Without a render(), the OBSERVATION pane shows the latest observation, not the reset one.
        expect(page.locator("#observation")).to_contain_text("called 29")


def mcpgym_hostile() -> str:
    from tests.web_envs import HOSTILE

    return HOSTILE


def test_token_protected_server(page: Page) -> None:
    argv = [
        sys.executable,
        "-m",
        "mcpgym.servers.echo",
        "--http",
        "--web",
        "--port",
        "0",
    ]  # what `mcpgym serve` runs too
    with ServerProcess([*argv, "--token", "s3cret"]) as server:
        base = server.url.removesuffix("/mcp")
        assert page.request.get(f"{base}/web/api/info").status == 401  # the data needs the token
        page.goto(f"{base}/web")
        expect(page.locator("#token-dialog .token-rejected")).to_be_empty()  # asked, nothing refused yet
        page.locator("#token-dialog input[name=token]").fill("wrong")
        page.locator("#token-dialog button").click()
        expect(page.locator("#token-dialog .token-rejected")).to_have_text(
            "Token rejected: the server did not accept it. Check it and try again."
        )
        page.locator("#token-dialog input[name=token]").fill("s3cret")
        page.locator("#token-dialog button").click()
        expect(page.locator("#env-name")).to_have_text("Echo")
        page.click("#reset")
        expect(page.locator("#observation")).to_contain_text("Say the word")
        echo = tool(page, "echo_message")
        echo.locator("input[name=message]").fill("hi")
        echo.locator("button.call").click()
        expect(page.locator("#history > li")).to_have_count(1)
        expect(page.locator("#live")).to_have_text("live")
        # #token=... in the link works too, and leaves the address bar.
        other = page.context.new_page()
        other.goto(f"{base}/web#token=s3cret")
        expect(other.locator("#env-name")).to_have_text("Echo")
        assert "s3cret" not in other.url
        shot(page, "token")
        other.close()


def record_runs(directory: Path) -> tuple[int, int]:
    """Echo episodes recorded by a server, and a rollout file from the harness; returns how many
    of each. Even seeds say the target word (reward 1.0), odd ones give up after one wrong word."""
    from mcpgym import harness
    from mcpgym.harness.policy import tool_call
    from mcpgym.harness.types import AssistantTurn

    gym = mcpgym.GymServer(Echo, record=directory / "recorded")

    async def play() -> None:
        async with mcpgym.connect(gym) as env:
            for seed in range(6):
                first = await env.reset(seed=seed)
                word = first.observation["target"] if seed % 2 == 0 else "wrong"
                await env.call_tool("echo_message", {"message": word})

    async def policy(messages: list[dict[str, Any]], tools: list[harness.ChatTool]) -> AssistantTurn:
        if messages[-1]["role"] == "tool":
            return AssistantTurn(content="done")
        target = json.loads(messages[-1]["content"])["target"]
        return AssistantTurn(tool_calls=[tool_call("c1", "echo_message", {"message": target})])

    async def main() -> None:
        await play()
        await harness.rollout(Echo, policy, episodes=4, seed=0, out=directory / "rollout.jsonl")

    with start_blocking_portal("asyncio") as portal:  # Playwright's loop holds this thread
        portal.call(main)
    return 6, 4


def test_view_recorded_runs(page: Page, tmp_path: Path) -> None:
    recorded, rolled = record_runs(tmp_path)
    with ServerProcess([sys.executable, "-m", "mcpgym", "view", str(tmp_path), "--port", "0"]) as server:
        page.goto(server.url)
        total = recorded + rolled
        expect(page.locator("#count")).to_have_text(f"{total} of {total}")
        expect(page.locator("#rows tr")).to_have_count(total)
        expect(page.locator("#plot svg circle.point")).to_have_count(total)
        expect(page.locator("#plot svg polyline.mean")).to_have_count(1)
        # Filtering: the recorded episodes that failed (odd seeds: reward 0).
        page.fill("#min-reward", "1")
        expect(page.locator("#count")).to_have_text(f"{3 + rolled} of {total}")
        page.fill("#min-reward", "")
        page.fill("#filter", "rollout.jsonl")
        expect(page.locator("#count")).to_have_text(f"{rolled} of {total}")
        page.fill("#filter", "")
        # A recorded episode's timeline, loaded when opened.
        page.locator("#rows tr", has_text="recorded/").first.click()
        expect(page.locator("#episode .steps details.step")).to_have_count(1)
        expect(page.locator("#episode")).to_contain_text("echo_message")
        page.locator("#episode details.step > summary").click()
        shot(page, "view-recorded")
        page.locator("#rows tr", has_text="rollout.jsonl").first.click()
        expect(page.locator("#episode .turn")).to_have_count(1)  # the winning call ends the episode
        expect(page.locator("#episode .turn")).to_contain_text("reward 1")
        shot(page, "view-rollout")


def test_view_shows_finished_page_episodes_their_renders_and_a_working_status_filter(
    page: Page, tmp_path: Path
) -> None:
    from mcpgym.servers.blackjack import Blackjack
    from mcpgym.servers.maze import Maze

    async def play() -> None:
        async with mcpgym.connect(mcpgym.GymServer(Blackjack, record=tmp_path / "cards")) as env:
            await env.reset(seed=3)
            await env.call_tool("stand")
            await env.call_tool("hit")  # refused: the hand is over
            await env.reset(seed=4)  # left running
        async with mcpgym.connect(mcpgym.GymServer(Maze, record=tmp_path / "maze")) as env:
            await env.reset(seed=3)
            await env.call_tool("move", {"direction": "down"})

    with start_blocking_portal("asyncio") as portal:
        portal.call(play)
    with ServerProcess([sys.executable, "-m", "mcpgym", "view", str(tmp_path), "--port", "0"]) as server:
        page.goto(server.url)
        expect(page.locator("#count")).to_have_text("3 of 3")
        options = page.locator("#status-filter option").all_inner_texts()
        assert options == ["any status", "done", "not done"], options  # options, not "[object HTMLOptionElement]"
        page.select_option("#status-filter", "done")
        expect(page.locator("#count")).to_have_text("1 of 3")
        row = page.locator("#rows tr").first
        expect(row).to_contain_text("cards/")
        assert row.locator("td").nth(6).inner_text() == "1"  # the refused call is not a step
        row.click()
        expect(page.locator("#episode .steps details.step")).to_have_count(1)
        expect(page.locator("#episode")).to_contain_text("render() after reset")
        page.locator("#episode details.step > summary").click()
        expect(page.locator("#episode details.step")).to_contain_text("You lose.")
        expect(page.locator("#episode details.step table.md b").last).to_have_text("19")
        expect(page.locator("#episode details.step > summary")).to_contain_text(re.compile(r" (<1|\d+) ms$"))
        shot(page, "view-finished")
        page.select_option("#status-filter", "")
        page.locator("#rows tr", has_text="maze/").click()
        page.locator("#episode details.step > summary").click()
        pictures = page.locator("#episode details.step img.result-image")
        expect(pictures).to_have_count(2)  # the move's result and the render after it, from their blob
        assert pictures.last.evaluate("img => img.naturalWidth") > 0
        shot(page, "view-maze")
