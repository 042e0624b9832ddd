"""OpenEnv's HTTP and WebSocket API beside `/mcp`: `mcpgym serve --openenv` (rfcs/0017-bridges.md).

Layer: transport (server side). An ASGI app in front of the streamable-HTTP app that serves
OpenEnv's routes and hands everything else on. It only drives the episode registry, as every
door does: an OpenEnv session is one mcpgym episode, its session id the episode id.

    /ws                     reset / step / state / close / mcp messages; a connection opens its own
                            session, or attaches to one made over HTTP (`?session_id=`)
    POST /mcp (OpenEnv's)   JSON-RPC without MCP's handshake: openenv/session/create|close,
                            tools/list, tools/call (told apart from MCP's own clients by headers)
    POST /reset, /step      one-shot episodes, as OpenEnv's HTTP routes are
    GET /state, /health, /schema, /metadata, /openapi.json

Security is `/mcp`'s: the same Host/Origin rules (WebSocket handshakes included), the token
(checked by `BearerAuth` around this app), the body limit (WebSocket frames: uvicorn's
`ws_max_size`, set from it) and the episode limit; connections are counted by `http_guard`.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.transport_security import (
    RequestBodyLimitMiddleware,
    TransportSecurityMiddleware,
    TransportSecuritySettings,
)
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketState

from mcpgym._core.errors import AT_CAPACITY, MCPError
from mcpgym._core.extras import MissingExtra
from mcpgym._core.protocol import new_episode_id
from mcpgym._core.types import UNKNOWN_TOOL_INFO
from mcpgym._episode.episode import Episode
from mcpgym.bridges.openenv import _wire as wire

if TYPE_CHECKING:
    from mcpgym._server.gym_server import GymServer

JSONObject = dict[str, Any]


class SessionError(Exception):
    """A session that cannot be used: unknown, already attached, or none to be had (capacity)."""

    def __init__(self, message: str, code: str = wire.SESSION_ERROR) -> None:
        super().__init__(message)
        self.code = code


class Sessions:
    """OpenEnv sessions over the registry. A session made but not yet reset is `pending` (no
    episode yet: OpenEnv's clients reset first, so starting one here would reset twice); its
    first reset or step starts the episode, whose id is the session id. Pending sessions count
    against the episode limit and lapse after the idle timeout, as episodes do."""

    def __init__(self, gym: GymServer) -> None:
        self.registry = gym.registry
        self.pending: dict[str, float] = {}
        self.attached: set[str] = set()

    def create(self) -> str:
        self._lapse()
        limit = self.registry.max_episodes
        if limit is not None and len(self.pending) + len(self.registry) >= limit:
            raise SessionError(f"Server at capacity: {limit} sessions (max_episodes)", wire.CAPACITY_REACHED)
        session_id = new_episode_id()
        self.pending[session_id] = time.monotonic()
        return session_id

    def attach(self, session_id: str) -> None:
        self.known(session_id)
        if session_id in self.attached:
            raise SessionError(f"Session {session_id} already has an attached WebSocket")
        self.attached.add(session_id)

    def known(self, session_id: str) -> None:
        if session_id not in self.pending and self.registry.get(session_id, missing_ok=True) is None:
            raise SessionError(f"Unknown session_id: {session_id} (closed, expired, or never created)")

    async def reset(self, session_id: str, request: wire.ResetRequest) -> JSONObject:
        self.known(session_id)
        self.pending.pop(session_id, None)
        result = await self.registry.reset(session_id, request.seed, request.options())
        return wire.reset_payload(result)

    async def episode(self, session_id: str) -> Episode:
        """The session's episode, started (with a plain reset) if the client stepped first."""
        self.known(session_id)
        if self.pending.pop(session_id, None) is not None:
            await self.registry.reset(session_id, None, None)
        return self.registry.get(session_id)

    def state(self, session_id: str) -> JSONObject:
        self.known(session_id)
        episode = self.registry.get(session_id, missing_ok=True)
        if episode is None:
            return {"episode_id": session_id, "step_count": 0}
        return episode.state().model_dump(mode="json")

    async def close(self, session_id: str) -> bool:
        self.attached.discard(session_id)
        if self.pending.pop(session_id, None) is not None:
            return True
        with anyio.CancelScope(shield=True):
            final = await self.registry.close(session_id)
        return final is not None

    def _lapse(self) -> None:
        timeout = self.registry.idle_timeout
        if timeout is None:
            return
        cutoff = time.monotonic() - timeout
        for session_id in [s for s, made in self.pending.items() if made < cutoff]:
            del self.pending[session_id]


class OpenEnvDoor:
    """The ASGI app: OpenEnv's routes here, everything else (and the lifespan) to `app`."""

    def __init__(self, app: ASGIApp, gym: GymServer, security: TransportSecuritySettings, max_body_bytes: int) -> None:
        self.app = app
        self.gym = gym
        self.sessions = Sessions(gym)
        self.security = security
        self.guard = TransportSecurityMiddleware(security)
        self.tools = [spec.definition for spec in gym.env_cls.__mcpgym_tools__.values()]
        self.max_frame = max_body_bytes
        routes: dict[tuple[str, str], Callable[[Request], Awaitable[Response]]] = {
            ("POST", "/reset"): self.http_reset,
            ("POST", "/step"): self.http_step,
            ("GET", "/state"): self.http_state,
            ("GET", "/health"): self.health,
            ("GET", "/schema"): self.schema,
            ("GET", "/metadata"): self.metadata,
            ("GET", "/openapi.json"): self.openapi,
            ("POST", "/mcp"): self.http_mcp,
        }
        self.routes = routes
        self._limited = RequestBodyLimitMiddleware(self._http, max_body_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and scope["path"] == "/ws":
            await self.websocket(WebSocket(scope, receive, send))
        elif scope["type"] == "http" and self._route(scope) is not None:
            await self._limited(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    def _route(self, scope: Scope) -> Callable[[Request], Awaitable[Response]] | None:
        route = self.routes.get((scope["method"], scope["path"]))
        if scope["path"] == "/mcp" and not _openenv_style(scope):
            return None  # an MCP client (it negotiates a protocol version, and takes SSE): the SDK's
        return route

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        route = self._route(scope)
        assert route is not None  # __call__ routed it here
        refused = await self.guard.validate_request(request, is_post=scope["method"] == "POST")
        response = refused if refused is not None else await route(request)
        await response(scope, receive, send)

    # --- HTTP routes ---------------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "healthy"})

    async def metadata(self, request: Request) -> Response:
        from mcpgym import __version__

        env = self.gym.env_cls
        description = env.instructions or inspect.getdoc(env) or ""
        return JSONResponse(
            {
                "name": env.__name__,
                "description": description,
                "readme_content": None,
                "version": f"mcpgym {__version__}",
                "author": None,
                "documentation_url": None,
            }
        )

    async def schema(self, request: Request) -> Response:
        return JSONResponse(
            {
                "action": wire.CallToolAction.model_json_schema(),
                "observation": wire.CallToolObservation.model_json_schema(),
                "state": wire.State.model_json_schema(),
            }
        )

    async def openapi(self, request: Request) -> Response:
        """The route list OpenEnv's `openenv validate --url` reads (simulation mode: /reset,
        /step and /state are served), not a full OpenAPI description."""
        paths = {
            path: {method.lower(): {"summary": route.__name__.replace("_", " ")}}
            for (method, path), route in self.routes.items()
            if path != "/openapi.json"
        }
        paths["/ws"] = {"get": {"summary": "OpenEnv WebSocket session"}}
        from mcpgym import __version__

        info = {"title": f"{self.gym.env_cls.__name__} (mcpgym, OpenEnv API)", "version": __version__}
        return JSONResponse({"openapi": "3.1.0", "info": info, "paths": paths})

    async def http_reset(self, request: Request) -> Response:
        body = await _json_body(request, default={})
        try:
            reset = wire.ResetRequest.model_validate(body)
        except ValidationError as exc:
            return _unprocessable(exc)
        try:
            async with self._one_shot() as session_id:
                return JSONResponse(await self.sessions.reset(session_id, reset))
        except MCPError as exc:
            return _server_error(exc)

    async def http_step(self, request: Request) -> Response:
        body = await _json_body(request, default=None)
        try:
            action = wire.parse_action(wire.StepRequest.model_validate(body).action)
        except ValidationError as exc:
            return _unprocessable(exc)
        try:
            async with self._one_shot() as session_id:
                return JSONResponse(await self._act(session_id, action))
        except MCPError as exc:
            return _server_error(exc)

    async def http_state(self, request: Request) -> Response:
        return JSONResponse(wire.State().model_dump())  # no session over plain HTTP: a fresh one's

    async def http_mcp(self, request: Request) -> Response:
        try:
            payload = json.loads(await request.body())
        except (ValueError, UnicodeDecodeError):
            return JSONResponse(_rpc_error(None, types.PARSE_ERROR, "Parse error"))
        return JSONResponse(await self.rpc(payload, None))

    @contextlib.asynccontextmanager
    async def _one_shot(self) -> AsyncIterator[str]:
        try:
            session_id = self.sessions.create()
        except SessionError as exc:
            raise MCPError(AT_CAPACITY, str(exc)) from None
        try:
            yield session_id
        finally:
            await self.sessions.close(session_id)

    # --- JSON-RPC (HTTP /mcp, and `mcp` messages over /ws) -------------------------------------

    async def rpc(self, payload: Any, session_id: str | None) -> JSONObject:
        """One OpenEnv JSON-RPC request; `session_id`: the WebSocket's own session, if any."""
        request_id = payload.get("id") if isinstance(payload, dict) else None
        try:
            request = types.JSONRPCRequest.model_validate(payload)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"]) or "request"
            message = f"Invalid request: {where}: {first['msg']}"
            return _rpc_error(_valid_id(request_id), types.INVALID_REQUEST, message)
        params = request.params or {}
        try:
            result = await self._rpc_method(request.method, params, session_id)
        except SessionError as exc:
            return _rpc_error(request.id, types.INVALID_PARAMS, str(exc))
        except MCPError as exc:
            return _rpc_error(request.id, exc.code, exc.message, exc.data)
        return types.JSONRPCResponse(jsonrpc="2.0", id=request.id, result=result).model_dump(mode="json")

    async def _rpc_method(self, method: str, params: JSONObject, own: str | None) -> JSONObject:
        if method == wire.SESSION_CREATE:
            try:
                return {"session_id": own or self.sessions.create()}
            except SessionError as exc:
                raise MCPError(AT_CAPACITY, str(exc)) from None
        if method == wire.SESSION_CLOSE:
            target = params.get("session_id")
            if not isinstance(target, str) or not target:
                raise MCPError(types.INVALID_PARAMS, "Invalid params - 'session_id' is required")
            if target == own:
                raise MCPError(types.INVALID_REQUEST, "Cannot close the WebSocket's own session via MCP method")
            self.sessions.known(target)
            return {"session_id": target, "closed": await self.sessions.close(target)}
        if method == "tools/list":
            return {"tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in self.tools]}
        if method == "tools/call":
            return await self._rpc_call(params, own)
        raise MCPError(types.METHOD_NOT_FOUND, f"Method not found: {method}")

    async def _rpc_call(self, params: JSONObject, own: str | None) -> JSONObject:
        name, arguments = params.get("name"), params.get("arguments") or {}
        if not isinstance(name, str) or not name:
            raise MCPError(types.INVALID_PARAMS, "Missing 'name' in params")
        if not isinstance(arguments, dict):
            raise MCPError(types.INVALID_PARAMS, "'arguments' must be an object")
        session_id = own or params.get("session_id")
        if isinstance(session_id, str) and session_id:
            episode = await self.sessions.episode(session_id)
            return wire.result_payload(await episode.call(name, arguments))
        async with self._one_shot() as one_shot:  # no session: a call of its own, as OpenEnv does
            episode = await self.sessions.episode(one_shot)
            return wire.result_payload(await episode.call(name, arguments))

    # --- /ws -----------------------------------------------------------------------------------

    async def websocket(self, ws: WebSocket) -> None:
        if not self._trusted(ws):
            await ws.close(code=1008)  # before the handshake completes: the client sees HTTP 403
            return
        requested = ws.query_params.get("session_id")
        await ws.accept()
        try:
            if requested:
                self.sessions.attach(requested)
            session_id = requested or self.sessions.create()
        except SessionError as exc:
            await ws.send_text(_frame("error", {"message": str(exc), "code": exc.code}))
            await ws.close()
            return
        try:
            await self._serve_messages(ws, session_id)
        finally:
            if requested:
                self.sessions.attached.discard(requested)  # the HTTP side owns it: it closes it
            else:
                await self.sessions.close(session_id)
            if ws.application_state != WebSocketState.DISCONNECTED and ws.client_state != WebSocketState.DISCONNECTED:
                with contextlib.suppress(RuntimeError):
                    await ws.close()

    async def _serve_messages(self, ws: WebSocket, session_id: str) -> None:
        while True:
            message = await ws.receive()
            if message["type"] == "websocket.disconnect":
                return
            raw = message.get("text")
            if raw is None:
                raw = (message.get("bytes") or b"").decode("utf-8", "replace")
            if len(raw) > self.max_frame:  # uvicorn's ws_max_size says so first under `mcpgym serve`
                await ws.close(code=1009, reason="message too big (--max-body-bytes)")
                return
            reply = await self.message(raw, session_id)
            if reply is None:
                return
            await ws.send_text(reply)

    async def message(self, raw: str, session_id: str) -> str | None:
        """The answer to one `/ws` message (None: the client closed the session)."""
        try:
            message = json.loads(raw)
        except ValueError as exc:
            return _frame("error", {"message": f"Invalid JSON: {exc}", "code": wire.INVALID_JSON})
        kind = message.get("type") if isinstance(message, dict) else None
        data = message.get("data", {}) if isinstance(message, dict) else None
        try:
            if kind == "close":
                return None
            if not isinstance(data, dict):
                return _frame(
                    "error", {"message": "Invalid message: data must be an object", "code": wire.VALIDATION_ERROR}
                )
            if kind == "reset":
                return _frame(
                    "observation", await self.sessions.reset(session_id, wire.ResetRequest.model_validate(data))
                )
            if kind == "step":
                return _frame("observation", await self._act(session_id, wire.parse_action(data)))
            if kind == "state":
                return _frame("state", self.sessions.state(session_id))
            if kind == "mcp":
                return _frame("mcp", await self.rpc(data, session_id))
            return _frame("error", {"message": f"Unknown message type: {kind}", "code": wire.UNKNOWN_TYPE})
        except ValidationError as exc:
            errors = exc.errors(include_url=False, include_context=False)
            return _frame("error", {"message": "Invalid message", "code": wire.VALIDATION_ERROR, "errors": errors})
        except SessionError as exc:
            return _frame("error", {"message": str(exc), "code": exc.code})
        except MCPError as exc:
            code = wire.CAPACITY_REACHED if exc.code == AT_CAPACITY else wire.EXECUTION_ERROR
            return _frame("error", {"message": exc.message, "code": code, **_capacity(exc)})

    async def _act(self, session_id: str, action: wire.CallToolAction | wire.ListToolsAction) -> JSONObject:
        episode = await self.sessions.episode(session_id)
        if isinstance(action, wire.ListToolsAction):
            tools = [wire.tool_entry(t) for t in self.tools]
            return {"observation": {"tools": tools, "metadata": {}}, "reward": None, "done": episode.done}
        step = await episode.step(action.tool_name, action.arguments)
        return wire.step_payload(action.tool_name, step, unknown=UNKNOWN_TOOL_INFO in step.info)

    def _trusted(self, ws: WebSocket) -> bool:
        """`/mcp`'s Host and Origin rules, for a WebSocket handshake (a browser page on another
        site can open a WebSocket to localhost: only the Origin check stops it)."""
        settings = self.security
        host, origin = ws.headers.get("host", ""), ws.headers.get("origin")
        return _allowed(host, settings.allowed_hosts or ()) and (
            origin is None or _allowed(origin, settings.allowed_origins or ())
        )


def _openenv_style(scope: Scope) -> bool:
    """OpenEnv's clients POST bare JSON-RPC to /mcp; MCP's own clients negotiate a protocol
    version (a header on every request after `initialize`, or a session id) and accept SSE
    (`initialize` says so in its Accept header). A request with none of these is OpenEnv's."""
    headers = dict(scope["headers"])
    if b"mcp-protocol-version" in headers or b"mcp-session-id" in headers:
        return False
    return b"text/event-stream" not in headers.get(b"accept", b"")


def _allowed(value: str, patterns: list[str] | tuple[str, ...]) -> bool:
    return any(value == p or (p.endswith(":*") and value.startswith(p[:-1])) for p in patterns)


async def _json_body(request: Request, default: Any) -> Any:
    body = await request.body()
    if not body.strip():
        return default
    try:
        return json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")  # not JSON: the model's validation says what is wrong


def _unprocessable(exc: ValidationError) -> Response:
    return JSONResponse({"detail": exc.errors(include_url=False, include_context=False)}, status_code=422)


def _server_error(exc: MCPError) -> Response:
    status = 503 if exc.code == AT_CAPACITY else 500
    return JSONResponse({"detail": exc.message}, status_code=status)


def _capacity(exc: MCPError) -> JSONObject:
    """OpenEnv's capacity fields, from the registry's refusal (`live_episodes`, `max_episodes`)."""
    data = exc.data if exc.code == AT_CAPACITY and isinstance(exc.data, dict) else {}
    if "max_episodes" not in data:
        return {}
    return {"active_sessions": data.get("live_episodes"), "max_sessions": data["max_episodes"]}


def _frame(kind: str, data: JSONObject) -> str:
    return json.dumps({"type": kind, "data": data}, ensure_ascii=False)


def _valid_id(value: Any) -> str | int | None:
    return value if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)) else None


def _rpc_error(request_id: str | int | None, code: int, message: str, data: Any = None) -> JSONObject:
    error = types.ErrorData(code=code, message=message, data=data)
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error).model_dump(mode="json")


def require_websockets() -> None:
    """uvicorn serves WebSockets only with `websockets` or `wsproto` installed (the extra)."""
    import importlib.util

    if importlib.util.find_spec("websockets") is None and importlib.util.find_spec("wsproto") is None:
        raise MissingExtra("OpenEnv's API (--openenv, a WebSocket)", "openenv", "websockets")
