"""Errors mcpgym raises, by boundary.

    MCPError (from the mcp SDK)            a protocol error: the request itself was refused
    │                                      (unknown or expired episode, server at capacity).
    │                                      Raised identically in-process and over every MCP
    │                                      door, with the same code and message. An unknown
    │                                      tool is one on the wire (-32602) but a counted
    │                                      `is_error` step in the Gym API (rfcs/0001).
    └── (no subclasses: codes and messages carry the detail)

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

__all__ = ["INTERNAL_ERROR", "INVALID_PARAMS", "INVALID_REQUEST", "MCPError", "ToolError"]


class ToolError(_SDKToolError):
    """Fail the current tool call with this message (an `isError` result, not an exception)."""
