"""The policy contract, and MCP tools in the chat-completions `tools` format.

Layer: contract. A policy is any async callable `(messages, tools) -> AssistantTurn`: the
OpenAI-compatible endpoint (`harness.OpenAIPolicy`) is one; a trainer plugs in its own
generation (vLLM engine, HF `generate`, a scripted baseline) the same way:

    async def policy(messages: list[Message], tools: list[ChatTool]) -> AssistantTurn:
        text = await my_engine.chat(messages, tools)
        return AssistantTurn(content=..., tool_calls=[ToolCall(id=..., name=..., arguments_json=...)])

`messages` is the conversation so far in chat-completions form (system, user, assistant with
`tool_calls`, tool results); `tools` is `openai_tools(await env.list_tools())`. The policy must
not mutate either.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from typing import Any, Protocol

import mcp_types as types

from mcpgym.harness.types import AssistantTurn, ChatTool, Message, ToolCall

EPISODE: ContextVar[str | None] = ContextVar("mcpgym_episode", default=None)
"""The id of the episode a policy is being called for (set by the rollout after each reset), so
a policy can name it to its endpoint: `OpenAIPolicy` sends it as `Mcpgym-Episode`, which joins
its calls to the episode in `mcpgym gateway`'s traces."""


class Policy(Protocol):
    async def __call__(self, messages: list[Message], tools: list[ChatTool], /) -> AssistantTurn: ...


def openai_tools(tools: list[types.Tool]) -> list[ChatTool]:
    """MCP tools as chat-completions function tools: name, description, parameters = inputSchema."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description or "", "parameters": t.input_schema},
        }
        for t in tools
    ]


def tool_call(id: str, name: str, arguments: str | dict[str, Any]) -> ToolCall:
    """A `ToolCall` from the model's raw arguments text (or a dict, for policies that parse
    themselves). Text that is not a JSON object leaves `arguments` None: the harness tells the
    model instead of stepping."""
    if isinstance(arguments, dict):
        return ToolCall(id=id, name=name, arguments_json=json.dumps(arguments), arguments=arguments)
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        parsed = None
    return ToolCall(id=id, name=name, arguments_json=arguments, arguments=parsed if isinstance(parsed, dict) else None)
