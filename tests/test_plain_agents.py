"""Which client gets what episode over HTTP: plain agents (that never reset) keep one episode per
session on every protocol revision they negotiate; mcpgym's own clients stay on the stateless wire."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

import mcpgym
from mcpgym.servers.echo import Echo
from tests.conftest import serve_app, serve_gym
from tests.envs import Counter

pytestmark = pytest.mark.anyio


async def _agent_steps(url: str, mode: str) -> tuple[str, list[int]]:
    """A plain agent's two calls: the protocol version it ended up on and each call's step number."""
    async with Client(streamable_http_client(url), mode=mode) as agent:
        steps = []
        for _ in range(2):
            result = await agent.call_tool("add", {"n": 1})
            assert result.meta is not None and not result.is_error
            steps.append(result.meta[mcpgym.STEP_KEY]["step"])
        return agent.protocol_version, steps


async def test_an_auto_negotiating_agent_keeps_one_episode_per_session() -> None:
    # d184b8c: the agent negotiated 2026-07-28 and each call ran in an episode of its own ([1, 1]).
    async with serve_gym(Counter) as (_, url):
        version, steps = await _agent_steps(url, "auto")
    assert version in HANDSHAKE_PROTOCOL_VERSIONS and steps == [1, 2]


async def test_a_legacy_agent_keeps_one_episode_per_session() -> None:
    async with serve_gym(Counter) as (_, url):
        assert (await _agent_steps(url, "legacy"))[1] == [1, 2]


async def test_with_stateless_agents_each_call_of_an_agent_is_an_episode() -> None:
    # The switch lets such agents onto the 2026-07-28 wire: no session, so one call per episode.
    gym = mcpgym.GymServer(Counter)
    async with serve_app(gym.http_app(stateless_agents=True)) as base:
        assert await _agent_steps(f"{base}/mcp", "auto") == ("2026-07-28", [1, 1])


async def test_an_agent_pinned_to_the_stateless_wire_is_served_as_it_asks() -> None:
    # No discover probe to answer: served on 2026-07-28, a one-call episode per call (the table in docs/errors.md).
    async with serve_gym(Counter) as (_, url):
        assert await _agent_steps(url, "2026-07-28") == ("2026-07-28", [1, 1])


async def test_mcpgym_clients_stay_on_the_stateless_wire() -> None:
    async with serve_gym(Counter) as (_, url), mcpgym.connect(url) as env:
        assert isinstance(env, mcpgym.AsyncEnv)
        await env.reset()
        first = await env.call_tool("add", {"n": 1})
        second = await env.call_tool("add", {"n": 1})
        assert env.session.protocol_version == "2026-07-28"
    assert (first.info["step"], second.info["step"]) == (1, 2)


ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
MODERN = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
}


async def _post(url: str, body: bytes, headers: dict[str, str]) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=10) as http:
        return await http.post(url, content=body, headers={**MODERN, **headers})


async def test_the_probe_refusal_names_the_versions_to_fall_back_to() -> None:
    probe = {"jsonrpc": "2.0", "id": 7, "method": "server/discover", "params": {"_meta": ENVELOPE}}
    async with serve_gym(Counter) as (_, url):
        for headers in ({"Mcp-Method": "server/discover"}, {}):  # with and without the method header
            response = await _post(url, json.dumps(probe).encode(), headers)
            assert response.status_code == 400
            error = response.json()["error"]
            assert response.json()["id"] == 7 and error["code"] == UNSUPPORTED_PROTOCOL_VERSION
            assert error["data"] == {"supported": list(HANDSHAKE_PROTOCOL_VERSIONS), "requested": "2026-07-28"}


async def test_every_other_modern_request_reaches_the_server_whole() -> None:
    # mcpgym's probe (the Gym extension advertised) is read, then replayed to the SDK: small, and
    # past the probe limit (then passed on unread, its first chunk replayed and the rest streamed).
    gym_caps: dict[str, Any] = {"extensions": {"io.mcpgym/gym": {}}}
    meta = {**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": gym_caps}
    async with serve_gym(Echo) as (_, url):
        for padding in ("", "x" * 200_000):
            probe = {"jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": {"_meta": meta, "pad": padding}}
            response = await _post(url, json.dumps(probe).encode(), {"Mcp-Method": "server/discover"})
            assert response.status_code == 200, response.text
            assert "2026-07-28" in response.json()["result"]["supportedVersions"]
        malformed = await _post(url, b"{not json", {})  # the SDK's own answer, not ours
        assert malformed.status_code == 400 and malformed.json()["error"]["code"] == -32700
