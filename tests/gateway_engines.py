"""Engines the gateway tests put behind it: a scripted one for edge cases, and a real model.

`ScriptedEngine` renders messages with a toy template whose token ids are character codes
(so a prompt extends the previous one exactly when the client sends back what the model said)
and answers from a script: a reply text, tool calls, an HTTP error, or a hang until released.
`ModelEngine` serves the random-initialised Qwen2 and byte-level tokenizer the GRPO examples
build (examples/grpo_trl_echo.py), sampling with `generate` and returning vLLM's token fields.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

EOS = 2
ROLES = {"system": 1000, "user": 1001, "assistant": 1002, "tool": 1003}


def render(message: dict[str, Any]) -> list[int]:
    """The toy template: a role id, the text as character codes, the end-of-turn id."""
    text = message.get("content") or ""
    if not isinstance(text, str):
        text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
    for call in message.get("tool_calls") or []:
        text += "<call>" + call["function"]["name"] + call["function"]["arguments"]
    return [ROLES[message["role"]], *(ord(c) for c in text), EOS]


def prompt_ids(messages: list[dict[str, Any]]) -> list[int]:
    return [i for m in messages for i in render(m)] + [ROLES["assistant"]]


@dataclass
class Step:
    """One scripted answer: `text` and `calls` ([(name, arguments JSON)]), or an HTTP `status`, or `hang`.

    `think` is reasoning the model generates before its text and the reply's message leaves out
    (as an engine's reasoning parser does, into `reasoning_content`), so the next prompt, rendered
    from the messages, no longer extends the tokens generated: the prompts diverge."""

    text: str = "ok"
    calls: list[tuple[str, str]] = field(default_factory=list)
    think: str = ""
    status: int = 200
    hang: bool = False
    n: int = 1


@dataclass
class ScriptedEngine:
    script: list[Step] = field(default_factory=list)
    decide: Callable[[dict[str, Any]], Step] | None = None
    """Answers from the request itself when set (concurrent episodes do not share one script)."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    release: anyio.Event = field(default_factory=anyio.Event)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/models", self.models, methods=["GET"]),
            ]
        )

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "scripted", "object": "model"}]})

    async def chat(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        step = self.decide(body) if self.decide else self.script.pop(0) if self.script else Step()
        if step.hang:
            await self.release.wait()
        if step.status != 200:
            return JSONResponse({"error": {"message": "scripted failure"}}, status_code=step.status)
        return JSONResponse(self.reply(body, step))

    def reply(self, body: dict[str, Any], step: Step) -> dict[str, Any]:
        prompt = prompt_ids(body["messages"])
        choices = []
        for index in range(max(step.n, body.get("n") or 1)):
            text = step.text if index == 0 else f"{step.text} #{index}"
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if step.calls:
                message["tool_calls"] = [
                    {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": arguments}}
                    for i, (name, arguments) in enumerate(step.calls)
                ]
            generated = {**message, "content": f"<think>{step.think}</think>{text}"} if step.think else message
            ids = render(generated)[1:]  # what the model generated: the turn after the role id
            if step.think:
                message["reasoning_content"] = step.think
            choice: dict[str, Any] = {
                "index": index,
                "message": message,
                "finish_reason": "tool_calls" if step.calls else "stop",
            }
            if body.get("logprobs"):
                choice["logprobs"] = {"content": [{"token": str(i), "logprob": -0.5, "top_logprobs": []} for i in ids]}
            if body.get("return_token_ids"):
                choice["token_ids"] = ids
            choices.append(choice)
        reply: dict[str, Any] = {
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or "scripted",
            "choices": choices,
            "usage": {"prompt_tokens": len(prompt), "completion_tokens": 3, "total_tokens": len(prompt) + 3},
        }
        if body.get("return_token_ids"):
            reply["prompt_token_ids"] = prompt
        return reply


class ModelEngine:
    """A real (tiny, random) model behind an OpenAI-compatible route that returns vLLM's token fields."""

    def __init__(self, tokenizer: Any, model: Any, *, max_new_tokens: int = 16, seed: int = 0) -> None:
        self.tokenizer, self.model = tokenizer, model
        self.max_new_tokens, self.seed = max_new_tokens, seed
        self.calls = 0
        self.lock = threading.Lock()  # one generate at a time: the model is shared with its caller

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"])])

    async def chat(self, request: Request) -> Response:
        body = await request.json()
        text = self.tokenizer.apply_chat_template(
            body["messages"], tools=body.get("tools") or None, add_generation_prompt=True, tokenize=False
        )
        prompt = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        limit = body.get("max_tokens") or self.max_new_tokens
        ids, logprobs = await anyio.to_thread.run_sync(self.generate, prompt, limit)
        content = self.tokenizer.decode(ids, skip_special_tokens=True)
        finish = "stop" if ids and ids[-1] == self.tokenizer.eos_token_id else "length"
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": finish,
        }
        if body.get("logprobs"):
            choice["logprobs"] = {
                "content": [
                    {"token": self.tokenizer.decode([i]), "logprob": lp, "top_logprobs": []}
                    for i, lp in zip(ids, logprobs, strict=True)
                ]
            }
        reply: dict[str, Any] = {
            "id": f"chatcmpl-model-{self.calls}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or "tiny",
            "choices": [choice],
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(ids),
                "total_tokens": len(prompt) + len(ids),
            },
        }
        if body.get("return_token_ids"):
            reply["prompt_token_ids"] = prompt
            choice["token_ids"] = ids
        return Response(json.dumps(reply), media_type="application/json")

    def generate(self, prompt: list[int], limit: int) -> tuple[list[int], list[float]]:
        import torch

        with self.lock, torch.no_grad():
            self.calls += 1
            torch.manual_seed(self.seed + self.calls)
            inputs = torch.tensor([prompt])
            out = self.model.generate(
                inputs,
                attention_mask=torch.ones_like(inputs),
                do_sample=True,
                top_k=0,
                top_p=1.0,
                temperature=1.0,
                max_new_tokens=limit,
                return_dict_in_generate=True,
                output_scores=True,
            )
            ids = out.sequences[0, len(prompt) :].tolist()
            logprobs = [float(torch.log_softmax(out.scores[i][0].float(), -1)[t]) for i, t in enumerate(ids)]
        return ids, logprobs
