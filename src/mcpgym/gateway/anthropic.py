"""Anthropic Messages (`/v1/messages`) translated to chat completions and back.

Layer: pure functions over JSON bodies. Claude-Code-style harnesses speak Messages; engines
serve chat completions. Translated:

    request   `system` (text or text blocks) -> a system message; text and image (base64 or
              URL) blocks -> content parts; `tool_use` blocks -> the assistant's `tool_calls`
              (input as JSON text); `tool_result` blocks -> `tool` messages (text parts
              joined, `is_error` prefixed "Error: "); `tools` -> function tools
              (`input_schema` -> `parameters`); `tool_choice` auto/any/tool/none; `max_tokens`,
              `temperature`, `top_p`, `top_k`, `stop_sequences` -> `stop`; `stream`.
    reply     content -> a text block, tool calls -> `tool_use` blocks (arguments parsed as
              JSON; text that is not JSON becomes `{"_raw": text}`), finish reasons ->
              `stop_reason` (stop -> end_turn, length -> max_tokens, tool_calls -> tool_use),
              usage -> input/output tokens; a stream is replayed as Messages events.

Not translated (dropped, so a harness that relies on them behaves differently): `thinking` and
`redacted_thinking` blocks and the `thinking` option, `cache_control`, `document` and
`search_result` blocks, citations, server tools (web search, code execution), `metadata`,
`service_tier`, and `stop_sequence` in the reply (an engine does not say which stop matched).
"""

from __future__ import annotations

import json
import time
from typing import Any

from mcpgym.gateway.sse import named_event

_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use"}


class TranslationError(ValueError):
    """A Messages request this gateway cannot translate (the client gets a 400 saying why)."""


def to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """A Messages request as a chat-completions request."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise TranslationError("messages must be a list")
    chat: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        chat.append({"role": "system", "content": _text(system)})
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise TranslationError("each message needs role 'user' or 'assistant'")
        chat += _assistant(message["content"]) if message["role"] == "assistant" else _user(message["content"])
    out: dict[str, Any] = {"model": body.get("model"), "messages": chat}
    if body.get("max_tokens") is not None:
        out["max_tokens"] = body["max_tokens"]
    for key in ("temperature", "top_p", "top_k"):
        if body.get(key) is not None:
            out[key] = body[key]
    if body.get("stop_sequences"):
        out["stop"] = body["stop_sequences"]
    if body.get("tools"):
        out["tools"] = [_tool(t) for t in body["tools"] if isinstance(t, dict) and "input_schema" in t]
        if choice := _tool_choice(body.get("tool_choice")):
            out["tool_choice"] = choice
    return out


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(b.get("text", "") for b in value if isinstance(b, dict) and b.get("type") == "text")
    raise TranslationError("expected text or a list of text blocks")


def _user(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    if not isinstance(content, list):
        raise TranslationError("message content must be text or a list of blocks")
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_result":
            text = _text(block.get("content") or "")
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": block.get("tool_use_id", ""),
                    "content": ("Error: " + text) if block.get("is_error") else text,
                }
            )
        elif kind == "text":
            parts.append({"type": "text", "text": block.get("text", "")})
        elif kind == "image":
            parts.append({"type": "image_url", "image_url": {"url": _image_url(block.get("source") or {})}})
    if parts:  # the tool messages answer the previous turn's calls, so they come first
        out.append({"role": "user", "content": parts[0]["text"] if len(parts) == 1 and "text" in parts[0] else parts})
    return out


def _image_url(source: dict[str, Any]) -> str:
    if source.get("type") == "url":
        return str(source.get("url", ""))
    return f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"


def _assistant(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"role": "assistant", "content": content}]
    if not isinstance(content, list):
        raise TranslationError("message content must be text or a list of blocks")
    text = "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    calls = [
        {
            "id": b.get("id", f"call_{i}"),
            "type": "function",
            "function": {"name": b.get("name", ""), "arguments": json.dumps(b.get("input") or {})},
        }
        for i, b in enumerate(content)
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return [message]


def _tool(tool: dict[str, Any]) -> dict[str, Any]:
    function = {
        "name": tool.get("name", ""),
        "description": tool.get("description", ""),
        "parameters": tool["input_schema"],
    }
    return {"type": "function", "function": function}


def _tool_choice(choice: Any) -> Any:
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind == "any":
        return "required"
    if kind == "tool":
        return {"type": "function", "function": {"name": choice.get("name", "")}}
    return {"auto": "auto", "none": "none"}.get(kind or "")


def from_chat(reply: dict[str, Any], model: str | None) -> dict[str, Any]:
    """A chat completion (its first choice) as a Messages reply."""
    choice = (reply.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    if message.get("content"):
        content.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        content.append(
            {"type": "tool_use", "id": call.get("id", ""), "name": function.get("name", ""), "input": _input(function)}
        )
    usage = reply.get("usage") or {}
    return {
        "id": "msg_" + str(reply.get("id", "")).removeprefix("chatcmpl-"),
        "type": "message",
        "role": "assistant",
        "model": reply.get("model") or model or "",
        "content": content,
        "stop_reason": _STOP.get(choice.get("finish_reason") or "", "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": usage.get("prompt_tokens", 0), "output_tokens": usage.get("completion_tokens", 0)},
    }


def _input(function: dict[str, Any]) -> dict[str, Any]:
    try:
        value = json.loads(function.get("arguments") or "{}")
    except json.JSONDecodeError:
        return {"_raw": function.get("arguments")}
    return value if isinstance(value, dict) else {"_raw": function.get("arguments")}


def stream(message: dict[str, Any]) -> bytes:
    """A Messages reply replayed as the Messages stream's events."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 0}}
    out = [named_event("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(message["content"]):
        empty: dict[str, Any]
        if block["type"] == "text":
            empty, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        else:
            empty = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        out.append(
            named_event("content_block_start", {"type": "content_block_start", "index": i, "content_block": empty})
        )
        out.append(named_event("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}))
        out.append(named_event("content_block_stop", {"type": "content_block_stop", "index": i}))
    end = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    out.append(
        named_event(
            "message_delta", {"type": "message_delta", "delta": end, "usage": {"output_tokens": usage["output_tokens"]}}
        )
    )
    out.append(named_event("message_stop", {"type": "message_stop"}))
    return b"".join(out)


def error(status: int, text: str) -> dict[str, Any]:
    kind = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error"}.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": text}, "created": int(time.time())}
