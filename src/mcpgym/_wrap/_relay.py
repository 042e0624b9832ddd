"""What a wrapped server sends outside tool results, relayed to the client driving the episode.

Layer: between the wrapped instance's SDK client and the episode's `Peer` (`_episode.peer`).
One `Relay` per instance: the instance's `mcp.Client` is built with its callbacks, and the
episode points `relay.peer` at the client of the request it is serving (kept after the request
is answered, so a list change or a periodic log line that comes between calls still has
somewhere to go).

- Notifications (log messages, list changes, resource updates) go to the peer, and to the
  `on_notification` callback when one is given (the in-process door has no peer: that callback
  is how an in-process caller sees them). Progress is per call (`progress_callback`), to the
  client of the request that made the call, whatever requests come meanwhile.
- Server-to-client requests (sampling, elicitation, roots) go to the peer when it declared the
  capability and the policy is "forward"; otherwise they are refused with an error that says
  why, and the refusal is recorded (`events`) for the episode's state.
- The instance's client declares exactly the sampling, elicitation and roots capabilities the
  driving client declared (`client_options`), so a server lists the tools it would list it.
- Lines a server writes to stdout that are not JSON-RPC are counted, and summarised once when
  the instance stops, instead of one logged validation error per line.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import mcp_types as types
from mcp import MCPError
from mcp.client.session import ClientRequestContext, IncomingMessage

from mcpgym._episode.peer import Peer

logger = logging.getLogger("mcpgym.wrap")

ServerRequests = Literal["forward", "refuse"]
OnNotification = Callable[[types.ServerNotification], Awaitable[None] | None]
CAPABILITIES = ("sampling", "elicitation", "roots")
"""The client capabilities a server may gate tools or requests on (the proxy mirrors these)."""

REFUSED = types.INVALID_REQUEST


@dataclass(frozen=True)
class Passthrough:
    """How one wrapped class relays what its servers send (the same for all its instances)."""

    server_requests: ServerRequests = "forward"
    """"forward": to the driving client, when it declared the capability (else refused);
    "refuse": always refused (an RL loop whose client could answer, but must not be asked)."""
    on_notification: OnNotification | None = None


def wanted(capabilities: types.ClientCapabilities | None) -> frozenset[str]:
    """Which of the capabilities a server may gate on the client declared."""
    if capabilities is None:
        return frozenset()
    return frozenset(name for name in CAPABILITIES if getattr(capabilities, name) is not None)


@dataclass
class Relay:
    options: Passthrough = field(default_factory=Passthrough)
    peer: Peer | None = None
    declared: frozenset[str] = frozenset()
    events: list[dict[str, Any]] = field(default_factory=list)
    """Server-to-client requests, each `{"method", "outcome": "forwarded" | "refused", "detail"}`."""
    bad_lines: int = 0
    first_bad_line: str = ""

    def client_options(self, capabilities: types.ClientCapabilities | None) -> dict[str, Any]:
        """`mcp.Client` keyword arguments: the callbacks, for the capabilities to declare."""
        self.declared = wanted(capabilities)
        options: dict[str, Any] = {
            "logging_callback": self._log,
            "message_handler": self._message,
            "log_level": "debug",  # 2026-07-28 servers log only when asked; the peer filters
        }
        if "sampling" in self.declared:
            assert capabilities is not None and capabilities.sampling is not None
            options["sampling_callback"] = self._sample
            options["sampling_capabilities"] = capabilities.sampling
        if "elicitation" in self.declared:
            options["elicitation_callback"] = self._elicit
        if "roots" in self.declared:
            options["list_roots_callback"] = self._roots
        return options

    # Notifications

    async def progress(
        self, progress: float, total: float | None, message: str | None, *, token: int, peer: Peer | None
    ) -> None:
        """Progress of one call, to the peer of the request that made it (not `self.peer`)."""
        await self._tell(
            types.ProgressNotification(
                params=types.ProgressNotificationParams(
                    progress_token=token, progress=progress, total=total, message=message
                )
            )
        )
        if peer is not None:
            with _undeliverable("progress"):
                await peer.progress(progress, total, message)

    async def _log(self, params: types.LoggingMessageNotificationParams) -> None:
        await self._tell(types.LoggingMessageNotification(params=params))
        if self.peer is not None:
            with _undeliverable("a log message"):
                await self.peer.log(params)

    async def _message(self, message: IncomingMessage) -> None:
        if isinstance(message, Exception):
            return  # a line that is not JSON-RPC: counted by the stdout filter below
        if not isinstance(message, types.ServerNotification) or isinstance(
            message, types.LoggingMessageNotification | types.ProgressNotification
        ):
            return  # requests come to their callbacks, log messages to _log, progress to its call's
        await self._tell(message)
        if self.peer is not None:
            with _undeliverable(message.method):
                await self.peer.notify(message)

    async def _tell(self, notification: types.ServerNotification) -> None:
        callback = self.options.on_notification
        if callback is None:
            return
        try:
            returned = callback(notification)
            if inspect.isawaitable(returned):
                await returned
        except Exception:
            logger.exception("the on_notification callback raised (the notification is still relayed)")

    # Server-to-client requests

    async def _sample(
        self, ctx: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        request = types.CreateMessageRequest(params=params)
        kind = types.CreateMessageResultWithTools if params.tools else types.CreateMessageResult
        answer: types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData
        answer = await self._ask("sampling", request, kind)
        return answer

    async def _elicit(
        self, ctx: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        answer: types.ElicitResult | types.ErrorData
        answer = await self._ask("elicitation", types.ElicitRequest(params=params), types.ElicitResult)
        return answer

    async def _roots(self, ctx: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
        answer: types.ListRootsResult | types.ErrorData
        answer = await self._ask("roots", types.ListRootsRequest(), types.ListRootsResult)
        return answer

    async def _ask(self, capability: str, request: types.ServerRequest, kind: type[Any]) -> Any:
        method = request.method
        peer = self.peer
        if self.options.server_requests == "refuse":
            why = "this environment refuses server-to-client requests (server_requests='refuse')"
        elif peer is None:
            why = "no MCP client drives this episode (in-process), so nobody can answer it"
        elif capability not in wanted(peer.capabilities):
            why = f"the client driving this episode did not declare the {capability} capability"
        else:
            try:
                result = await peer.request(request, kind)
            except MCPError as exc:
                self.events.append({"method": method, "outcome": "forwarded", "detail": f"error: {exc}"})
                return types.ErrorData(code=exc.code, message=exc.message, data=exc.data)
            except Exception as exc:
                why = f"forwarding it to the driving client failed ({type(exc).__name__}: {exc})"
            else:
                self.events.append({"method": method, "outcome": "forwarded", "detail": "answered"})
                return result
        self.events.append({"method": method, "outcome": "refused", "detail": why})
        return types.ErrorData(code=REFUSED, message=f"mcpgym refused {method}: {why}")

    # Stdout that is not JSON-RPC

    def bad_line(self, line: bytes) -> None:
        self.bad_lines += 1
        if self.bad_lines == 1:
            text = line.decode(errors="replace").strip()
            self.first_bad_line = text if len(text) <= 120 else text[:120] + "…"

    def summarise(self, command: str) -> None:
        if self.bad_lines:
            logger.warning(
                "the wrapped server %s wrote %d line(s) to stdout that are not JSON-RPC (first: %r); "
                "an MCP server on stdio must write only protocol messages there (logs go to stderr)",
                command,
                self.bad_lines,
                self.first_bad_line,
            )


@contextlib.contextmanager
def _undeliverable(what: str) -> Iterator[None]:
    """The peer's connection may be gone, or a stateless exchange have no channel left: the
    notification is dropped (it is advisory), never the call it came with."""
    try:
        yield
    except Exception as exc:
        logger.debug("could not relay %s to the driving client: %s", what, exc)
