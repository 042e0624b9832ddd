"""The gateway's HTTP client to its engine: one request and its whole reply, over a keep-alive pool.

Layer: transport (asyncio; the gateway runs under uvicorn, which is asyncio).

This is the hop the gateway adds to every model call, so its cost is the gateway's cost. Two
implementations behind one function, `connect(base, timeout)`:

- `LeanUpstream`, for `http://` engines when httptools is installed (`mcpgym[fast]`, which the
  gateway asks for anyway: uvicorn parses the client's side with it). Connections are asyncio
  protocols and httptools (llhttp, the parser Node.js uses) parses the replies: ~45 us of CPU
  per call where aiohttp's client costs ~165 us (benchmarks/bench_gateway.py, rfcs/0018). It
  does only what the gateway needs: send a request with a body, read a whole reply with a
  `Content-Length`, chunked or close-delimited body, keep the connection when the engine
  allows it.
- `AiohttpUpstream` otherwise (`https://`, or no httptools): aiohttp's client, the stack
  mcpgym's shared client already uses.

Both raise `UpstreamError` when the engine cannot be reached or breaks the connection, and
`TimeoutError` past `timeout` seconds for the whole call (connecting included).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import time
from collections import deque
from collections.abc import Mapping
from typing import Any, Protocol, cast

import aiohttp
from yarl import URL

IDLE_REUSE = 4.0
"""Seconds a kept connection may sit idle and still be reused. vLLM and SGLang serve with
uvicorn, which closes a connection idle for 5 s (its `timeout_keep_alive`, vLLM's
`VLLM_HTTP_TIMEOUT_KEEP_ALIVE`): a request written on one the engine is closing at that
moment is lost, and a model call is not safe to send twice. Older connections are closed
instead (a new loopback connection costs ~0.1 ms)."""


Reply = tuple[int, bytes]
"""The engine's status and its whole body."""


class UpstreamError(Exception):
    """The engine could not be reached, or broke the connection before its reply was whole."""


class Upstream(Protocol):
    """What the gateway needs of an HTTP client to its engine."""

    async def request(self, method: str, path: str, body: bytes | None, headers: Mapping[str, str]) -> Reply:
        """Send `method path` (under the engine's base URL) and return (status, the whole body)."""
        ...

    async def aclose(self) -> None: ...


def connect(base: str, timeout: float) -> Upstream:
    """The client for an engine at `base` (its OpenAI base URL, `http://host:port/v1`); `timeout`
    <= 0 waits for ever. A URL with credentials (`http://user:pass@host`) goes through aiohttp,
    which sends them as Basic auth."""
    plain = base.startswith("http://") and URL(base).user is None
    if plain and importlib.util.find_spec("httptools") is not None:
        return LeanUpstream(base, timeout)
    return AiohttpUpstream(base, timeout)


def _check_header(name: str, value: str) -> None:
    # Values reach the request line by line: a CR or LF would end a header and start another.
    if any(c in name + value for c in "\r\n\0") or not name or ":" in name:
        raise UpstreamError(f"a header for the engine may not contain CR, LF or NUL: {name!r}")


