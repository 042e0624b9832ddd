"""Hostile and malformed input: fuzzed arguments and raw HTTP abuse get clean errors, and the
server keeps serving. Also the HTTP security defaults (token, DNS rebinding, body size)."""

from __future__ import annotations

import contextlib
import json
import random
import socket
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mcpgym
from tests.envs import Counter

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
TOOLS = list(Counter.__mcpgym_tools__)


def _arguments(tool: str) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments shaped like the tool's schema (its own keys) with values of any JSON type."""
    keys = list(Counter.__mcpgym_tools__[tool].definition.input_schema.get("properties", {}))
    return st.dictionaries(st.sampled_from([*keys, "extra"]), JSON, max_size=3)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzzed_arguments_never_break_an_episode(data: st.DataObject) -> None:
    async def run() -> None:
        async with mcpgym.connect(Counter) as env:
            await env.reset(seed=0)
            for _ in range(3):
                tool = data.draw(st.sampled_from(TOOLS))
                result = await env.call_tool(tool, data.draw(_arguments(tool)))
                # Either a proper result or an isError the agent can read; never an exception.
                assert result.is_error or result.observation.content
                if result.done:
                    break

    anyio.run(run)


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    argv = "python -m mcpgym serve tests.envs:Counter --http --port 0 --max-body-bytes 65536 --token s3cret"
    with mcpgym.ServerProcess(argv) as server:
        yield server.url


AUTH = {"Authorization": "Bearer s3cret"}
HEADERS = {**AUTH, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def _still_serving(url: str) -> None:
    with mcpgym.connect_sync(url, headers=AUTH) as env:
        env.reset(seed=0)
        assert env.call_tool("add", {"n": 1}).reward == 0.1


@settings(max_examples=120, deadline=None)
@given(
    body=st.one_of(
        st.binary(max_size=200),
        JSON.map(lambda v: json.dumps(v).encode()),
        st.fixed_dictionaries(
            {"jsonrpc": st.sampled_from(["2.0", "1.0", 2]), "id": JSON, "method": st.text(max_size=30) | JSON},
            optional={"params": JSON},
        ).map(lambda v: json.dumps(v).encode()),
    )
)
def test_malformed_messages_get_clean_errors(server_url: str, body: bytes) -> None:
    response = httpx2.post(server_url, content=body, headers=HEADERS, timeout=10)
    assert response.status_code < 500, (body, response.status_code, response.text)


@pytest.mark.parametrize(
    ("description", "headers", "body", "status"),
    [
        ("no token", {"Content-Type": "application/json"}, b"{}", 401),
        ("wrong token", {**HEADERS, "Authorization": "Bearer s3creT"}, b"{}", 401),
        ("DNS rebinding Host", {**HEADERS, "Host": "evil.example:80"}, b"{}", 421),
        ("oversized body", HEADERS, b'{"x": "' + b"a" * 70_000 + b'"}', 413),
        (
            "unknown protocol version",
            {**HEADERS, "MCP-Protocol-Version": "1999-01-01"},
            b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}',
            400,
        ),
    ],
)
def test_http_security_defaults(
    server_url: str, description: str, headers: dict[str, str], body: bytes, status: int
) -> None:
    response = httpx2.post(server_url, content=body, headers=headers, timeout=10)
    assert response.status_code == status, (description, response.status_code, response.text)
    _still_serving(server_url)


