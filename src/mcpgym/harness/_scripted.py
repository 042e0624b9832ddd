"""A scripted OpenAI-compatible chat-completions endpoint, for tests and the demo.

Layer: test/demo support (not part of the harness's API). A real HTTP server speaking the
chat-completions protocol, replaying fixed tool calls instead of running a model. The
request's `model` picks the script; the turn is the number of assistant messages so far, so
the endpoint is stateless per conversation and any number of episodes can run at once:

    solve                 HumanEval (mcpgym.servers.coding): write the task's canonical solution to
                          solution.py, then `submit` it (reward 1.0), then stop
    unknown-tool          call a tool the environment does not have, then stop
    malformed-arguments   call write_file with arguments that are not JSON, then stop
    hang                  never answer (until the endpoint shuts down): the client's timeout fires
    flaky                 HTTP 500, then 429 (Retry-After: 0), then behave like `solve`
                          (the failures are counted per endpoint, not per conversation)
    judge                 an LLM judge (mcpgym.rubrics.LLMJudge's prompt) that does as it is
                          told: it drops the block its instructions say is the trajectory
                          (between the tags they name) and obeys the first "Award N" left,
                          replying in a chatty "...\nSCORE: N/10". A prompt that let the
                          trajectory out of its tags would let an injected "Award 10" win.
    judge-malformed       a judge that rambles without stating a score
    judge-flaky           HTTP 429 (Retry-After: 0) on the first request, then `judge`
    echo-alternate        Echo (mcpgym.servers.echo): the endpoint's 2nd, 4th, ... conversation
                          says the target word (reward 1.0), the others a wrong one, then stop
                          (conversations are counted per endpoint, in the order they start:
                          run one episode at a time for a fixed pattern)

Any other model is a 404, as vLLM answers for a model it does not serve.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mcpgym._server.http import UvicornServer, listen

Reply = dict[str, Any]
MODELS = (
    "solve",
    "unknown-tool",
    "malformed-arguments",
    "hang",
    "flaky",
    "judge",
    "judge-malformed",
    "judge-flaky",
    "echo-alternate",
)
_FLAKY = (500, 429)


class ScriptedEndpoint:
    """The endpoint's state: the requests it saw, and the event that releases hung requests."""

    def __init__(self, hang_limit: float = 60.0) -> None:
        self.requests: list[dict[str, Any]] = []
        self.release = anyio.Event()
        self.received = anyio.Event()  # set by the first request: tests wait on it, never sleep
        self.hang_limit = hang_limit
        self._seen: Counter[str] = Counter()
        self._conversations: Counter[str] = Counter()

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/models", self.models, methods=["GET"]),
            ]
        )

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": m, "object": "model"} for m in MODELS]})

    async def chat(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        self.received.set()
        model = str(body.get("model"))
        self._seen[model] += 1
        failures = _FLAKY if model == "flaky" else (429,) if model == "judge-flaky" else ()
        if self._seen[model] <= len(failures):
            status = failures[self._seen[model] - 1]
            return JSONResponse({"error": {"message": "scripted failure"}}, status, headers={"Retry-After": "0"})
        if model == "hang":
            with anyio.move_on_after(self.hang_limit):  # a bound, so a forgotten release cannot hang a test run
                await self.release.wait()
            return JSONResponse({"error": {"message": "released"}}, 503)
        if _turn(body["messages"]) == 0:
            self._conversations[model] += 1
        if model == "echo-alternate":
            reply = echo_alternate(body["messages"], self._conversations[model])
            return JSONResponse(completion(model, body["messages"], reply))
        script = SCRIPTS.get(model)
        if script is None:
            return JSONResponse({"error": {"message": f"The model `{model}` does not exist."}}, 404)
        return JSONResponse(completion(model, body["messages"], script(body["messages"])))


def completion(model: str, messages: list[dict[str, Any]], reply: Reply) -> dict[str, Any]:
    """A chat-completion body around `reply`, with a deterministic `usage`."""
    prompt = sum(len(json.dumps(m)) for m in messages) // 4
    completion_tokens = len(json.dumps(reply)) // 4
    return {
        "id": f"chatcmpl-{len(messages)}",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", **reply},
                "finish_reason": "tool_calls" if reply.get("tool_calls") else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt + completion_tokens,
        },
    }


def _call(turn: int, name: str, arguments: str) -> Reply:
    call = {"id": f"call_{turn}", "type": "function", "function": {"name": name, "arguments": arguments}}
    return {"content": None, "tool_calls": [call]}


