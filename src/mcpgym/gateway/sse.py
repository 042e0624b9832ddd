"""Server-sent events synthesised from a whole completion, for clients that asked to stream.

Layer: pure functions (a completion body in, the bytes of an event stream out).

The gateway always calls the engine without streaming and replays the finished reply as a
stream. Why: an engine streaming with a tool-call parser sends tool calls as parsed deltas and
(vLLM, SGLang) drops or splits the token ids of the text the parser held back, so the ids of a
streamed turn cannot be trusted to be the whole completion; and a recorder would have to
reassemble deltas per choice. The client loses only time-to-first-token: every event arrives at
once when the engine has finished, which agent harnesses (they act on whole turns) do not notice.
"""

from __future__ import annotations

import time
from typing import Any

from mcpgym.gateway import codec

DONE = b"data: [DONE]\n\n"


def chat_stream(reply: dict[str, Any], include_usage: bool = False) -> bytes:
    """`reply` (a chat completion) as `chat.completion.chunk` events, ending with `[DONE]`."""
    base = {
        "id": reply.get("id", ""),
        "object": "chat.completion.chunk",
        "created": reply.get("created", int(time.time())),
        "model": reply.get("model", ""),
    }
    out = []
    first = True
    for i, choice in enumerate(reply.get("choices") or []):
        index = choice.get("index", i)
        message = choice.get("message") or {}
        delta: dict[str, Any] = {"role": message.get("role", "assistant"), "content": message.get("content") or ""}
        for key in ("reasoning_content", "reasoning"):
            if message.get(key):
                delta[key] = message[key]
        head: dict[str, Any] = {
            "index": index,
            "delta": delta,
            "logprobs": choice.get("logprobs"),
            "finish_reason": None,
        }
        if "token_ids" in choice:
            head["token_ids"] = choice["token_ids"]
        chunk: dict[str, Any] = {**base, "choices": [head]}
        if first and "prompt_token_ids" in reply:  # vLLM sends the prompt's ids on the first chunk
            chunk["prompt_token_ids"] = reply["prompt_token_ids"]
        first = False
        out.append(_event(chunk))
        for n, call in enumerate(message.get("tool_calls") or []):
            function = call.get("function") or {}
            tool = {
                "index": n,
                "id": call.get("id"),
                "type": "function",
                "function": {"name": function.get("name"), "arguments": function.get("arguments") or ""},
            }
            part = {"index": index, "delta": {"tool_calls": [tool]}, "logprobs": None, "finish_reason": None}
            out.append(_event({**base, "choices": [part]}))
        end = {"index": index, "delta": {}, "logprobs": None, "finish_reason": choice.get("finish_reason")}
        out.append(_event({**base, "choices": [end]}))
    if include_usage:
        out.append(_event({**base, "choices": [], "usage": reply.get("usage")}))
    return b"".join(out) + DONE


def _event(data: dict[str, Any]) -> bytes:
    return b"data: " + codec.dumps(data) + b"\n\n"


def named_event(name: str, data: dict[str, Any]) -> bytes:
    """One `event:`-named event, as Anthropic's Messages stream has them."""
    return f"event: {name}\n".encode() + _event(data)
