"""OpenEnv environments as mcpgym environments: what the `openenv:` target serves.

Layer: an environment built on the public `Environment` API (plus the wrap package's
pass-through `ProxyTool`), over `_remote`'s client of OpenEnv's `/ws`. Each mcpgym episode is
one OpenEnv session (one WebSocket, one environment instance on the OpenEnv server), held for
the episode by its host. rfcs/0017-bridges.md, "OpenEnv":

- an MCP-based OpenEnv environment (its action is `CallToolAction`): its tools, as it lists them
  (`ListToolsAction`), each call a `call_tool` step, its result's content as the MCP result;
- an action-typed one: one tool, `act`, whose input schema is its Action model (from `/schema`),
  each call a step with that action, the observation as structured content and JSON text.

Reward and done are OpenEnv's `reward` and `done` fields, through the step stamp
(`self.reward`, `self.finish`); nothing the OpenEnv server puts in a result's `meta` can stamp one.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, cast

import anyio
import httpx2
import mcp_types as types
from pydantic import ValidationError

from mcpgym._core.errors import ToolError
from mcpgym._episode.environment import Environment, Reset
from mcpgym._wrap._proxy import _proxy_tool
from mcpgym.bridges.openenv._remote import RemoteError, Session

ACT = "act"
"""The one tool of an action-typed OpenEnv environment."""

Kind = Literal["mcp", "action"]


@dataclass(frozen=True)
class Remote:
    """Where one environment class's episodes run: an OpenEnv server, and how it is driven."""

    url: str
    kind: Kind
    headers: dict[str, str] | None = None


class OpenEnvEnvironment(Environment):
    """Base of the classes `environment_class` builds (one per OpenEnv server)."""

    remote: ClassVar[Remote]
    session: Session

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Reset:
        self.session = await self.hold(Session.open(self.remote.url, headers=self.remote.headers))
        data = dict(options or {})
        if seed is not None:
            data["seed"] = seed
        try:
            payload = await self.session.send("reset", data)
        except RemoteError as exc:
            raise RuntimeError(f"the OpenEnv server refused the reset: {exc}") from None
        info = {"metadata": payload["metadata"]} if payload.get("metadata") else {}
        return Reset(observation=payload.get("observation"), info=info)

    async def forward(self, tool_name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Every tool call: one OpenEnv step."""
        if self.remote.kind == "mcp":
            action: dict[str, Any] = {"type": "call_tool", "tool_name": tool_name, "arguments": arguments}
        else:
            action = arguments
        try:
            payload = await self.session.send("step", action)
        except RemoteError as exc:  # e.g. VALIDATION_ERROR: the action does not fit the model
            raise ToolError(f"The OpenEnv environment refused the action ({exc.code}): {exc}") from None
        reward, observation = payload.get("reward"), payload.get("observation") or {}
        if isinstance(reward, int | float) and not isinstance(reward, bool):
            self.reward(float(reward))
        if payload.get("done") is True:
            self.finish()
        return mcp_result(observation) if self.remote.kind == "mcp" else json_result(observation)


def mcp_result(observation: dict[str, Any]) -> types.CallToolResult:
    """A `CallToolObservation` as the MCP result it carries (its `error`: a failed call)."""
    error = observation.get("error")
    if isinstance(error, dict):
        raise ToolError(f"{error.get('message', 'the tool call failed')} ({error.get('error_type', 'error')})")
    result = observation.get("result")
    if isinstance(result, dict) and isinstance(result.get("content"), list):
        content = [
            {k: v for k, v in item.items() if v is not None} for item in result["content"] if isinstance(item, dict)
        ]
        try:
            return types.CallToolResult.model_validate(
                {
                    "content": content,
                    "structuredContent": result.get("structured_content"),
                    "isError": bool(result.get("is_error")),
                }
            )
        except ValidationError:
            pass  # not MCP content after all: as JSON, below
    return json_result(result)


def json_result(value: Any) -> types.CallToolResult:
    """An observation as MCP content: JSON text, and the object itself as structured content."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    structured = {k: v for k, v in value.items() if k not in ("reward", "done")} if isinstance(value, dict) else None
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=structured)


