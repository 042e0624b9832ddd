"""The streamable-HTTP door of a GymServer: the SDK's ASGI app, secured, and uvicorn to run it.

Layer: transport. Security defaults (see README "Deploying"): bind 127.0.0.1; DNS-rebinding
protection (Host/Origin validation, the SDK's transport-security settings) for loopback and
for every `allowed_hosts` entry; an optional bearer token compared in constant time; the
SDK's request-body limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hmac
import signal
import socket
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import anyio
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket
from uvicorn.config import HTTP_PROTOCOLS
from uvicorn.importer import import_from_string
from uvicorn.server import HANDLED_SIGNALS

from mcpgym._server.http_guard import (
    DEFAULT_HEADER_TIMEOUT,
    Limits,
    default_max_connections,
    guarded,
    log_descriptor_exhaustion_once,
)
from mcpgym._server.plain_agents import SessionsForPlainAgents

if TYPE_CHECKING:
    from mcpgym._server.gym_server import GymServer

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
LOOPBACK = ("127.0.0.1", "localhost", "::1")
WILDCARD = ("0.0.0.0", "::", "")
HEALTH_PATH = "/healthz"


OPEN_PATHS = (HEALTH_PATH, "/health")
"""Served without the token: liveness probes carry none (`/health` is OpenEnv's, `--openenv`)."""


class BearerAuth:
    """Refuse every HTTP request and WebSocket handshake without `Authorization: Bearer <token>`
    (401; a WebSocket is closed before it opens, which its client sees as HTTP 403)."""

    def __init__(self, app: ASGIApp, token: str, public: Callable[[str], bool] | None = None) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()
        self._public = public  # paths served without the token (the web page's static shell)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # /healthz stays open: load balancers and Kubernetes probes carry no token.
        path = scope.get("path", "")
        if (
            scope["type"] in ("http", "websocket")
            and path not in OPEN_PATHS
            and not (self._public and self._public(path))
        ):
            given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
            # compare_digest: the time taken does not reveal how much of a guess was right.
            if not hmac.compare_digest(given, self._expected):
                if scope["type"] == "websocket":
                    await WebSocket(scope, receive, send).close(code=1008)
                    return
                response = JSONResponse(
                    {"error": "unauthorized", "message": "send 'Authorization: Bearer <token>' (see --token)"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def http_app(
    gym: GymServer,
    *,
    host: str = "127.0.0.1",
    path: str = "/mcp",
    json_response: bool | None = None,
    allowed_hosts: Sequence[str] = (),
    session_idle_timeout: float | None = 900.0,
    max_sessions: int | None = 10_000,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    token: str | None = None,
    web: bool = False,
    stateless_agents: bool = False,
    openenv: bool = False,
) -> ASGIApp:
    """The ASGI app. JSON responses (not SSE) by default: a tool call is one short answer.

    DNS-rebinding protection is always on: the Host (and any Origin) must be a loopback name,
    the address bound (when it is a specific one), or one of `allowed_hosts`. `web` adds the
    page at /web (mcpgym.web), under the same checks and token. Agents that never reset are kept
    on session-based HTTP, so their calls share one episode whatever revision they prefer
    (`_plain_agents`); `stateless_agents=True` lets them use the 2026-07-28 stateless wire,
    where each of their tool calls is an episode of its own. `openenv` adds OpenEnv's HTTP and
    WebSocket API beside /mcp (`mcpgym.bridges.openenv`), under the same checks and token."""
    if json_response is None:
        # One JSON answer per request, except for an environment relaying a wrapped server: its
        # progress, log messages and sampling requests ride the request's own (SSE) stream.
        json_response = getattr(gym.env_cls, "upstream_listing", None) is None
    security = security_settings(host, allowed_hosts)
    page, page_routes = None, []
    if web:
        from mcpgym.web._play import PlayPage, is_public

        page = PlayPage(gym, security, max_body_bytes)
        page_routes = page.routes()
    app: Starlette = gym.mcp.streamable_http_app(
        streamable_http_path=path,
        json_response=json_response,
        host=host,
        transport_security=security,
        session_idle_timeout=session_idle_timeout,
        max_sessions=max_sessions,
        max_request_body_size=max_body_bytes,
        custom_starlette_routes=[Route(HEALTH_PATH, _health(gym, security, token), methods=["GET"]), *page_routes],
    )
    app.add_exception_handler(404, _not_found(path))
    if page is not None:
        before_shutdown(app, page.hub.stop)
    gym.registry.session_idle_timeout = session_idle_timeout
    served: ASGIApp = EndsSessions(app, gym, path)
    served = served if stateless_agents else SessionsForPlainAgents(served)
    if openenv:
        from mcpgym.bridges.openenv._serve import OpenEnvDoor, require_websockets

        require_websockets()
        served = OpenEnvDoor(served, gym, security, max_body_bytes)
    return BearerAuth(served, token, public=is_public if page else None) if token else served


BEFORE_SHUTDOWN = "mcpgym.before_shutdown"
"""Lifespan-state key: what `UvicornServer` calls when a shutdown begins."""


def before_shutdown(app: Starlette, hook: Callable[[], None]) -> None:
    """Have `hook` called as soon as the server starts shutting down, before uvicorn waits for
    open connections. Kept in the ASGI lifespan's state, which uvicorn holds and every
    middleware passes through, so it is found however the app is wrapped."""
    entered = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[Mapping[str, Any]]:
        async with entered(app) as state:
            hooks = [*(state or {}).get(BEFORE_SHUTDOWN, ()), hook]
            yield {**(state or {}), BEFORE_SHUTDOWN: hooks}

    app.router.lifespan_context = lifespan


class EndsSessions:
    """Close what an HTTP session held once its client has deleted it (a `DELETE` the SDK
    accepted: one for an unknown session, or from another credential, is refused there)."""

    def __init__(self, app: ASGIApp, gym: GymServer, path: str) -> None:
        self.app, self.gym, self.path = app, gym, path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "DELETE" or scope["path"].rstrip("/") != self.path:
            await self.app(scope, receive, send)
            return
        session = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"mcp-session-id"), None)
        accepted = False

        async def watch(message: Message) -> None:
            nonlocal accepted
            if message["type"] == "http.response.start":
                accepted = 200 <= message["status"] < 300
            await send(message)

        await self.app(scope, receive, watch)
        if accepted and session is not None:
            with anyio.CancelScope(shield=True):
                await self.gym.end_session(session)


def security_settings(host: str, allowed_hosts: Sequence[str] = ()) -> TransportSecuritySettings:
    """DNS-rebinding protection for a server bound to `host`: the Host (and any Origin) must be
    a loopback name, the address bound (when it is a specific one), or one of `allowed_hosts`."""
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*", *allowed_hosts]
    if host not in (*LOOPBACK, *WILDCARD):
        hosts.append(f"[{host}]:*" if ":" in host else f"{host}:*")
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")],
    )