class LeanUpstream:
    """An asyncio + httptools HTTP/1.1 client to one `http://` engine (see the module's docstring)."""

    def __init__(self, base: str, timeout: float) -> None:
        url = URL(base)
        if url.scheme != "http" or not url.raw_host or url.user is not None:
            raise ValueError(f"LeanUpstream speaks plain http:// without credentials only, got {base!r}")
        self.base = base
        self.timeout = timeout if timeout > 0 else None  # as aiohttp's: 0 is no time-out
        # Raw: the host as it goes on the wire (an international name as IDNA, `xn--...`), the
        # path as written (percent-escapes kept).
        self._host, self._port = url.raw_host, url.port or 80
        self._prefix = url.raw_path.rstrip("/")
        authority = f"[{url.raw_host}]" if ":" in url.raw_host else url.raw_host
        self._host_header = f"{authority}:{self._port}"
        self._idle: deque[_Connection] = deque()  # in the order they went idle: the oldest first
        self._busy: set[_Connection] = set()
        self._closed = False

    async def request(self, method: str, path: str, body: bytes | None, headers: Mapping[str, str]) -> Reply:
        if self._closed:
            raise UpstreamError("the gateway's client to the engine is closed")
        lines = [f"{method} {self._prefix}{path} HTTP/1.1\r\nHost: {self._host_header}\r\n"]
        for name, value in headers.items():
            _check_header(name, value)
            lines.append(f"{name}: {value}\r\n")
        if body is not None:
            lines.append(f"Content-Length: {len(body)}\r\n")
        try:
            head = "".join(lines).encode("latin-1") + b"\r\n"
        except UnicodeEncodeError as exc:
            raise UpstreamError(f"a header for the engine is not latin-1 text: {exc}") from None
        # asyncio.timeout, not anyio's: this runs on every model call and asyncio's costs less.
        async with asyncio.timeout(self.timeout):
            connection = self._reusable() or await self._open()
            if self._closed:  # closed while this call was connecting
                connection.close()
                raise UpstreamError("the gateway's client to the engine is closed")
            self._busy.add(connection)
            try:
                status, content = await connection.exchange(head + body if body else head)
            except BaseException:  # a time-out, a cancelled caller, a broken reply: its state is unknown
                connection.close()
                raise
            finally:
                self._busy.discard(connection)
        if connection.keep and not self._closed:
            connection.idle_since = time.monotonic()
            self._idle.append(connection)
            self._prune(connection.idle_since)
        else:
            connection.close()
        return status, content

    def _reusable(self) -> _Connection | None:
        now = time.monotonic()
        while self._idle:
            connection = self._idle.pop()  # the most recently used: the likeliest to be alive
            if not connection.ended and now - connection.idle_since < IDLE_REUSE:
                return connection
            connection.close()
        return None

    def _prune(self, now: float) -> None:
        # The connections a burst of concurrent calls left idle are closed once too old to be
        # reused, not held (with their descriptors) until a later burst walks past them.
        while self._idle and (self._idle[0].ended or now - self._idle[0].idle_since >= IDLE_REUSE):
            self._idle.popleft().close()

    async def _open(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, connection = await loop.create_connection(_Connection, self._host, self._port)
        except OSError as exc:
            raise UpstreamError(f"cannot connect: {exc!r}") from exc
        return connection

    async def aclose(self) -> None:
        self._closed = True
        for connection in (*self._idle, *self._busy):
            connection.close()
        self._idle.clear()


class _Connection(asyncio.Protocol):
    """One keep-alive connection: one request at a time, its reply parsed as it arrives."""

    def __init__(self) -> None:
        import httptools  # present: `connect` chose this client because it is

        self._parser = httptools.HttpResponseParser(self)
        # (An upgrade, `101`, is not an HttpParserError: no engine should answer one.)
        self._parse_error: tuple[type[Exception], ...] = (httptools.HttpParserError, httptools.HttpParserUpgrade)
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self._chunks: list[bytes] = []
        self._status = 0
        self._framed = False  # the reply says where its body ends (Content-Length or chunked)
        self._headers_done = False
        self._closed_here = False
        self.keep = False
        self.lost = False
        self.idle_since = 0.0

    @property
    def ended(self) -> bool:
        """Not to be used again: lost, closed, or closing (the engine's FIN came this loop pass)."""
        return self.lost or self._transport is None or self._transport.is_closing()

    async def exchange(self, data: bytes) -> tuple[int, bytes]:
        assert self._transport is not None and self._waiter is None, "one request at a time"
        self._waiter = asyncio.get_running_loop().create_future()
        self._next_reply()
        self.keep = False
        self._transport.write(data)
        try:
            return await self._waiter
        finally:
            self._waiter = None

    def _next_reply(self) -> None:
        self._chunks, self._framed, self._headers_done = [], False, False

    def close(self) -> None:
        self.lost = self._closed_here = True
        if self._transport is not None:
            self._transport.close()

    # --- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # (uvloop's is not an asyncio.Transport subclass)

    def data_received(self, data: bytes) -> None:
        # (Bytes nobody asked for end the connection in on_message_begin, or as a parse error.)
        try:
            self._parser.feed_data(data)
        except self._parse_error as exc:
            self._fail(UpstreamError(f"the engine's reply is not valid HTTP/1.1: {exc}"))
            self.close()

    def eof_received(self) -> bool:
        self.lost = True  # from now, not from connection_lost: a caller woken first must not take it
        return False  # close our side too; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self._waiter is not None and not self._waiter.done():
            if self._headers_done and not self._framed and exc is None and not self._closed_here:
                # A body that ends where the connection does, and it ended cleanly (not reset,
                # not closed by us mid-reply): the whole of it.
                self._waiter.set_result((self._status, b"".join(self._chunks)))
            else:
                self._fail(UpstreamError("the engine closed the connection before its reply was whole"))

    # --- httptools callbacks ----------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._waiter is None or self._waiter.done():  # a second reply to one request
            self.close()

    def on_header(self, name: bytes, value: bytes) -> None:
        # Framed: a length, or chunked as the last coding (any other coding ends at the close).
        name = name.lower()
        if name == b"content-length" or (name == b"transfer-encoding" and value.lower().rstrip().endswith(b"chunked")):
            self._framed = True

    def on_headers_complete(self) -> None:
        self._status = self._parser.get_status_code()
        self._headers_done = True

    def on_body(self, body: bytes) -> None:
        self._chunks.append(body)

    def on_message_complete(self) -> None:
        if 100 <= self._status < 200:  # an interim reply (we send no Expect, but an engine may): the real one follows
            self._next_reply()
            return
        self.keep = self._parser.should_keep_alive()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result((self._status, b"".join(self._chunks)))

    def _fail(self, exc: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)


class AiohttpUpstream:
    """aiohttp's client to the engine (`https://` engines, or no httptools)."""

    def __init__(self, base: str, timeout: float) -> None:
        self.base = base.rstrip("/")
        self.timeout = timeout
        self._urls: dict[str, URL] = {}  # parsed once per path, not per call
        self._session: aiohttp.ClientSession | None = None

    async def request(self, method: str, path: str, body: bytes | None, headers: Mapping[str, str]) -> Reply:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0),  # the harness's concurrency is the bound
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                cookie_jar=aiohttp.DummyCookieJar(),
                auto_decompress=False,
                skip_auto_headers=("Accept-Encoding", "User-Agent"),
            )
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = URL(self.base + path)
        options: dict[str, Any] = {"headers": dict(headers)}
        if body is not None:
            options["data"] = body  # bytes: aiohttp sends them as they are
        try:
            async with self._session.request(method, url, **options) as response:
                return response.status, await response.read()
        except TimeoutError:  # (aiohttp's own time-out error is one)
            raise
        except aiohttp.ClientError as exc:
            raise UpstreamError(repr(exc)) from exc

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            with contextlib.suppress(Exception):
                await session.close()
