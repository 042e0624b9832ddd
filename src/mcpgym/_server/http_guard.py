"""Connection guard for the HTTP server: slow or idle request heads time out, and connections are capped.

Layer: transport (under `mcpgym._server.http`, around uvicorn's own HTTP protocol, h11 or httptools).

A client that opens a connection and never finishes its request head (slowloris) is never seen
by the app, so the token check never runs for it, and uvicorn has no timeout for it: 1,100 such
sockets exhausted the open-file limit and starved every authorised client. Here:

- a request head (request line and headers) must arrive within `header_timeout` seconds of its
  first byte (of the connection, for the first one), else the connection is dropped;
- at most `max_connections` connections are open (by default a share of the open-file limit,
  so sockets alone cannot exhaust it); past that a new connection evicts the oldest one still
  waiting for its head, so a client that speaks promptly always gets in, and is refused only
  when every open connection is busy with a real request;
- an accept that fails for lack of file descriptors is logged once, not once per attempt;
- a connection upgraded to a WebSocket (uvicorn hands the transport to its WebSocket protocol)
  stays counted until it closes, and its head timer stops: the handshake was a complete head.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, cast

logger = logging.getLogger("mcpgym")

DEFAULT_HEADER_TIMEOUT = 10.0
_FD_RESERVE = 64
"""Descriptors kept back from connections for everything else (episodes, recordings, logs)."""


def default_max_connections() -> int:
    """A share of the open-file limit: connections alone never exhaust it."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 65_536
    return max(16, soft - max(_FD_RESERVE, soft // 4))


class Limits:
    """Shared by every connection of one server."""

    def __init__(self, header_timeout: float, max_connections: int) -> None:
        self.header_timeout = header_timeout
        self.max_connections = max_connections
        self.open = 0
        self.waiting: OrderedDict[GuardedProtocol, None] = OrderedDict()
        """Connections waiting for a request head, oldest first (the ones to evict)."""


class GuardedProtocol(asyncio.Protocol):
    """Wraps one uvicorn HTTP protocol instance; uvicorn's `cycle` attribute (the current
    request's response cycle, set when a head is complete) says when a head has arrived."""

    def __init__(self, inner: Any, limits: Limits) -> None:
        self.inner = inner
        self.limits = limits
        self.transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._seen_cycle: object = None
        self._upgraded = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A cast, not an isinstance check: uvloop's transports (Ray runs actors on uvloop) have
        # the whole Transport interface without subclassing asyncio's, and an exception here
        # drops every connection before uvicorn sees it.
        transport = cast(asyncio.Transport, transport)
        limits = self.limits
        if limits.open >= limits.max_connections:
            if not limits.waiting:
                transport.abort()  # every connection is serving a real request: refuse this one
                return
            oldest = next(iter(limits.waiting))
            oldest.drop()
        self.transport = transport
        limits.open += 1
        self._arm()
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._upgraded:
            self.inner.data_received(data)
            return
        if self._timer is None and self._idle():
            self._arm()  # the first byte of the next request on a kept-alive connection
        self.inner.data_received(data)
        if self.transport is not None and self.transport.get_protocol() is not self:
            self._upgrade()
            return
        cycle = getattr(self.inner, "cycle", None)
        if self._timer is not None and cycle is not None and cycle is not self._seen_cycle:
            self._seen_cycle = cycle  # a new request's head is complete: the app has it now
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is None:
            return  # refused in connection_made: uvicorn's protocol never saw it
        self.transport = None
        self.limits.open -= 1
        self._disarm()
        self.inner.connection_lost(exc)

    def eof_received(self) -> bool | None:
        result: bool | None = self.inner.eof_received()
        return result

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def _upgrade(self) -> None:
        """The HTTP protocol handed the transport to a WebSocket protocol: guard that one instead,
        so its end still frees this connection's place (uvicorn would call it, not us)."""
        assert self.transport is not None
        self.inner = self.transport.get_protocol()
        self.transport.set_protocol(self)
        self._upgraded = True
        self._disarm()

    def drop(self) -> None:
        """Close a connection that did not finish its request head in time (or is evicted)."""
        self._disarm()
        if self.transport is not None:
            self.transport.abort()

    def _idle(self) -> bool:
        cycle = getattr(self.inner, "cycle", None)
        return cycle is None or bool(getattr(cycle, "response_complete", False))

    def _arm(self) -> None:
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self.limits.header_timeout, self.drop)
        self.limits.waiting[self] = None

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.limits.waiting.pop(self, None)


def guarded(inner_class: Callable[..., Any], limits: Limits) -> Callable[..., GuardedProtocol]:
    """A protocol factory for `uvicorn.Config(http=...)`: uvicorn's own protocol, guarded."""

    def factory(**kwargs: Any) -> GuardedProtocol:
        return GuardedProtocol(inner_class(**kwargs), limits)

    return factory


def log_descriptor_exhaustion_once(loop: asyncio.AbstractEventLoop) -> None:
    """Install a loop exception handler that reports running out of file descriptors once (an
    accept loop otherwise logs a traceback per failed accept: hundreds of MB a minute)."""
    previous = loop.get_exception_handler()
    reported = False

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        nonlocal reported
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
            if not reported:
                reported = True
                logger.error(
                    "out of file descriptors (%s): new connections wait until some close; raise the open-file "
                    "limit (ulimit -n) or lower --max-connections (logged once)",
                    exc,
                )
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
