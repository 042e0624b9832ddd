"""The new servers as outside clients meet them: the official TypeScript SDK over stdio and HTTP
(tools, prompts, resources, calls), and `mcpgym harness config` entries that launch them."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters

import mcpgym
from mcpgym.harness import config
from tests.conftest import module_over_http
from tests.test_interop import INTEROP, run_client

pytestmark = [pytest.mark.interop, pytest.mark.anyio]

ROOT = Path(__file__).resolve().parent.parent
STEP_KEY = "io.mcpgym/step"  # spelled out: the wire contract as an outside client sees it
CALLS: dict[str, list[dict[str, Any]]] = {
    "mcpgym.servers.blackjack": [{"name": "stand", "arguments": {}}, {"name": "hit", "arguments": {}}],
    "mcpgym.servers.maze": [
        {"name": "look", "arguments": {}},
        {"name": "move", "arguments": {"direction": "sideways"}},
    ],
    "mcpgym.servers.reasoning": [
        {"name": "answer", "arguments": {"text": "x"}},
        {"name": "answer", "arguments": {"text": "y"}},
    ],
}
TOOLS = {
    "mcpgym.servers.blackjack": {"hit", "stand"},
    "mcpgym.servers.maze": {"look", "move"},
    "mcpgym.servers.reasoning": {"get_task", "answer"},
}


def _env() -> dict[str, str]:
    """Children import mcpgym and the servers from this checkout."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}


@pytest.mark.parametrize("kind", ["stdio", "http"])
@pytest.mark.parametrize("module", sorted(CALLS))
async def test_typescript_client_browses_and_plays(module: str, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = json.dumps(CALLS[module])
    if kind == "stdio":
        monkeypatch.setenv("PYTHONPATH", _env()["PYTHONPATH"])  # the client passes its environment on
        report = await run_client([calls, "stdio", sys.executable, "-m", module], script=INTEROP / "servers.mjs")
    else:
        async with module_over_http(module) as url:
            report = await run_client([calls, "http", url], script=INTEROP / "servers.mjs")
    assert report["errors"] == []
    assert set(report["tools"]) == TOOLS[module]
    assert report["prompts"] and len(report["prompts"]) == len(report["resources"])
    message = report["firstPrompt"]["messages"][0]
    assert message["role"] == "user" and message["content"]["type"] == "text" and message["content"]["text"]
    assert report["firstResource"]["contents"][0]["text"]
    first, second = report["calls"]
    assert first["isError"] is False and STEP_KEY in first["_meta"], first
    assert second["isError"] is True and second["_meta"][STEP_KEY]["reward"] == 0.0, second
    if module == "mcpgym.servers.maze":
        assert [c["type"] for c in first["content"]] == ["text", "image"]
        assert first["content"][1]["mimeType"] == "image/png" and first["content"][1]["data"].startswith("iVBOR")
    if module == "mcpgym.servers.blackjack":
        assert first["_meta"][STEP_KEY]["done"] is True and first["structuredContent"]["status"] != "your turn"


@pytest.mark.parametrize("module", sorted(CALLS))
async def test_harness_config_launches_the_server(module: str, tmp_path: Path) -> None:
    entry = config.server_entry("claude-code", module)
    real = module  # the name an installed wheel has too
    assert entry["command"] == sys.executable and entry["args"] == ["-m", real]
    desktop = config.server_entry("claude-desktop", module)
    assert desktop["args"] == ["-m", real] and "type" not in desktop
    env = {**entry.get("env", {}), "PYTHONPATH": _env()["PYTHONPATH"]}
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env, cwd=tmp_path)
    async with mcpgym.connect(params) as client:
        assert {t.name for t in await client.list_tools()} == TOOLS[module]


@pytest.mark.trl  # needs the trl extra (datasets / transformers): run on 3.11 only
def test_the_new_servers_are_in_the_trl_schema_round_trip() -> None:
    from tests.test_trl import SERVERS

    assert {"Blackjack", "Maze", "Reasoning"} <= {cls.__name__ for cls in SERVERS}
