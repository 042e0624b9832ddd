"""`Peer`: the client driving the current request, as an environment may talk back to it.

Layer: bottom (MCP types only, no transport). A door with a client at the other end (the MCP
server, for each request it serves) sets `PEER` for the duration of the request; an environment
that passes MCP traffic through (`mcpgym.wrap`) reads it to send that client progress, log
messages and list changes, and to put server-to-client requests (sampling, elicitation, roots)
to it. In-process there is no client to talk back to: `PEER` is None.
"""

from __future__ import annotations

import contextvars
from typing import Protocol, TypeVar

import mcp_types as types
from pydantic import BaseModel

R = TypeVar("R", bound=BaseModel)


class Peer(Protocol):
    """What an environment may send the client of the request it is serving."""

    @property
    def capabilities(self) -> types.ClientCapabilities | None:
        """What the client declared (None: nothing, e.g. a client that never said)."""

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Progress of this request, against the client's own progress token (none asked: dropped)."""

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        """A log message, if the client asked for that level."""

    async def notify(self, notification: types.ServerNotification) -> None:
        """Any other notification (list changes, resource updates)."""

    async def request(self, request: types.ServerRequest, result_type: type[R]) -> R:
        """A server-to-client request, tied to this request; raises MCPError on the client's refusal."""


PEER: contextvars.ContextVar[Peer | None] = contextvars.ContextVar("mcpgym_peer", default=None)
"""The peer of the request being served (a context variable: each request runs in its own task)."""


class Upstream(Protocol):
    """An environment instance in front of another MCP server (`mcpgym.wrap`), whose resources
    and prompts the MCP server serves beside the task catalog: reads go to the episode's own
    server, so a resource link one of its tools returned resolves."""

    async def read_resource(self, uri: str) -> types.ReadResourceResult: ...

    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult: ...


class UpstreamListing(Protocol):
    """What such an environment's class lists (read once, when the class was made)."""

    resources: tuple[types.Resource, ...]
    templates: tuple[types.ResourceTemplate, ...]
    prompts: tuple[types.Prompt, ...]
