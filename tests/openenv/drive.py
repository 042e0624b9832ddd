"""OpenEnv's own clients against a server: run by tests/test_openenv_serve.py in tests/openenv/.venv.

`python drive.py SCENARIO BASE_URL [ARG]` prints one JSON document: what the clients saw. It
imports only `openenv` (the real package, pinned), never mcpgym: the clients are used exactly as
OpenEnv's documentation uses them.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from openenv import GenericEnvClient
from openenv.core.env_server.mcp_types import CallToolAction, ListToolsAction
from openenv.core.mcp_client import MCPToolClient


def dump(value: Any) -> Any:
    return value.model_dump(mode="json") if hasattr(value, "model_dump") else value


async def mcp_async(url: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async with MCPToolClient(base_url=url) as env:
        reset = await env.reset(seed=7)
        tools = [t.name for t in await env.list_tools()]
        called = await env.call_tool(tool, **arguments)
        step = await env.step(CallToolAction(tool_name=tool, arguments=arguments))
        listed = await env.step(ListToolsAction())
        state = await env.state()
        try:
            await env.call_tool("no_such_tool")
            unknown = None
        except RuntimeError as exc:
            unknown = str(exc)
        return {
            "reset": dump(reset.observation),
            "tools": tools,
            "called": called,
            "step": {"observation": dump(step.observation), "reward": step.reward, "done": step.done},
            "listed": [t.name for t in listed.observation.tools],
            "state": dump(state),
            "unknown": unknown,
        }


def mcp_sync(url: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    with MCPToolClient(base_url=url).sync() as env:
        env.reset()
        step = env.step(CallToolAction(tool_name=tool, arguments=arguments))
        return {
            "result": dump(step.observation.result),
            "reward": step.reward,
            "done": step.done,
            "tools": len(env.list_tools()),
        }


async def generic_async(url: str, tool: str, arguments: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    async with GenericEnvClient(base_url=url) as env:
        reset = await env.reset(seed=3, **options)
        steps = []
        for _ in range(2):
            step = await env.step({"type": "call_tool", "tool_name": tool, "arguments": arguments})
            steps.append({"observation": step.observation, "reward": step.reward, "done": step.done})
        bare = await env.step({"tool_name": tool, "arguments": arguments})  # OpenEnv's action_cls default
        try:
            await env.step({"nonsense": 1})
            invalid = None
        except RuntimeError as exc:
            invalid = str(exc)
        return {
            "reset": reset.observation,
            "steps": steps,
            "bare_done": bare.done,
            "state": await env.state(),
            "invalid": invalid,
        }


def generic_sync(url: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    with GenericEnvClient(base_url=url).sync() as env:
        first = env.reset(seed=5).observation
        again = env.reset(seed=5).observation
        step = env.step({"type": "call_tool", "tool_name": tool, "arguments": arguments})
        return {"first": first, "again": again, "reward": step.reward, "done": step.done, "state": env.state()}


def headers(url: str, token: str) -> dict[str, Any]:
    """With a token: OpenEnv's clients pass it as a header (`headers=`), both over /ws and /mcp."""
    out: dict[str, Any] = {}
    try:
        with GenericEnvClient(base_url=url).sync() as env:
            env.reset()
        out["without"] = "connected"
    except Exception as exc:
        out["without"] = f"{type(exc).__name__}: {exc}"
    auth = {"Authorization": f"Bearer {token}"}
    with GenericEnvClient(base_url=url, headers=auth).sync() as env:
        out["generic"] = env.reset().done
    with MCPToolClient(base_url=url, headers=auth).sync() as env:
        env.reset()
        out["tools"] = [t.name for t in env.list_tools()]
    return out


def main() -> None:
    scenario, url = sys.argv[1], sys.argv[2]
    extra = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    if scenario == "headers":
        print(json.dumps(headers(url, extra["token"])))
        return
    tool, arguments = extra.get("tool", "echo_message"), extra.get("arguments", {"message": "hi"})
    runs = {
        "mcp": lambda: asyncio.run(mcp_async(url, tool, arguments)),
        "mcp-sync": lambda: mcp_sync(url, tool, arguments),
        "generic": lambda: asyncio.run(generic_async(url, tool, arguments, extra.get("reset", {}))),
        "generic-sync": lambda: generic_sync(url, tool, arguments),
    }
    print(json.dumps(runs[scenario]()))


if __name__ == "__main__":
    main()
