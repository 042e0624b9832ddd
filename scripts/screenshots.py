"""Take the documentation's screenshots: the web page and the viewer after a finished blackjack hand.

    .venv/bin/python scripts/screenshots.py     # writes docs/img/web-blackjack.png, view-runs.png, view-episode.png

Runs what a user runs (`mcpgym serve ... --web --record DIR`, then `mcpgym view DIR`) and drives
them with Debian's chromium through Playwright (`scripts/setup.sh --test` installs both), as
tests/test_web.py does. An MCP client plays a few hands first (so the viewer's charts have
points); the page then plays seed 3, a hand the player loses by standing on 12 against a queen.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import FloatRect, Page, ViewportSize, expect, sync_playwright

import mcpgym

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "img"
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run", "--disable-sync"]
RECORDS = Path("runs", "blackjack")
SIZE: ViewportSize = {"width": 1280, "height": 860}
SEEDS = (0, 1, 2, 4, 5, 6, 7)
"""The hands an MCP client plays (standing at once) before the page plays seed 3."""


def play(page: Page, records: Path) -> None:
    argv = [sys.executable, "-m", "mcpgym", "serve", "mcpgym.servers.blackjack", "--http", "--web", "--port", "0"]
    with mcpgym.ServerProcess([*argv, "--record", str(records)]) as server:
        with mcpgym.connect_sync(server.url) as env:
            for seed in SEEDS:
                env.reset(seed=seed)
                env.call_tool("stand")
        page.goto(server.url.removesuffix("/mcp") + "/web")
        page.fill("#seed", "3")
        page.click("#reset")
        expect(page.locator("#observation")).to_contain_text("Your turn")
        page.locator("form.tool[data-tool='stand'] button.call").click()
        expect(page.locator("#observation")).to_contain_text("You lose.")
        expect(page.locator("#episode-flags")).to_contain_text("done")
        page.screenshot(path=str(OUT / "web-blackjack.png"), full_page=True)


def view(page: Page, records: Path) -> None:
    with mcpgym.ServerProcess([sys.executable, "-m", "mcpgym", "view", str(records), "--port", "0"]) as server:
        page.goto(server.url)
        total = len(SEEDS) + 1
        expect(page.locator("#count")).to_have_text(f"{total} of {total}")
        expect(page.locator("#charts svg#histogram")).to_be_visible()
        charts = _box(page, "#charts")
        shot(page, "view-runs.png", top=0, bottom=charts["y"] + charts["height"])
        seed_3 = page.locator("#rows tr").filter(has=page.locator("td:nth-child(4)", has_text=re.compile(r"^3$")))
        seed_3.click()
        page.locator("#episode details.step > summary").first.click()
        expect(page.locator("#episode details.step")).to_contain_text("You lose.")
        grid = _box(page, "main.view-grid")
        shot(page, "view-episode.png", top=grid["y"], bottom=grid["y"] + grid["height"])


def _box(page: Page, selector: str) -> dict[str, float]:
    """Where `selector` is on the page (not the viewport), in CSS pixels."""
    box: dict[str, float] = page.locator(selector).evaluate(
        "el => { const r = el.getBoundingClientRect(); return {y: r.top + scrollY, height: r.height}; }"
    )
    return box


def shot(page: Page, name: str, *, top: float, bottom: float, margin: float = 12) -> None:
    """The page's full width from `top` to `bottom`, with a margin."""
    clip: FloatRect = {"x": 0, "y": max(0, top - margin), "width": SIZE["width"], "height": bottom - top + 2 * margin}
    page.screenshot(path=str(OUT / name), full_page=True, clip=clip)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright:
        os.chdir(tmp)  # the viewer shows the path it was given: runs/blackjack, as in the docs
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            page = browser.new_context(viewport=SIZE, device_scale_factor=1).new_page()
            play(page, RECORDS)
            view(page, RECORDS)
        finally:
            browser.close()
            os.chdir(ROOT)
    print(f"wrote web-blackjack.png, view-runs.png and view-episode.png in {OUT}")


if __name__ == "__main__":
    main()
