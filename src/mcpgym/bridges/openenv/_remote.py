"""A client of OpenEnv's `/ws` protocol, for the `openenv:` target: one session per connection.

Layer: transport (the import side's own client; `websockets`, the [openenv] extra). OpenEnv's
own client cannot run here (it needs the MCP SDK 1.x), so this speaks the same messages
(`_wire`'s module docstring) in a few lines: send one message, read its one answer.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from mcpgym._core.errors import MCPError
from mcpgym._core.extras import needs

CONNECTION_CLOSED = -32000
"""The SDK's code for a server that went away (mcpgym uses it on every door)."""


class RemoteError(Exception):
    """The OpenEnv server answered with an error frame (`code` is its error code)."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def ws_url(base: str) -> str:
    """The `/ws` endpoint of an OpenEnv server named by its base URL (http(s) or ws(s))."""
    base = base.rstrip("/").removesuffix("/mcp")
    for http, ws in (("http://", "ws://"), ("https://", "wss://")):
        if base.startswith(http):
            return ws + base[len(http) :] + "/ws"
    return base + "/ws"


class Session:
    """One OpenEnv session: `async with Session.open(url) as session: await session.send(...)`."""

    def __init__(self, connection: Any, url: str) -> None:
        self.connection = connection
        self.url = url

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls, base_url: str, *, headers: dict[str, str] | None = None, max_size: int = 100 << 20
    ) -> AsyncIterator[Session]:
        with needs("openenv", "openenv: targets (OpenEnv's WebSocket)"):
            from websockets.asyncio.client import connect
        url = ws_url(base_url)
        try:
            connection = await connect(url, additional_headers=headers, max_size=max_size, proxy=None)
        except Exception as exc:  # refused, unreachable, or a failed handshake (websockets has its own errors)
            raise MCPError(CONNECTION_CLOSED, f"Could not connect to the OpenEnv server {url}: {exc}") from exc
        try:
            yield cls(connection, url)
        finally:
            with contextlib.suppress(Exception):
                await connection.send(json.dumps({"type": "close"}))
            await connection.close()

    async def send(self, kind: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one message; its answer's `data` (a `RemoteError` for an error frame)."""
        from websockets.exceptions import ConnectionClosed

        message: dict[str, Any] = {"type": kind} if data is None else {"type": kind, "data": data}
        try:
            await self.connection.send(json.dumps(message))
            answer = json.loads(await self.connection.recv())
        except ConnectionClosed as exc:
            raise MCPError(CONNECTION_CLOSED, f"The OpenEnv server {self.url} closed the session: {exc}") from exc
        payload = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(payload, dict):
            raise MCPError(CONNECTION_CLOSED, f"The OpenEnv server {self.url} sent a malformed answer: {answer!r}")
        if answer.get("type") == "error":
            raise RemoteError(str(payload.get("message", "unknown error")), str(payload.get("code", "")))
        return payload