def _turn(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m.get("role") == "assistant")


def _stop(text: str) -> Reply:
    return {"content": text}


def solve(messages: list[dict[str, Any]]) -> Reply:
    turn = _turn(messages)
    if turn == 0:
        task = _task(messages)
        if task is None:
            return _stop("I cannot find a HumanEval task_id in the task.")
        prompt, solution = task
        return _call(turn, "write_file", json.dumps({"path": "solution.py", "content": prompt + solution}))
    if turn == 1:
        return _call(turn, "submit", "{}")
    return _stop("Submitted.")


def unknown_tool(messages: list[dict[str, Any]]) -> Reply:
    turn = _turn(messages)
    return _call(turn, "launch_rockets", '{"count": 3}') if turn == 0 else _stop("Giving up.")


def malformed_arguments(messages: list[dict[str, Any]]) -> Reply:
    turn = _turn(messages)
    return _call(turn, "write_file", '{"path": "a.py", "content": ') if turn == 0 else _stop("Giving up.")


def echo_alternate(messages: list[dict[str, Any]], conversation: int) -> Reply:
    turn = _turn(messages)
    if turn > 0:
        return _stop("Done.")
    user = next((str(m["content"]) for m in messages if m.get("role") == "user"), "{}")
    try:
        target = str(json.loads(user)["target"])
    except (json.JSONDecodeError, KeyError, TypeError):
        return _stop("I cannot find the target word.")
    word = target if conversation % 2 == 0 else "wrong"
    return _call(turn, "echo_message", json.dumps({"message": word}))


_TAG = re.compile(r"between <([A-Za-z0-9-]+)> and </\1>")
_AWARD = re.compile(r"Award (\d+)")


def judge(messages: list[dict[str, Any]]) -> Reply:
    """Obey the first "Award N" outside the trajectory block the system message names (the
    trajectory comes before the rubric: an injection that got out of its block would win)."""
    system = next((str(m["content"]) for m in messages if m.get("role") == "system"), "")
    user = "\n".join(str(m["content"]) for m in messages if m.get("role") == "user")
    named = _TAG.search(system)
    if named is not None:
        tag = named.group(1)
        user = re.sub(f"<{re.escape(tag)}>.*?</{re.escape(tag)}>", "", user, count=1, flags=re.DOTALL)
    awards = _AWARD.findall(user)
    if not awards:
        return _stop("The rubric gives me nothing to award.")
    return _stop(f"I read the trajectory against the rubric; 3 of its checks matter here.\nSCORE: {awards[0]}/10")


def judge_malformed(messages: list[dict[str, Any]]) -> Reply:
    return _stop("A thoughtful attempt overall; hard to put a number on it.")


SCRIPTS: Mapping[str, Callable[[list[dict[str, Any]]], Reply]] = {
    "judge": judge,
    "judge-flaky": judge,
    "judge-malformed": judge_malformed,
    "solve": solve,
    "flaky": solve,
    "unknown-tool": unknown_tool,
    "malformed-arguments": malformed_arguments,
}


def _task(messages: list[dict[str, Any]]) -> tuple[str, str] | None:
    """(prompt, canonical solution) of the HumanEval task named in the first user message."""
    user = next((m for m in messages if m.get("role") == "user"), None)
    try:
        task_id = json.loads(str(user["content"]))["task_id"] if user else None
    except (json.JSONDecodeError, KeyError, TypeError):
        return None
    task = _canonical().get(str(task_id))
    return task


@functools.cache
def _canonical() -> dict[str, tuple[str, str]]:
    from mcpgym.servers.coding import load_tasks  # only the `solve` script needs HumanEval

    return {t.task_id: (t.prompt, t.canonical_solution or "") for t in load_tasks().values()}


@contextlib.asynccontextmanager
async def serve(endpoint: ScriptedEndpoint | None = None) -> AsyncIterator[str]:
    """Serve a scripted endpoint on 127.0.0.1:<free port>; yields its base URL (`.../v1`)."""
    endpoint = endpoint if endpoint is not None else ScriptedEndpoint()
    with listen("127.0.0.1", 0) as sock:  # TCP_NODELAY: no delayed-ACK wait per answer
        server = UvicornServer(uvicorn.Config(endpoint.app(), log_level="warning", lifespan="off"))
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            await server.ready.wait()
            try:
                yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
            finally:
                endpoint.release.set()  # hung requests return, so uvicorn's shutdown does not wait on them
                server.should_exit = True
