"""Interop: a client that is not ours (the official TypeScript MCP SDK) against `mcpgym.servers.echo`.

`tests/interop/client.mjs` connects over stdio or streamable HTTP, lists and calls the tools,
and prints one JSON report of what it saw; these tests assert on that report. Its
dependencies are pinned in `tests/interop/package-lock.json`: install them with
`npm ci --prefix tests/interop`. A missing node or node_modules fails the test, never skips it.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import module_over_http

ROOT = Path(__file__).resolve().parent.parent
INTEROP = ROOT / "tests" / "interop"
SDK = INTEROP / "node_modules" / "@modelcontextprotocol" / "sdk"
# Spelled out rather than imported: this is the wire contract as an outside client sees it.
STEP_KEY = "io.mcpgym/step"
INSTALL = "install the pinned TypeScript SDK from the repo root with `npm ci --prefix tests/interop`"

pytestmark = [pytest.mark.interop, pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["stdio", "http"])
async def transport(request: pytest.FixtureRequest) -> AsyncIterator[list[str]]:
    """The transport arguments for client.mjs; for HTTP, a live `python -m mcpgym.servers.echo --http`."""
    if request.param == "stdio":
        yield ["stdio", sys.executable, "-m", "mcpgym.servers.echo"]
    else:
        async with module_over_http("mcpgym.servers.echo") as url:
            yield ["http", url]


async def test_typescript_client(transport: list[str]) -> None:
    report = await run_client(transport)
    print(json.dumps(report, indent=2))  # shown by pytest only when the test fails
    assert report["errors"] == [], "the TS client reported out-of-band errors"
    assert_negotiation(report, http=transport[0] == "http")
    assert_tools(report["tools"])
    assert_calls(report)


def assert_negotiation(report: dict[str, Any], *, http: bool) -> None:
    """The TS SDK 1.x only speaks the legacy `initialize` handshake; we must accept its offer."""
    assert report["wire"][0]["message"]["method"] == "initialize"
    assert report["negotiated"] == report["offered"]
    if http:
        assert report["httpProtocolHeader"] == report["negotiated"]
        assert report["sessionId"], "the server issued no Mcp-Session-Id"
        failed = [h for h in report["http"] if h["status"] >= 400]
        assert failed == [], f"HTTP requests the server refused: {failed}"
        assert report["http"][-1]["method"] == "DELETE"


def assert_tools(tools: dict[str, Any]) -> None:
    assert set(tools) == {"echo_message", "repeat"}
    for schema in tools.values():
        assert schema["type"] == "object"
        assert schema["properties"]["message"]["type"] == "string"
        assert "message" in schema["required"]
    times = tools["repeat"]["properties"]["times"]
    assert (times["type"], times["minimum"], times["maximum"]) == ("integer", 1, 10)
    assert "times" not in tools["repeat"].get("required", [])


def assert_calls(report: dict[str, Any]) -> None:
    assert text_of(report["echo"]) == "hi"
    assert text_of(report["repeat"]) == "ab ab ab"
    bad = report["badType"]
    assert bad.get("isError") is True, f"a wrongly typed argument should be an isError result: {bad}"
    assert "times" in bad["content"][0]["text"]
    unknown = report["unknown"].get("error")
    assert unknown is not None, f"an unknown tool should be a JSON-RPC error: {report['unknown']}"
    assert unknown["code"] == -32602
    assert "no_such_tool" in unknown["message"]
    for result in (report["echo"], report["repeat"], bad):
        step = result["_meta"][STEP_KEY]
        assert isinstance(step["reward"], int | float) and isinstance(step["done"], bool)


def text_of(result: dict[str, Any]) -> str:
    assert result.get("isError") is False, f"tool call failed: {result}"
    assert [c["type"] for c in result["content"]] == ["text"]
    return str(result["content"][0]["text"])


async def run_client(transport: list[str], script: Path = INTEROP / "client.mjs") -> dict[str, Any]:
    """Run client.mjs (or another script here) to completion (bounded) and parse its one JSON document."""
    node = shutil.which("node")
    if node is None:
        pytest.fail(f"node is not on PATH: install Node.js 20+, then {INSTALL}")
    if not SDK.is_dir():
        pytest.fail(f"{SDK.relative_to(ROOT)} is missing: {INSTALL}")
    with anyio.fail_after(60):
        done = await anyio.run_process([node, str(script), *transport], cwd=ROOT, check=False)
    stderr = done.stderr.decode(errors="replace")
    if done.returncode != 0:
        pytest.fail(f"{script.name} {transport[0]} exited with {done.returncode}:\n{stderr}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report
