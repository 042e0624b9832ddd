"""How fast `mcpgym view` opens a large directory of recorded episodes.

    python -m benchmarks.bench_view                 # 10,000 recorded episodes (+ a 10,000-line rollout file)
    python -m benchmarks.bench_view --episodes 2000 --steps 20 --no-browser

Writes N `--record` episode files (reset, S steps with a few hundred bytes of result each, close)
and one rollout file of N lines into a temporary directory, then measures, in one run:

- indexing the directory cold (`RunIndex.refresh`, what the first page load waits for) and again
  warm (nothing changed: the re-scan behind the page's reload button);
- `GET /view/api/runs` over real HTTP on loopback (uvicorn), with the gzip'd size;
- in headless Chromium (Debian's, as the tests use it), from navigation until the table says
  "N of N" with the plot drawn, and opening one episode's timeline.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import anyio
import httpx2
from anyio.from_thread import start_blocking_portal

from mcpgym.web import view_app
from mcpgym.web._runs import RunIndex
from tests.conftest import serve_app

T = TypeVar("T")


def write_runs(directory: Path, episodes: int, steps: int) -> None:
    recorded = directory / "recorded"
    recorded.mkdir()
    result = {"content": [{"type": "text", "text": "x" * 200}], "structuredContent": {"result": "x" * 200}}
    for i in range(episodes):
        t = 1_800_000_000.0 + i
        lines = [{"event": "reset", "episode_id": f"ep{i:020d}", "environment": "Echo", "seed": i, "time": t}]
        for s in range(1, steps + 1):
            done = s == steps
            lines.append(
                {
                    "event": "step",
                    "tool": "echo_message",
                    "arguments": {"message": f"m{s}"},
                    "result": result,
                    "reward": float(done and i % 3 == 0),
                    "done": done,
                    "truncated": False,
                    "step": s,
                    "time": t + s,
                    "duration": 0.001,
                }
            )
        lines.append(
            {
                "event": "close",
                "step_count": steps,
                "total_reward": float(i % 3 == 0),
                "done": True,
                "truncated": False,
                "time": t + steps,
            }
        )
        (recorded / f"ep{i:020d}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    with (directory / "rollout.jsonl").open("w") as f:
        for i in range(episodes):
            turns = [
                {
                    "assistant": {"content": None},
                    "steps": [
                        {
                            "call_id": "c",
                            "tool": "echo_message",
                            "arguments": {"message": "m"},
                            "output": "x" * 200,
                            "reward": float(i % 2),
                        }
                    ],
                }
            ]
            f.write(
                json.dumps(
                    {
                        "index": i,
                        "seed": i,
                        "reward": float(i % 2),
                        "done": True,
                        "stop": "done",
                        "turns": turns * steps,
                        "messages": [{"role": "user", "content": "y" * 300}],
                    }
                )
                + "\n"
            )


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


async def http_get(directory: Path) -> tuple[float, int, int]:
    async with serve_app(view_app([directory])) as base, httpx2.AsyncClient(timeout=120) as http:
        started = time.perf_counter()
        response = await http.get(f"{base}/view/api/runs", headers={"Accept-Encoding": "gzip"})
        seconds = time.perf_counter() - started
        return seconds, len(response.json()["episodes"]), int(response.headers.get("content-length", 0))


def browser_open(directory: Path, total: int) -> tuple[float, float]:
    from playwright.sync_api import expect, sync_playwright

    from tests.test_web import CHROMIUM, FLAGS

    with (
        start_blocking_portal("asyncio") as portal,
        portal.wrap_async_context_manager(serve_app(view_app([directory]))) as base,
        sync_playwright() as p,
    ):
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        page = browser.new_page()
        started = time.perf_counter()
        page.goto(f"{base}/view")
        expect(page.locator("#count")).to_have_text(f"{total} of {total}", timeout=120_000)
        expect(page.locator("#plot svg polyline.mean")).to_have_count(1)
        opened = time.perf_counter() - started
        started = time.perf_counter()
        page.locator("#rows tr").nth(5).click()
        expect(page.locator("#episode .caption").first).to_be_visible()
        episode = time.perf_counter() - started
        browser.close()
    return opened, episode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        write_runs(directory, args.episodes, args.steps)
        size = sum(p.stat().st_size for p in directory.rglob("*.jsonl"))
        total = 2 * args.episodes
        print(
            f"{args.episodes} recorded episodes + {args.episodes} rollout lines, {args.steps} steps each, "
            f"{size / 1e6:.1f} MB"
        )
        index = RunIndex([directory])
        cold, rows = timed(index.refresh)
        warm, _ = timed(index.refresh)
        print(f"index cold: {cold:.2f} s ({len(rows)} episodes)  warm re-scan: {warm:.2f} s")
        seconds, count, wire = anyio.run(http_get, directory)
        print(f"GET /view/api/runs: {seconds:.2f} s, {count} rows, {wire / 1e6:.2f} MB gzip'd")
        if not args.no_browser:
            opened, episode = browser_open(directory, total)
            print(f"chromium: page open to '{total} of {total}' + plot: {opened:.2f} s; one episode: {episode:.2f} s")


if __name__ == "__main__":
    main()
