"""The harness examples run as written (the model, where one is needed, is the scripted endpoint)."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from mcpgym import harness
from mcpgym.harness import _scripted
from mcpgym.servers.coding import load_tasks
from tests.conftest import serve_app

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


async def run(*argv: str, cwd: Path = REPO) -> str:
    result = await anyio.run_process([sys.executable, *argv], cwd=cwd, check=False)
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode()


async def test_rl_loop_coding_runs_in_process_and_over_http() -> None:
    out = await run(str(EXAMPLES / "rl_loop_coding.py"), "--episodes", "2", "--epsilon", "0")
    assert out.count("return=1.0") == 4  # two episodes per door, all solved with epsilon 0
    assert "[in-process] mean return 1.00" in out and "[http] mean return 1.00" in out
    assert "the server recorded 2 episodes: total reward 2.0" in out


async def test_rollout_example_runs_its_own_scripted_endpoint(tmp_path: Path) -> None:
    out = await run(str(EXAMPLES / "rollout_local_endpoint.py"), "--episodes", "2", "--out", str(tmp_path / "r.jsonl"))
    assert "mean reward 1.000; 0 failed" in out
    assert [t.reward for t in harness.read_rollout(tmp_path / "r.jsonl")] == [1.0, 1.0]


async def test_rollout_example_against_a_given_endpoint(tmp_path: Path) -> None:
    endpoint = _scripted.ScriptedEndpoint()
    async with serve_app(endpoint.app()) as base:
        out = await run(
            str(EXAMPLES / "rollout_local_endpoint.py"),
            "--base-url",
            f"{base}/v1",
            "--model",
            "solve",
            "--episodes",
            "2",
            "--out",
            str(tmp_path / "r.jsonl"),
        )
    assert "started the scripted endpoint" not in out and "mean reward 1.000" in out
    assert {r["model"] for r in endpoint.requests} == {"solve"} and len(endpoint.requests) == 4


async def test_claude_code_walkthrough(tmp_path: Path) -> None:
    """Run the walkthrough's `bash` blocks in a scratch directory, then play the episode Claude
    would play: a plain MCP client launched from the written .mcp.json, submitting the answer."""
    text = (EXAMPLES / "claude_code_coding.md").read_text()
    bin_dir = str(Path(sys.executable).parent) + "/"
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    setup, score = (b.replace(".venv/bin/", bin_dir) for b in blocks)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    await anyio.run_process(["bash", "-euo", "pipefail", "-c", setup], cwd=tmp_path, env=env)

    entry = json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["coding"]
    assert entry["args"][:2] == ["-m", "mcpgym.servers.coding"]  # the name a wheel install has too
    runs = tmp_path / "runs"
    assert entry["args"][2:] == ["--record", str(runs / "claude"), "--tasks", str(runs / "task.jsonl")]
    task = load_tasks()["HumanEval/0"]

    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"], cwd="/")
    async with Client(params) as agent:  # like Claude Code: no reset, the connection is the episode
        brief = await agent.call_tool("get_task", {})
        assert brief.structured_content is not None and brief.structured_content["prompt"] == task.prompt
        result = await agent.call_tool("submit", {"code": task.prompt + (task.canonical_solution or "")})
    assert not result.is_error

    scored = await anyio.run_process(["bash", "-c", score], cwd=tmp_path, env=env)
    assert "Coding reward 1.0 ['get_task', 'submit']" in scored.stdout.decode()
