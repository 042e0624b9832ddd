"""The MCP client of a request, as the episode's `Peer` (what a wrapped server sends it).

Layer: transport helper, used by `_server` only. Progress rides the request's own back channel
against the client's own progress token (the SDK's `report_progress`); log messages go at or
above the level the client chose (2026-07-28: the request's `_meta` opt-in, which the SDK
applies; earlier revisions: `logging/setLevel`, kept on the connection here); server-to-client
requests are tied to the request, so they ride its stream. Once the request is answered, what
still comes (a list change, a periodic log line) goes on the connection's own channel, where
the wire has one (stdio, session HTTP); a stateless exchange has none and it is dropped.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any, TypeVar

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

logger = logging.getLogger("mcpgym")

Ctx = ServerRequestContext[Any, Any]
R = TypeVar("R", bound=BaseModel)

LOG_LEVEL = "mcpgym.log-level"
"""The connection-state key of the level a handshake-era client set with `logging/setLevel`."""
LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)


async def set_level(ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
    """`logging/setLevel` (revisions before 2026-07-28): remembered for this connection."""
    ctx.session._connection.state[LOG_LEVEL] = params.level
    return types.EmptyResult()


class SessionPeer:
    """The client of one request; `answered()` once the request is done."""

    def __init__(self, ctx: Ctx) -> None:
        self._ctx = ctx
        self._open = True

    def answered(self) -> None:
        self._open = False

    @property
    def capabilities(self) -> types.ClientCapabilities | None:
        return self._ctx.session.client_capabilities

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self._open:
            await self._ctx.session.report_progress(progress, total, message)

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        session = self._ctx.session
        if session.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            chosen = session._connection.state.get(LOG_LEVEL)
            if chosen is not None and LEVELS.index(params.level) < LEVELS.index(chosen):
                return
        elif not self._open:
            return  # 2026-07-28 delivers log messages on the request's own stream only
        related = self._ctx.request_id if self._open else None
        with warnings.catch_warnings():  # deprecated at 2026-07-28, yet what the relayed server used
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await session.send_log_message(params.level, params.data, params.logger, related_request_id=related)

    async def notify(self, notification: types.ServerNotification) -> None:
        await self._ctx.session.send_notification(notification)

    async def request(self, request: types.ServerRequest, result_type: type[R]) -> R:
        if self._open and not self._ctx.session.can_send_request:
            raise RuntimeError(
                "this exchange has no channel for server-to-client requests (the 2026-07-28 stateless "
                "wire, or an HTTP request answered as JSON); connect with a session to be asked"
            )
        related = ServerMessageMetadata(related_request_id=self._ctx.request_id if self._open else None)
        return await self._ctx.session.send_request(request, result_type, metadata=related)
