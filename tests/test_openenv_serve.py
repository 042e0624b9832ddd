"""`--openenv`: OpenEnv's own clients (the real `openenv` 0.10, in its own venv) drive mcpgym
servers unchanged, and the OpenEnv routes keep `/mcp`'s security (rfcs/0017-bridges.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

import mcpgym
from mcpgym._server.gym_server import GymServer
from mcpgym._server.http_guard import GuardedProtocol, Limits
from mcpgym.servers.echo import Echo
from mcpgym.testing import serve_app
from tests.openenv_venv import openenv_python

pytestmark = pytest.mark.timeout(600)  # the first test may build the OpenEnv venv

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DRIVE = HERE / "openenv" / "drive.py"
WRAPPED = [sys.executable, str(HERE / "wrap_server.py")]


@pytest.fixture(scope="module")
def oe_python() -> Path:
    return openenv_python()


@pytest.fixture(scope="module")
def echo_url() -> Iterator[str]:
    with mcpgym.ServerProcess([sys.executable, "-m", "mcpgym.servers.echo", "--http", "--port", "0", "--openenv"]) as s:
        yield s.url.removesuffix("/mcp")


def drive(python: Path, scenario: str, url: str, **extra: Any) -> Any:
    """What OpenEnv's clients saw running `scenario` (several, comma-separated: a dict of them)."""
    done = subprocess.run(
        [str(python), str(DRIVE), scenario, url, json.dumps(extra)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    return seen if "," in scenario else seen[scenario]


def test_the_readme_snippet_runs_against_an_mcpgym_server(oe_python: Path, echo_url: str) -> None:
    done = subprocess.run(
        [str(oe_python), str(REPO / "examples" / "openenv_readme.py"), echo_url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    first, echoed, reward, echoed_sync = done.stdout.splitlines()
    assert json.loads(first)["prompt"].startswith("Say the word")
    assert (echoed, reward, echoed_sync) == ("Hello, World!", "0.0", "Hello, World!")


HTTP = ["--http", "--port", "0", "--openenv"]
SERVERS = {
    "echo": (["-m", "mcpgym.servers.echo", *HTTP], "echo_message", {"message": "hi"}, ["echo_message", "repeat"]),
    "blackjack": (["-m", "mcpgym.servers.blackjack", *HTTP], "stand", {}, ["hit", "stand"]),
    "coding": (["-m", "mcpgym.servers.coding", *HTTP], "run_python", {"code": "print(6 * 7)"}, None),
    "wrapped": (["-m", "mcpgym", "wrap", *HTTP, "--isolation", "none", "--", *WRAPPED], "increment", {"by": 2}, None),
}


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_openenvs_clients_drive_every_kind_of_server(oe_python: Path, name: str) -> None:
    args, tool, arguments, tools = SERVERS[name]
    with mcpgym.ServerProcess([sys.executable, *args]) as server:
        url = server.url.removesuffix("/mcp")
        seen = drive(oe_python, "mcp,generic,mcp-sync", url, tool=tool, arguments=arguments)
    mcp, generic, synced = seen["mcp"], seen["generic"], seen["mcp-sync"]
    if tools is not None:
        assert mcp["tools"] == tools and mcp["listed"] == tools
    assert tool in mcp["tools"]
    step = mcp["step"]
    assert step["observation"]["tool_name"] == tool and step["observation"]["error"] is None
    # A server wrapped without tasks is scored by nothing: its steps are unscored (NaN in mcpgym),
    # which OpenEnv's Optional[float] reward says as None.
    assert (step["reward"] is None) if name == "wrapped" else isinstance(step["reward"], float)
    assert isinstance(step["done"], bool)
    # Blackjack's first `stand` (call_tool) ended the hand: the step after it is refused, as over MCP.
    assert step["observation"]["result"]["is_error"] is (name == "blackjack")
    assert mcp["called"] == step["observation"]["result"]["data"] or name in ("blackjack", "wrapped")
    assert mcp["state"]["step_count"] >= 1 and len(mcp["state"]["episode_id"]) >= 22
    assert "Unknown tool: 'no_such_tool'" in mcp["unknown"]  # a JSON-RPC error from /mcp, raised by the client
    assert generic["steps"][0]["observation"]["tool_name"] == tool
    assert "VALIDATION_ERROR" in generic["invalid"]
    assert synced["result"]["is_error"] is False and synced["tools"] >= 1
    if name == "wrapped":  # one server per episode: the counter started at 0 in each session
        assert mcp["called"] == 2 and step["observation"]["result"]["data"] == 4
        assert [s["observation"]["result"]["data"] for s in generic["steps"]] == [2, 4]
    if name == "coding":
        assert "42" in step["observation"]["result"]["data"]


def test_reward_and_done_ride_in_openenvs_fields_and_cannot_be_farmed(oe_python: Path, echo_url: str) -> None:
    seen = drive(
        oe_python, "generic", echo_url, tool="echo_message", arguments={"message": "apple"}, reset={"target": "apple"}
    )
    assert seen["reset"]["target"] == "apple" and seen["reset"]["metadata"]["message"]
    first, second = seen["steps"]
    assert (first["reward"], first["done"]) == (1.0, True)
    assert first["observation"]["metadata"]["terminated"] is True
    # The episode is over: saying the word again earns nothing, and the state's return stays 1.
    assert (second["reward"], second["done"]) == (0.0, True)
    assert second["observation"]["result"]["is_error"] is True
    assert seen["state"]["total_reward"] == 1.0 and seen["state"]["done"] is True


def test_seeded_resets_repeat_over_the_sync_client(oe_python: Path, echo_url: str) -> None:
    seen = drive(oe_python, "generic-sync", echo_url, tool="echo_message", arguments={"message": "x"})
    assert seen["first"] == seen["again"]
    assert seen["state"]["seed"] == 5 and seen["state"]["step_count"] == 1


def test_openenvs_own_validator_passes(oe_python: Path, echo_url: str) -> None:
    done = subprocess.run(
        [str(oe_python.parent / "openenv"), "validate", "--url", echo_url, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(done.stdout)
    failed = [c for c in report["criteria"] if not c["passed"]]
    assert report["passed"] is True, failed
    assert report["mode"] == "simulation"


def test_the_token_guards_the_websocket_and_openenvs_mcp_route(oe_python: Path) -> None:
    argv = [sys.executable, "-m", "mcpgym.servers.echo", "--http", "--port", "0", "--openenv", "--token", "s3cret"]
    with mcpgym.ServerProcess(argv) as server:
        url = server.url.removesuffix("/mcp")
        seen = drive(oe_python, "headers", url, token="s3cret")
        health = httpx.get(f"{url}/health")
        refused = httpx.post(f"{url}/reset", json={})
    assert seen["without"].startswith("ConnectionError") and "403" in seen["without"]
    assert seen["generic"] is False and seen["tools"] == ["echo_message", "repeat"]
    assert health.json() == {"status": "healthy"}  # probes carry no token, as for /healthz
    assert refused.status_code == 401


# --- the protocol in this process: mcpgym's own websockets client, the server in-process ------


@pytest.mark.anyio
async def test_bad_frames_are_answered_and_the_server_keeps_serving() -> None:
    gym = GymServer(Echo)
    async with serve_app(gym.http_app(openenv=True, max_body_bytes=4096)) as base:
        ws_url = base.replace("http", "ws", 1) + "/ws"
        async with ws_connect(ws_url) as ws:
            for frame, code in [
                ("{not json", "INVALID_JSON"),
                ('{"type": "dance"}', "UNKNOWN_TYPE"),
                ('{"type": "step", "data": {"tool_name": 3}}', "VALIDATION_ERROR"),
                ('{"type": "step", "data": 7}', "VALIDATION_ERROR"),
                ('{"type": "reset", "data": {"seed": -1}}', "VALIDATION_ERROR"),
            ]:
                await ws.send(frame)
                reply = json.loads(await ws.recv())
                assert (reply["type"], reply["data"]["code"]) == ("error", code), frame
            await ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
            assert json.loads(await ws.recv())["type"] == "observation"
            assert len(gym.registry) == 1
        async with ws_connect(ws_url) as other:
            await other.send(
                json.dumps({"type": "step", "data": {"tool_name": "repeat", "arguments": {"message": "a"}}})
            )
            reply = json.loads(await other.recv())
            assert reply["data"]["observation"]["result"]["data"] == "a a"  # stepped first: a plain reset ran
            await other.send("x" * 10_000)  # past the body limit: this connection ends, not the server
            with pytest.raises(ConnectionClosed):
                await other.recv()
        async with ws_connect(ws_url + "?session_id=" + "A" * 22) as stranger:
            reply = json.loads(await stranger.recv())
            assert reply["data"]["code"] == "SESSION_ERROR" and "Unknown session_id" in reply["data"]["message"]
    assert len(gym.registry) == 0  # each connection's episode closed with it


@pytest.mark.anyio
async def test_sessions_count_against_the_episode_limit() -> None:
    gym = GymServer(Echo, max_episodes=1)
    async with serve_app(gym.http_app(openenv=True)) as base:
        ws_url = base.replace("http", "ws", 1) + "/ws"
        async with ws_connect(ws_url) as first:
            await first.send(json.dumps({"type": "reset", "data": {}}))
            assert json.loads(await first.recv())["type"] == "observation"
            async with ws_connect(ws_url) as second:  # no place for its session: told so, then closed
                reply = json.loads(await second.recv())
                assert reply["data"]["code"] == "CAPACITY_REACHED"
                with pytest.raises(ConnectionClosed):
                    await second.recv()
            async with httpx.AsyncClient() as client:
                assert (await client.post(f"{base}/reset", json={})).status_code == 503
        async with ws_connect(ws_url) as third:  # the first one's place is free again
            await third.send(json.dumps({"type": "reset", "data": {}}))
            assert json.loads(await third.recv())["type"] == "observation"


@pytest.mark.anyio
async def test_websocket_handshakes_get_mcps_host_and_origin_checks() -> None:
    gym = GymServer(Echo)
    async with serve_app(gym.http_app(openenv=True)) as base:
        ws_url = base.replace("http", "ws", 1) + "/ws"
        port = int(base.rsplit(":", 1)[1])
        with pytest.raises(InvalidStatus, match="403"):  # a page on another site, in a browser
            async with ws_connect(ws_url, additional_headers={"Origin": "http://evil.example"}):
                pass
        with pytest.raises(InvalidStatus, match="403"):  # DNS rebinding: a foreign name for our address
            async with ws_connect(f"ws://evil.example:{port}/ws", host="127.0.0.1", port=port):
                pass
        async with httpx.AsyncClient() as client:
            rebound = await client.post(f"{base}/reset", json={}, headers={"Host": "evil.example"})
            assert rebound.status_code == 421
            ok = await client.post(f"{base}/reset", json={"seed": 2})
            assert ok.json()["observation"]["metadata"]["message"]
        async with ws_connect(ws_url, additional_headers={"Origin": base}) as ws:  # the server's own origin
            await ws.send(json.dumps({"type": "state"}))
            assert json.loads(await ws.recv())["data"]["step_count"] == 0


@pytest.mark.anyio
async def test_mcp_clients_still_get_the_sdks_endpoint_beside_openenvs() -> None:
    gym = GymServer(Echo)
    async with serve_app(gym.http_app(openenv=True)) as base:
        async with mcpgym.connect(f"{base}/mcp") as env:
            await env.reset(options={"target": "apple"})
            step = await env.step(mcpgym.CallToolAction(tool_name="echo_message", arguments={"message": "apple"}))
            assert (step.reward, step.done) == (1.0, True)
        async with httpx.AsyncClient() as client:
            bare = await client.post(f"{base}/mcp", json={})  # OpenEnv's validator's probe
            assert bare.status_code == 200 and bare.json()["error"]["code"] == -32600
            made = await client.post(
                f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create"}
            )
            session = made.json()["result"]["session_id"]
            call = {"name": "echo_message", "arguments": {"message": "hi"}, "session_id": session}
            answer = await client.post(
                f"{base}/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}
            )
            assert answer.json()["result"]["data"] == "hi"
            close = {"jsonrpc": "2.0", "id": 3, "method": "openenv/session/close", "params": {"session_id": session}}
            assert (await client.post(f"{base}/mcp", json=close)).json()["result"]["closed"] is True
            again = await client.post(f"{base}/mcp", json={**close, "id": 4})
            assert "Unknown session_id" in again.json()["error"]["message"]
    assert len(gym.registry) == 0


@pytest.mark.anyio
async def test_websocket_connections_give_their_place_back() -> None:
    """uvicorn hands an upgraded connection to its WebSocket protocol: the guard must follow it,
    or each WebSocket keeps a connection slot for ever (and is dropped at the head timeout)."""
    gym = GymServer(Echo)
    ready: list[str] = []
    listening = anyio.Event()

    def on_ready(url: str) -> None:
        ready.append(url)
        listening.set()

    async def serve() -> None:
        await gym.serve_http("127.0.0.1", 0, on_ready=on_ready, max_connections=2, openenv=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        await listening.wait()
        ws_url = ready[0].replace("http", "ws", 1) + "/ws"
        for _ in range(5):
            async with ws_connect(ws_url) as ws:
                await ws.send(json.dumps({"type": "reset", "data": {}}))
                assert json.loads(await ws.recv())["type"] == "observation"
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"{ready[0]}/health")).json() == {"status": "healthy"}
        tg.cancel_scope.cancel()


def test_an_upgraded_connection_stops_its_head_timer() -> None:
    import asyncio

    class Transport:
        def __init__(self) -> None:
            self.protocol: Any = None

        def get_protocol(self) -> Any:
            return self.protocol

        def set_protocol(self, protocol: Any) -> None:
            self.protocol = protocol

        def abort(self) -> None:
            raise AssertionError("an upgraded connection must not be dropped")

    class WebSocketProtocol:
        received: list[bytes] = []  # noqa: RUF012

        def data_received(self, data: bytes) -> None:
            self.received.append(data)

        def connection_lost(self, exc: Exception | None) -> None:
            self.received.append(b"lost")

    class Http:
        cycle = None

        def __init__(self, transport: Transport) -> None:
            self.transport = transport

        def connection_made(self, transport: Any) -> None:
            pass

        def data_received(self, data: bytes) -> None:
            self.transport.set_protocol(WebSocketProtocol())  # what uvicorn's upgrade does

    async def run() -> None:
        limits = Limits(header_timeout=60, max_connections=4)
        transport = Transport()
        guarded = GuardedProtocol(Http(transport), limits)
        transport.set_protocol(guarded)
        guarded.connection_made(transport)  # type: ignore[arg-type]
        guarded.data_received(b"GET /ws HTTP/1.1\r\nUpgrade: websocket\r\n\r\n")
        assert transport.get_protocol() is guarded and guarded._timer is None and not limits.waiting
        guarded.data_received(b"frame")
        guarded.connection_lost(None)
        assert WebSocketProtocol.received == [b"frame", b"lost"] and limits.open == 0

    asyncio.run(run())