def _modern_request(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A hand-built 2026-07-28 request (envelope in `_meta`, method in the header)."""
    envelope = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": method,
        "params": {**params, "_meta": {**envelope, **params.get("_meta", {})}},
    }
    headers = {**HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
    response = httpx2.post(url, json=body, headers=headers, timeout=10)
    reply: dict[str, Any] = response.json()
    return reply


def test_unknown_methods_and_bad_params_are_json_rpc_errors(server_url: str) -> None:
    from mcpgym._core.protocol import EPISODE_KEY, new_episode_id

    assert _modern_request(server_url, "nope/nothing", {})["error"]["code"] == -32601
    bad = _modern_request(server_url, "mcpgym/reset", {"seed": "x", "_meta": {EPISODE_KEY: new_episode_id()}})
    assert bad["error"]["code"] == -32602
    good = _modern_request(server_url, "mcpgym/reset", {"seed": 1, "_meta": {EPISODE_KEY: new_episode_id()}})
    assert good["result"]["observation"]["start"] == random.Random(1).randint(0, 100)  # seeded as asked
    _still_serving(server_url)


_LOW_FDS = (
    "import resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128)); "
    "from mcpgym._cli.main import main; main(sys.argv[1:])"
)


@pytest.mark.parametrize("cap", ["default", "above the fd limit"])
def test_slowloris_cannot_starve_authorised_clients(cap: str) -> None:
    """300 half-open connections against a server whose open-file limit is 128: they are cut
    off after the header timeout, an authorised client is served, and running out of
    descriptors (only possible when the connection cap is set above the limit) is logged once."""
    flags = ["--token", "t", "--header-timeout", "2"] + (["--max-connections", "10000"] if cap != "default" else [])
    argv = [sys.executable, "-c", _LOW_FDS, "serve", "tests.envs:Counter", "--http", "--port", "0", *flags]
    attackers: list[socket.socket] = []
    with mcpgym.ServerProcess(argv, keep_lines=100_000) as server:
        host, port = server.url.split("/")[2].split(":")
        try:
            for _ in range(300):  # more sockets than the server has descriptors
                sock = socket.create_connection((host, int(port)), timeout=30)
                sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # ... and the head never ends
                attackers.append(sock)

            async def authorised() -> float:
                with anyio.fail_after(30):
                    async with mcpgym.connect(server.url, headers={"Authorization": "Bearer t"}) as env:
                        await env.reset()
                        return (await env.call_tool("add", {"n": 1})).reward

            assert anyio.run(authorised) == 0.1
            for sock in attackers:  # every half-open connection is closed by the server, none left hanging
                with contextlib.suppress(ConnectionResetError):
                    assert sock.recv(1) == b""
        finally:
            for sock in attackers:
                sock.close()
        assert server.process.poll() is None  # still serving
    exhausted = [line for line in server.log if "out of file descriptors" in line]
    tracebacks = [line for line in server.log if line.startswith("Traceback")]
    assert len(exhausted) <= 1 and not tracebacks
    if cap != "default":
        assert len(exhausted) == 1  # the premise of the second case: it did run out, and said so once


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", [("asyncio", {"use_uvloop": True})])
async def test_the_connection_guard_serves_on_uvloop() -> None:
    """Ray runs actors (and so `RayPool`'s servers) on uvloop, whose transports are not
    subclasses of asyncio's: the guard serves there too, and still drops a head that never ends."""
    import asyncio

    import uvloop  # mcpgym[fast]; the test fails without it rather than skip

    assert isinstance(asyncio.get_running_loop(), uvloop.Loop)  # the premise: served on uvloop
    gym = mcpgym.GymServer(Counter)
    ready, urls = anyio.Event(), list[str]()

    def on_ready(url: str) -> None:
        urls.append(url)
        ready.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: gym.serve_http("127.0.0.1", 0, on_ready=on_ready, header_timeout=0.5))
        with anyio.fail_after(30):
            await ready.wait()
            async with httpx2.AsyncClient() as http:
                assert (await http.get(f"{urls[0]}/healthz")).json()["episodes"] == 0
            async with mcpgym.connect(f"{urls[0]}/mcp") as env:
                await env.reset()
                assert (await env.call_tool("add", {"n": 1})).reward == 0.1
            port = int(urls[0].rsplit(":", 1)[1])
            async with await anyio.connect_tcp("127.0.0.1", port) as slow:
                await slow.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # ... and the head never ends
                with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
                    await slow.receive()  # the server hangs up once the header timeout passes
        tg.cancel_scope.cancel()