def environment_class(url: str, *, headers: dict[str, str] | None = None) -> type[Environment]:
    """An Environment class over the OpenEnv server at `url` (its tools read once, now)."""
    kind, tools, name, description = probe(url, headers)
    namespace: dict[str, Any] = {
        "remote": Remote(url, kind, headers),
        "__doc__": description or f"The OpenEnv environment at {url}.",
        "__module__": __name__,
        "__qualname__": name,
    }
    cls = cast(type[OpenEnvEnvironment], type(name, (OpenEnvEnvironment,), namespace))
    cls.__mcpgym_tools__ = {tool.name: _proxy_tool(tool) for tool in tools}
    return cls


def probe(url: str, headers: dict[str, str] | None) -> tuple[Kind, list[types.Tool], str, str]:
    """The server's kind, tools, name and description: `/schema` and `/metadata`, then (MCP-based)
    a `list_tools` step in a session of its own. On a loop of its own in a worker thread, so a
    target resolves with or without an event loop running (as `mcpgym.wrap` probes its server)."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(anyio.run(_probe, url, headers))
        except BaseException as exc:  # handed to the caller's thread just below
            outcome.append(exc)

    thread = threading.Thread(target=run, name="mcpgym-openenv-probe")
    thread.start()
    thread.join()
    if isinstance(outcome[0], BaseException):
        raise RuntimeError(f"could not read the OpenEnv environment at {url}: {outcome[0]}") from outcome[0]
    found: tuple[Kind, list[types.Tool], str, str] = outcome[0]
    return found


async def _probe(url: str, headers: dict[str, str] | None) -> tuple[Kind, list[types.Tool], str, str]:
    base = url.rstrip("/").removesuffix("/mcp")
    async with httpx2.AsyncClient(headers=headers, timeout=30) as client:
        schema = (await client.get(f"{base}/schema")).raise_for_status().json()
        meta = (await client.get(f"{base}/metadata")).raise_for_status().json()
    name = _class_name(str(meta.get("name") or "Environment"))
    description = str(meta.get("description") or "")
    action = schema.get("action") or {}
    if not _is_mcp(action):
        return "action", [_act_tool(action)], name, description
    async with Session.open(base, headers=headers) as session:
        listed = await session.send("step", {"type": "list_tools"})
    entries = (listed.get("observation") or {}).get("tools") or []
    tools = [
        types.Tool(name=t["name"], description=t.get("description") or None, input_schema=t.get("input_schema") or {})
        for t in entries
    ]
    return "mcp", tools, name, description


def _is_mcp(action_schema: dict[str, Any]) -> bool:
    """OpenEnv's MCP action (`CallToolAction`), or its base `Action` (MCP actions accepted too)."""
    return action_schema.get("title") in ("CallToolAction", "ListToolsAction", "Action") or "tool_name" in (
        action_schema.get("properties") or {}
    )


def _act_tool(action_schema: dict[str, Any]) -> types.Tool:
    """The one tool of an action-typed environment: its Action model is the input schema (less
    OpenEnv's own `metadata` field, which is for the framework, not the agent)."""
    schema = dict(action_schema)
    properties = {k: v for k, v in (schema.get("properties") or {}).items() if k != "metadata"}
    schema["properties"] = properties
    schema.setdefault("type", "object")
    description = str(action_schema.get("description") or "Take one step: the action, as the environment's model.")
    return types.Tool(name=ACT, description=description, input_schema=schema)


def _class_name(name: str) -> str:
    words = re.sub(r"[^0-9A-Za-z]+", " ", name).split()
    joined = "".join(w[:1].upper() + w[1:] for w in words) or "Environment"
    return ("OpenEnv" + joined)[:64] if not joined.startswith("OpenEnv") else joined[:64]
