"""Errors mcpgym raises, by boundary.

    MCPError (from the mcp SDK)            a protocol error: the request itself was refused
    │                                      (unknown or expired episode, server at capacity).
    │                                      Raised identically in-process and over every MCP
    │                                      door, with the same code and message. An unknown
    │                                      tool is one on the wire (-32602) but a counted
    │                                      `is_error` step in the Gym API (rfcs/0001).
    └── (no subclasses: codes and messages carry the detail)

    Codes of our own (JSON-RPC's server-error range), each with structured `data`:
    AT_CAPACITY  -32050  reset refused: the server holds `max_episodes` live episodes;
                         data = {"live_episodes", "max_episodes"}. Retry later or elsewhere.
    HTTP_ERROR   -32051  the HTTP server refused the request without a JSON-RPC answer (401,
                         403, 404, 421, ...); data = {"status", "url", "server_message", "hint"}.
    A server that died or cannot be reached is the SDK's CONNECTION_CLOSED (-32000) on every
    door, with data = {"url" or "command", "reason"}.

    ToolError                              raise inside a tool to fail the call on purpose: the
                                           agent sees an `isError` result with your message.

A tool that raises anything else also yields an `isError` result (naming the exception), and
the episode goes on. Tool failures are data for the agent; protocol errors are exceptions for
the caller. As in the MCP SDK, a tool that raises `MCPError` itself answers with that protocol
error (a deliberate escape hatch, e.g. for a tool that proxies another MCP server).
"""

from __future__ import annotations

from mcp.server.mcpserver.exceptions import ToolError as _SDKToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST

__all__ = ["AT_CAPACITY", "HTTP_ERROR", "INTERNAL_ERROR", "INVALID_PARAMS", "INVALID_REQUEST", "MCPError", "ToolError"]

AT_CAPACITY = -32050
HTTP_ERROR = -32051


class ToolError(_SDKToolError):
    """Fail the current tool call with this message (an `isError` result, not an exception)."""
