"""The gateway's ASGI app: an OpenAI-compatible reverse proxy that records what the model generated.

Layer: transport (Starlette routes; `upstream`, the client to the engine, is the hop the
gateway adds to every model call). The pure parts are `engine` (what to ask, what to hide),
`sse`, `anthropic` and `record`.

    POST /v1/chat/completions        to the engine (never streaming; a streaming client gets SSE replayed)
    POST /v1/messages                Anthropic Messages, translated to chat completions
    GET  /v1/models                  passed through
    /episodes/<episode_id>/v1/...    the same routes, joined to that episode
    POST /mcpgym/keys                register a per-episode bearer key: {"episode_id": ..., "key": ...?}

A call joins an episode by its path, else its `Mcpgym-Episode` header, else its bearer key when
one was registered (for a harness whose base URL and headers cannot change per episode, but
whose API key can). With `token`, a client must present it or a registered key. The client's
own key is never sent upstream unless `forward_key`; `upstream_key` is sent instead when set.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mcpgym._core.protocol import EPISODE_HEADER
from mcpgym.gateway import anthropic, codec, engine, sse, upstream
from mcpgym.gateway.record import Recorder

TOKENS_HEADER = "Mcpgym-Tokens"
"""`Mcpgym-Tokens: 1` keeps the token fields in the reply (`harness.OpenAIPolicy` sends it)."""
_MESSAGES_FIELDS = ("messages", "tools", "stream", "stream_options")


@dataclass
class GatewayConfig:
    """How the gateway reaches its engine and what it records (`mcpgym gateway`'s flags)."""

    upstream: str
    """The engine's OpenAI base URL, API prefix included: `http://127.0.0.1:8000/v1`."""
    engine: engine.Engine = "vllm"
    record: str | Path | None = None
    token: str | None = None
    upstream_key: str | None = None
    forward_key: bool = False
    timeout: float = 600.0
    """Seconds to wait for the engine's reply; past it the client gets a 504 (recorded)."""


@dataclass
class _Episode:
    turns: int = 0
    last_hash: str = ""


@dataclass
class Gateway:
    """The proxy's state: the engine client, the recorder, each episode's turn count and the keys."""

    config: GatewayConfig
    episodes: dict[str | None, _Episode] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)
    recorder: Recorder | None = None
    client: upstream.Upstream | None = None

    def __post_init__(self) -> None:
        if not self.config.upstream.startswith(("http://", "https://")):
            raise ValueError(f"--upstream must start with http:// or https://, got {self.config.upstream!r}")
        key = self.config.upstream_key or ""
        if any(c in key for c in "\r\n\0") or not key.isascii():
            raise ValueError("the upstream key may hold ASCII text only (no CR, LF or NUL)")
        self.base = self.config.upstream.rstrip("/")
        if self.config.record is not None:
            self.recorder = Recorder(self.config.record)

    def app(self) -> Starlette:
        routes = []
        for prefix in ("", "/episodes/{episode_id}"):
            routes += [
                Route(prefix + "/v1/chat/completions", self.chat, methods=["POST"]),
                Route(prefix + "/v1/messages", self.messages, methods=["POST"]),
                Route(prefix + "/v1/models", self.models, methods=["GET"]),
            ]
        routes.append(Route("/mcpgym/keys", self.register_key, methods=["POST"]))
        return Starlette(routes=routes, lifespan=self._lifespan)

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        await self.open()
        try:
            yield
        finally:
            await self.aclose()

    async def open(self) -> None:
        if self.client is None:
            self.client = upstream.connect(self.base, self.config.timeout)

    async def aclose(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            await client.aclose()
        if self.recorder is not None:
            self.recorder.close()

    # --- joining and auth -------------------------------------------------------------------

    def _key(self, request: Request) -> str | None:
        auth = request.headers.get("authorization", "")
        if auth[:7].lower() == "bearer ":
            return auth[7:].strip()
        return request.headers.get("x-api-key")

    def _refusal(self, request: Request, key: str | None) -> str | None:
        """Why the request may not pass (None: it may)."""
        if self.config.token is None or (key is not None and key in self.keys):
            return None
        if key is not None and hmac.compare_digest(key.encode(), self.config.token.encode()):
            return None
        return "missing or wrong bearer token (the gateway runs with --token)"

    def _episode_id(self, request: Request, key: str | None) -> str | None:
        return (
            request.path_params.get("episode_id")
            or request.headers.get(EPISODE_HEADER)
            or (self.keys.get(key) if key is not None else None)
        )

    # --- routes -----------------------------------------------------------------------------

    async def chat(self, request: Request) -> Response:
        started = time.perf_counter()
        key = self._key(request)
        if refusal := self._refusal(request, key):
            return _openai_error(401, refusal)
        raw = await request.body()
        body = codec.object_or_none(raw, json.loads)
        if body is None or not isinstance(body.get("messages"), list):
            return _openai_error(400, "the body must be a JSON object with a messages list")
        stream, options = bool(body.pop("stream", False)), body.pop("stream_options", None)
        keep = request.headers.get(TOKENS_HEADER) == "1"
        status, reply = await self._complete(request, key, body, raw, "chat", stream=stream, keep=keep, started=started)
        if stream and status == 200:
            usage = isinstance(options, dict) and bool(options.get("include_usage"))
            return Response(sse.chat_stream(reply, usage), media_type="text/event-stream")
        return Response(codec.dumps(reply), status_code=status, media_type="application/json")

    async def messages(self, request: Request) -> Response:
        started = time.perf_counter()
        key = self._key(request)
        if refusal := self._refusal(request, key):
            return JSONResponse(anthropic.error(401, refusal), status_code=401)
        raw = await request.body()
        body = codec.object_or_none(raw, json.loads)
        if body is None:
            return JSONResponse(anthropic.error(400, "the body must be a JSON object"), status_code=400)
        try:
            chat = anthropic.to_chat(body)
        except anthropic.TranslationError as exc:
            return JSONResponse(anthropic.error(400, str(exc)), status_code=400)
        stream = bool(body.get("stream"))
        status, reply = await self._complete(request, key, chat, raw, "messages", stream=stream, started=started)
        if status != 200:
            text = reply["error"]["message"]
            return JSONResponse(anthropic.error(status, text or f"upstream HTTP {status}"), status_code=status)
        message = anthropic.from_chat(reply, body.get("model"))
        if stream:
            return Response(anthropic.stream(message), media_type="text/event-stream")
        return JSONResponse(message)

    async def models(self, request: Request) -> Response:
        key = self._key(request)
        if refusal := self._refusal(request, key):
            return _openai_error(401, refusal)
        assert self.client is not None
        try:
            status, content = await self.client.request("GET", "/models", None, self._upstream_headers(request, False))
        except TimeoutError:
            return _openai_error(504, f"the engine at {self.base} did not answer within {self.config.timeout:g}s")
        except upstream.UpstreamError as exc:
            return _openai_error(502, f"cannot reach the engine at {self.base}: {exc}")
        return Response(content, status_code=status, media_type="application/json")

    async def register_key(self, request: Request) -> Response:
        """`{"episode_id": E, "key": K?}` -> `{"episode_id": E, "key": K}`: calls bearing K join E."""
        if refusal := self._refusal(request, self._key(request)):
            return _openai_error(401, refusal)
        body = codec.object_or_none(await request.body(), json.loads)
        episode = body.get("episode_id") if body else None
        if not isinstance(episode, str) or not episode:
            return _openai_error(400, 'the body must be {"episode_id": "...", "key": "..." (optional)}')
        key = body.get("key") if body else None
        key = key if isinstance(key, str) and key else "mcpgym-" + secrets.token_urlsafe(24)
        self.keys[key] = episode
        return JSONResponse({"episode_id": episode, "key": key})

    # --- the call ---------------------------------------------------------------------------

    async def _complete(
        self,
        request: Request,
        key: str | None,
        body: dict[str, Any],
        raw: bytes,
        route: str,
        *,
        stream: bool,
        started: float,
        keep: bool = False,
    ) -> tuple[int, dict[str, Any]]:
        """Ask the engine, record the call, and return (status, the reply for the client or an
        OpenAI error body). The reply is parsed once and serialised once, by the route."""
        episode_id = self._episode_id(request, key)
        episode = self.episodes.get(episode_id)
        if episode is None:  # first seen by this process: an earlier one may have recorded its first turns
            episode = self.episodes[episode_id] = _Episode(self.recorder.recorded(episode_id) if self.recorder else 0)
        turn, digest = episode.turns, hashlib.blake2b(raw, digest_size=16).hexdigest()
        retry_of = turn - 1 if digest == episode.last_hash else None
        episode.turns, episode.last_hash = turn + 1, digest  # at arrival: concurrent calls keep their order
        upstream, added = engine.ask(self.config.engine, body)
        if keep:
            added = set()
        status, reply, error = await self._post(request, upstream)
        if self.recorder is not None:  # a plain dict, dumped once: the record is `Call`'s fields
            call = {
                "episode_id": episode_id,
                "turn": turn,
                "id": secrets.token_hex(8),
                "time": time.time(),
                "latency": time.perf_counter() - started,
                "route": route,
                "stream": stream,
                "model": body.get("model"),
                "messages": body.get("messages") or [],
                "tools": body.get("tools"),
                "sampling": {k: v for k, v in body.items() if k not in ("model", *_MESSAGES_FIELDS)},
                "prompt_token_ids": engine.prompt_ids(reply) if reply else None,
                "choices": engine.choices(reply) if reply else [],
                "usage": reply.get("usage") if reply else None,
                "status": status,
                "error": error,
                "request_hash": digest,
                "retry_of": retry_of,
            }
            self.recorder.append(episode_id, call)
        if reply is None:
            return status, {"error": {"message": error, "type": "upstream_error", "code": status}}
        return 200, engine.hide(reply, added)

    async def _post(self, request: Request, body: dict[str, Any]) -> tuple[int, dict[str, Any] | None, str | None]:
        assert self.client is not None, "the gateway's client opens with the app's lifespan"
        url = self.base + "/chat/completions"
        data = json.dumps(body).encode()  # `json`, not `codec`: what the client sent goes on as it was
        try:
            headers = self._upstream_headers(request)
            status, content = await self.client.request("POST", "/chat/completions", data, headers)
        except TimeoutError:
            return 504, None, f"the engine at {url} did not answer within {self.config.timeout:g}s"
        except upstream.UpstreamError as exc:
            return 502, None, f"cannot reach the engine at {url}: {exc}"
        text = content[:500].decode(errors="replace")
        if status != 200:
            return status, None, f"the engine answered HTTP {status}: {text}"
        reply = codec.object_or_none(content)
        if reply is None:
            return 502, None, f"the engine's reply is not a JSON object: {text[:200]!r}"
        return 200, reply, None

    def _upstream_headers(self, request: Request, json_body: bool = True) -> dict[str, str]:
        headers = {"content-type": "application/json"} if json_body else {}
        if self.config.upstream_key:
            headers["authorization"] = f"Bearer {self.config.upstream_key}"
        elif self.config.forward_key and (given := request.headers.get("authorization")):
            headers["authorization"] = given
        return headers


def _openai_error(status: int, message: str) -> Response:
    body = {
        "error": {"message": message, "type": "invalid_request_error" if status == 400 else "error", "code": status}
    }
    return JSONResponse(body, status_code=status)