def _not_found(path: str) -> Callable[[Request, Exception], Awaitable[JSONResponse]]:
    # A client pointed at the bare host:port (or a typo) is told where the MCP endpoint is.
    async def not_found(request: Request, exc: Exception) -> JSONResponse:
        message = f"no endpoint at {request.url.path}: this server's MCP endpoint is {path}"
        return JSONResponse({"error": "not_found", "message": message}, status_code=404)

    return not_found


def _health(
    gym: GymServer, security: TransportSecuritySettings, token: str | None
) -> Callable[[Request], Awaitable[JSONResponse]]:
    """`GET /healthz`: a bare liveness answer for anyone (a kubelet probes with the pod IP as
    Host, and no token); the load figures (what `mcpgym.pool` places episodes by) only for a
    request that passes the same Host/Origin checks and token as `/mcp` itself."""
    expected = f"Bearer {token}".encode() if token else None

    async def health(request: Request) -> JSONResponse:
        host, origin = request.headers.get("host", ""), request.headers.get("origin")
        trusted = _allowed(host, security.allowed_hosts) and (
            origin is None or _allowed(origin, security.allowed_origins)
        )
        if expected is not None:
            given = request.headers.get("authorization", "").encode()
            trusted = hmac.compare_digest(given, expected) and trusted
        if not trusted:
            return JSONResponse({"status": "ok"})
        registry = gym.registry
        return JSONResponse(
            {
                "status": "ok",
                "environment": gym.env_cls.__name__,
                "episodes": len(registry),
                "max_episodes": registry.max_episodes,
                # Python objects alive in the server: what a leak would grow (RSS alone cannot
                # tell a leak from memory the allocator keeps for reuse).
                "allocated_blocks": sys.getallocatedblocks(),
            }
        )

    return health


