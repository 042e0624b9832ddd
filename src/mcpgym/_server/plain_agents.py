"""Keep plain agents on session-based HTTP, so their tool calls share one episode.

Layer: transport (an ASGI wrapper around the SDK's streamable-HTTP app; `_http` installs it).

Why: an agent that never resets (Claude Code, any MCP client) plays the *implicit* episode of
its connection. On the session-based wire (protocol revisions up to 2025-11-25) that is the
HTTP session: one episode for the whole conversation. On the 2026-07-28 wire there are no
sessions, every request is its own connection, and each tool call would run in an episode of
its own (rfcs/0001). An auto-negotiating client starts with a `server/discover` probe at
2026-07-28 and falls back to the `initialize` handshake when the server answers `-32022`
(unsupported protocol version) naming only handshake versions. This wrapper gives that answer
to clients that do not advertise the mcpgym extension (`io.mcpgym/gym`) in the probe's client
capabilities: plain agents get a session, while mcpgym's own clients (which name their
episodes, so need no session, and which an episode-hashing router can spread) keep the
stateless wire. A client pinned to 2026-07-28 sends no probe and is served as it asks.
"""

from __future__ import annotations

import json
from typing import Any, Final

from mcp_types import CLIENT_CAPABILITIES_META_KEY, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcpgym._core.protocol import EXTENSION_ID

_VERSION_HEADER: Final = b"mcp-protocol-version"
_METHOD_HEADER: Final = b"mcp-method"
_PROBE_LIMIT: Final = 64 * 1024
"""Bodies larger than this are never a discover probe; they pass through unread."""


class SessionsForPlainAgents:
    """ASGI wrapper: answer a plain agent's 2026-07-28 `server/discover` with `-32022`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _modern_post(scope):
            await self.app(scope, receive, send)
            return
        read = await _read(receive)
        if read is None:
            return  # the client went away before its request arrived: nobody to answer
        body, more = read
        probe = _probe(body) if not more else None
        if probe is not None and not _advertises_gym(probe):
            await _refuse(probe, scope, receive, send)
            return
        await self.app(scope, _replay(body, more, receive), send)


def _modern_post(scope: Scope) -> bool:
    """A 2026-07-28 POST that may be a discover probe (its `Mcp-Method` header, which that wire
    sends on every request, lets every other request through without reading its body)."""
    if scope["type"] != "http" or scope["method"] != "POST":
        return False
    headers = dict(scope["headers"])
    version, method = headers.get(_VERSION_HEADER), headers.get(_METHOD_HEADER)
    if version is None or version.decode("latin-1") in HANDSHAKE_PROTOCOL_VERSIONS:
        return False
    return method is None or method == b"server/discover"


async def _read(receive: Receive) -> tuple[bytes, bool] | None:
    """The body, up to `_PROBE_LIMIT` bytes, and whether more is left unread; None if the
    client disconnected first."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        more = bool(message.get("more_body", False))
        if not more or size > _PROBE_LIMIT:
            return b"".join(chunks), more


def _replay(body: bytes, more: bool, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": more}

    return replay


def _probe(body: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None  # the SDK answers malformed JSON itself
    if isinstance(message, dict) and message.get("method") == "server/discover" and "id" in message:
        return message
    return None


def _advertises_gym(probe: dict[str, Any]) -> bool:
    params = probe.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    capabilities = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return isinstance(extensions, dict) and EXTENSION_ID in extensions


async def _refuse(probe: dict[str, Any], scope: Scope, receive: Receive, send: Send) -> None:
    version = next(v for k, v in scope["headers"] if k == _VERSION_HEADER).decode("latin-1")
    error = {
        "code": UNSUPPORTED_PROTOCOL_VERSION,
        "message": "This server keeps agents that do not reset on session-based HTTP: use the initialize handshake",
        "data": {"supported": list(HANDSHAKE_PROTOCOL_VERSIONS), "requested": version},
    }
    response = JSONResponse({"jsonrpc": "2.0", "id": probe["id"], "error": error}, status_code=400)
    await response(scope, receive, send)
