"""The web page's HTTP API without a browser: security, episode ownership, live events, shutdown."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import pytest

import mcpgym
from mcpgym._core.protocol import new_episode_id
from mcpgym.servers.echo import Echo
from tests.conftest import serve_app

pytestmark = pytest.mark.anyio

JSON = {"Content-Type": "application/json"}


async def reset(http: httpx2.AsyncClient, base: str, **body: Any) -> httpx2.Response:
    return await http.post(f"{base}/web/api/reset", json={"episode_id": new_episode_id(), **body}, headers=JSON)


async def test_page_actions_are_posts_with_json_and_the_mcp_host_checks() -> None:
    async with serve_app(mcpgym.GymServer(Echo).http_app(web=True)) as base, httpx2.AsyncClient() as http:
        assert (await http.get(f"{base}/web")).status_code == 200
        page = await http.get(f"{base}/web")
        assert "script-src 'self'" in page.headers["content-security-policy"]  # no inline script runs
        assert (await http.get(f"{base}/web/api/reset")).status_code == 405  # no state-changing GET
        text = await http.post(f"{base}/web/api/reset", content="{}", headers={"Content-Type": "text/plain"})
        assert text.status_code == 400  # a cross-site form post cannot be JSON without a preflight
        evil_host = await http.get(f"{base}/web/api/info", headers={"Host": "evil.example:80"})
        assert evil_host.status_code == 421  # DNS rebinding, as /mcp refuses it
        evil_origin = await http.post(
            f"{base}/web/api/reset",
            json={"episode_id": new_episode_id()},
            headers={**JSON, "Origin": "http://evil.example"},
        )
        assert evil_origin.status_code == 403
        assert (await http.get(f"{base}/web/static/..%2f_play.py")).status_code == 404
        assert (await http.get(f"{base}/web/static/common.js")).status_code == 200
        bad = await http.post(f"{base}/web/api/reset", json={"episode_id": "short"}, headers=JSON)
        assert bad.status_code == 400 and "episode_id" in bad.json()["error"]


async def test_body_limit_and_no_page_without_web() -> None:
    gym = mcpgym.GymServer(Echo)
    async with serve_app(gym.http_app(web=True, max_body_bytes=1000)) as base, httpx2.AsyncClient() as http:
        episode = new_episode_id()
        assert (await http.post(f"{base}/web/api/reset", json={"episode_id": episode}, headers=JSON)).is_success
        big = {"episode_id": episode, "tool": "echo_message", "arguments": {"message": "x" * 2000}}
        response = await http.post(f"{base}/web/api/step", json=big, headers=JSON)
        assert response.status_code == 413
    async with serve_app(mcpgym.GymServer(Echo).http_app()) as base, httpx2.AsyncClient() as http:
        assert (await http.get(f"{base}/web")).status_code == 404


async def test_token_guards_the_api_not_the_shell() -> None:
    async with serve_app(mcpgym.GymServer(Echo).http_app(web=True, token="t0k")) as base, httpx2.AsyncClient() as http:
        assert (await http.get(f"{base}/web")).status_code == 200
        assert (await http.get(f"{base}/web/static/play.js")).status_code == 200
        assert (await http.get(f"{base}/web/api/info")).status_code == 401
        assert (await http.post(f"{base}/web/api/reset", json={}, headers=JSON)).status_code == 401
        authorised = await http.get(f"{base}/web/api/info", headers={"Authorization": "Bearer t0k"})
        assert authorised.json()["environment"] == "Echo"
        assert (await http.post(f"{base}/mcp", json={}, headers=JSON)).status_code == 401  # /mcp as before


async def test_page_and_mcp_episodes_cannot_drive_each_other() -> None:
    gym = mcpgym.GymServer(Echo)
    async with serve_app(gym.http_app(web=True)) as base, httpx2.AsyncClient() as http:
        page_episode = new_episode_id()
        assert (await http.post(f"{base}/web/api/reset", json={"episode_id": page_episode}, headers=JSON)).is_success
        async with mcpgym.connect(f"{base}/mcp") as env:
            await env.reset(seed=1)
            mcp_episode = env.episode_id
            assert mcp_episode is not None
            step = {"episode_id": mcp_episode, "tool": "echo_message", "arguments": {"message": "hi"}}
            refused = await http.post(f"{base}/web/api/step", json=step, headers=JSON)
            assert refused.status_code == 400 and "Unknown episode" in refused.json()["error"]
            assert (await http.get(f"{base}/web/api/episodes/{mcp_episode}/state")).status_code == 404
            taken = await http.post(f"{base}/web/api/reset", json={"episode_id": mcp_episode}, headers=JSON)
            assert taken.status_code == 400 and "taken" in taken.json()["error"]
            await reset(http, base, previous=mcp_episode)  # not the page's to close
            assert (await env.call_tool("echo_message", {"message": "still mine"})).text == "still mine"
        with pytest.raises(mcpgym.MCPError, match="Unknown episode"):
            async with mcpgym.connect(f"{base}/mcp") as env:
                env.episode_id = page_episode  # what a client guessing the page's id would send
                await env.call_tool("echo_message", {"message": "hi"})
        # Through the page, the same step runs in the registry's own episode.
        step = {"episode_id": page_episode, "tool": "echo_message", "arguments": {"message": "hi"}}
        event = (await http.post(f"{base}/web/api/step", json=step, headers=JSON)).json()
        assert event["result"]["_meta"]["io.mcpgym/step"]["step"] == 1
        assert gym.registry.get(page_episode, "mcpgym-web").step_count == 1


async def sse_events(response: httpx2.Response) -> AsyncIterator[dict[str, Any]]:
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            yield json.loads(line[6:])


async def test_live_events_replay_after_last_event_id() -> None:
    gym = mcpgym.GymServer(Echo)
    async with serve_app(gym.http_app(web=True)) as base, httpx2.AsyncClient(timeout=10) as http:
        episode = new_episode_id()
        await http.post(f"{base}/web/api/reset", json={"episode_id": episode, "seed": 2}, headers=JSON)
        step = {"episode_id": episode, "tool": "echo_message", "arguments": {"message": "one"}}
        await http.post(f"{base}/web/api/step", json=step, headers=JSON)
        url = f"{base}/web/api/episodes/{episode}/events"
        async with http.stream("GET", url, headers={"Last-Event-ID": "0"}) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            events = sse_events(response)
            replayed = await anext(events)
            assert (replayed["seq"], replayed["kind"], replayed["arguments"]) == (1, "step", {"message": "one"})
            await http.post(f"{base}/web/api/step", json={**step, "arguments": {"message": "two"}}, headers=JSON)
            live = await anext(events)
            assert (live["seq"], live["arguments"], live["state"]["step_count"]) == (2, {"message": "two"}, 2)
            # A reset with `previous` tells the old episode's watchers where the page went.
            await reset(http, base, previous=episode)
            closed = await anext(events)
            assert closed["kind"] == "closed" and closed["next"] != episode
            with pytest.raises(StopAsyncIteration):
                await anext(events)  # that feed is over
        gone = await http.get(url)
        assert gone.status_code == 404 and "reset" in gone.json()["error"]  # the page stops following it


async def test_open_live_streams_end_when_the_server_shuts_down() -> None:
    async with httpx2.AsyncClient(timeout=10) as http:
        # Without the shutdown hook uvicorn waits for the open stream for ever (this config sets
        # no graceful-shutdown timeout): leaving serve_app would hang until fail_after fires.
        with anyio.fail_after(20):
            async with serve_app(mcpgym.GymServer(Echo).http_app(web=True)) as base:
                episode = new_episode_id()
                await http.post(f"{base}/web/api/reset", json={"episode_id": episode}, headers=JSON)
                url = f"{base}/web/api/episodes/{episode}/events"
                stream = await http.send(http.build_request("GET", url), stream=True)
                assert stream.status_code == 200
        await stream.aclose()


def test_web_needs_http() -> None:
    argv = [sys.executable, "-m", "mcpgym", "serve", "mcpgym.servers.echo:Echo", "--web"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode != 0 and "--web needs --http" in done.stderr