def _allowed(value: str, patterns: Sequence[str]) -> bool:
    """The SDK's Host/Origin rule (exact, or `name:*` for any port), without its per-request warning."""
    return any(value == p or (p.endswith(":*") and value.startswith(p[:-1])) for p in patterns)


async def serve_http(
    app: ASGIApp,
    host: str,
    port: int,
    *,
    on_ready: Callable[[str], None] | None = None,
    header_timeout: float = DEFAULT_HEADER_TIMEOUT,
    max_connections: int | None = None,
    **uvicorn_options: Any,
) -> int | None:
    """Run `app` with uvicorn until cancelled or signalled; `on_ready(base_url)` runs once the
    socket listens (with the real port, so `port=0` picks a free one). Returns the signal that
    stopped it (SIGTERM, SIGINT), if one did. `header_timeout` and `max_connections` (default:
    a share of the open-file limit) guard against clients that never finish a request
    (`mcpgym._server.http_guard`)."""
    # Keep-alive outlives the clients' idle expiry (httpx: 5 s), so an idle connection is always
    # dropped by the client first and never closed under a request it is about to send.
    options = {"log_level": "warning", "timeout_keep_alive": 65, "timeout_graceful_shutdown": 30, **uvicorn_options}
    limits = Limits(header_timeout, max_connections or default_max_connections())
    protocol = guarded(import_from_string(HTTP_PROTOCOLS[options.pop("http", "auto")]), limits)
    config = uvicorn.Config(app, host=host, port=port, http=cast(Any, protocol), **options)
    log_descriptor_exhaustion_once(asyncio.get_running_loop())
    server = UvicornServer(config)
    sock = listen(host, port)  # here, not in uvicorn: a port in use is one OSError, not an exit mid-task-group
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            # Shielded: cancelling serve_http asks uvicorn to shut down (its lifespan shutdown
            # closes every episode) rather than tearing it down mid-request.
            with sock, anyio.CancelScope(shield=True):
                await server.serve([sock])
            tg.cancel_scope.cancel()  # it stopped by itself (e.g. SIGTERM): stop waiting too

        tg.start_soon(run)
        try:
            await server.ready.wait()
            if on_ready is not None:
                bound = server.servers[0].sockets[0].getsockname()[1]
                on_ready(f"http://{host}:{bound}")
            await anyio.sleep_forever()
        finally:
            server.should_exit = True
    return server.captured_signal


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port; an `OSError` that says which address when it cannot be."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host, port), family=family, backlog=2048)
    except OSError as exc:
        hint = " (another server is using it: pick another --port, or 0 for a free one)"
        said = f"cannot listen on {host}:{port}: {exc.strerror}" + (hint if exc.errno == errno.EADDRINUSE else "")
        raise OSError(exc.errno, said) from None
    # create_server's socket has proto 0, so asyncio does not set TCP_NODELAY on the connections
    # it accepts (it checks for IPPROTO_TCP): Nagle then holds each small response back until
    # the client's delayed ACK, ~40 ms a request. Accepted sockets inherit it from this one.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class UvicornServer(uvicorn.Server):
    """uvicorn with a `ready` event set once its sockets listen (so nobody polls or sleeps)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = anyio.Event()

    @property
    def captured_signal(self) -> int | None:
        return self._captured_signals[-1] if self._captured_signals else None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Long-lived streams (the web page's live updates) end first: uvicorn would otherwise
        # wait out its graceful-shutdown timeout on them.
        for hook in getattr(self.lifespan, "state", {}).get(BEFORE_SHUTDOWN, ()):
            hook()
        await super().shutdown(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn's, except for the end: after a graceful shutdown on SIGTERM/SIGINT uvicorn
        re-raises the signal, which kills the process before `atexit` handlers run (an
        environment's cleanup, e.g. unmounting its scratch filesystems). We only record it
        (`serve_http` returns it), so the caller exits normally with status 128 + signal."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        originals = {sig: signal.signal(sig, self.handle_exit) for sig in HANDLED_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in originals.items():
                signal.signal(sig, handler)
