"""The gateway's client to its engine (`mcpgym.gateway.upstream`), against scripted TCP servers:
framing, keep-alive and its hazards (a connection the engine closed, one idle past the engine's
keep-alive, a reply nobody asked for), broken replies, time-outs, refused connections, header
injection and concurrency. Both clients where the behaviour is shared; the lean one alone where
only it has the logic (aiohttp has its own tests)."""

from __future__ import annotations

import contextlib
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from anyio.abc import SocketAttribute, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from mcpgym.gateway import upstream
from mcpgym.gateway.upstream import AiohttpUpstream, LeanUpstream, Upstream, UpstreamError

pytestmark = pytest.mark.anyio

CLIENTS: dict[str, type[LeanUpstream] | type[AiohttpUpstream]] = {"lean": LeanUpstream, "aiohttp": AiohttpUpstream}
JSON = {"content-type": "application/json"}


@dataclass
class Peer:
    """One connection to the scripted server: the requests it read (head, body)."""

    stream: SocketStream
    reader: BufferedByteReceiveStream
    requests: list[tuple[bytes, bytes]] = field(default_factory=list)
    closed: anyio.Event = field(default_factory=anyio.Event)

    async def read(self) -> tuple[bytes, bytes]:
        head = await self.reader.receive_until(b"\r\n\r\n", 65536)
        lines = head.lower().split(b"\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in lines if line.startswith(b"content-length:")), 0)
        body = await self.reader.receive_exactly(length) if length else b""
        self.requests.append((head, body))
        return head, body

    async def send(self, data: bytes) -> None:
        await self.stream.send(data)


Handler = Callable[[Peer], Awaitable[None]]


@contextlib.asynccontextmanager
async def engine(handler: Handler) -> AsyncIterator[tuple[str, list[Peer]]]:
    """A TCP server on 127.0.0.1:<free port> running `handler` on each connection, which it closes
    when the handler returns; yields its OpenAI base URL and its connections so far."""
    peers: list[Peer] = []
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(SocketAttribute.local_port)

    async def serve(stream: SocketStream) -> None:
        peer = Peer(stream, BufferedByteReceiveStream(stream))
        peers.append(peer)
        try:
            async with stream:
                with contextlib.suppress(anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                    await handler(peer)
        finally:
            peer.closed.set()

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        yield f"http://127.0.0.1:{port}/v1", peers
        tg.cancel_scope.cancel()


def reply(body: bytes, *headers: str, status: str = "200 OK") -> bytes:
    head = "".join(f"{h}\r\n" for h in headers)
    return f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n{head}\r\n".encode() + body


async def answering(peer: Peer) -> None:
    """Answer every request on the connection with its own body, kept alive."""
    while True:
        _, body = await peer.read()
        await peer.send(reply(b"echo " + body))


async def lost(client: LeanUpstream) -> None:
    """Until the client has seen its idle connection close (nothing timed: its own callback says)."""
    [connection] = client._idle
    seen, lose = anyio.Event(), connection.connection_lost

    def connection_lost(exc: Exception | None) -> None:
        lose(exc)
        seen.set()

    connection.connection_lost = connection_lost  # type: ignore[method-assign]
    with anyio.fail_after(10):
        await seen.wait()
    assert connection.lost


@pytest.fixture(autouse=True)
def patient_reuse(monkeypatch: pytest.MonkeyPatch) -> None:
    """Idle connections stay reusable for an hour here (a test that wants them old says so): the
    tests count connections, and a stall of a loaded box past the real 4 s must not change them."""
    monkeypatch.setattr(upstream, "IDLE_REUSE", 3600.0)


@pytest.fixture(params=["asyncio", "uvloop"])
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    """Both event loops: `mcpgym gateway` runs on uvloop when it is installed (`mcpgym[fast]`,
    which the test environments have: a missing uvloop fails here, not skips)."""
    return "asyncio", {"use_uvloop": request.param == "uvloop"}


@pytest.fixture(params=sorted(CLIENTS))
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@contextlib.asynccontextmanager
async def client_of(kind: str, base: str, seconds: float = 30) -> AsyncIterator[Upstream]:
    client = CLIENTS[kind](base, seconds)
    try:
        yield client
    finally:
        await client.aclose()


def test_connect_takes_the_lean_client_for_http_and_aiohttp_for_https() -> None:
    assert isinstance(upstream.connect("http://127.0.0.1:8000/v1", 1), LeanUpstream)
    assert isinstance(upstream.connect("https://engine.example/v1", 1), AiohttpUpstream)


async def test_a_request_names_the_base_path_and_host_and_carries_its_body(kind: str) -> None:
    async with engine(answering) as (base, peers), client_of(kind, base) as client:
        assert await client.request("POST", "/chat/completions", b'{"a":1}', JSON) == (200, b'echo {"a":1}')
        assert await client.request("GET", "/models", None, {}) == (200, b"echo ")
    head, body = peers[0].requests[0]
    lines = head.decode().split("\r\n")
    port = base.split(":")[2].split("/")[0]
    assert lines[0] == "POST /v1/chat/completions HTTP/1.1" and body == b'{"a":1}'
    assert {"host: 127.0.0.1:" + port, "content-type: application/json", "content-length: 7"} <= {
        line.lower() for line in lines
    }
    assert peers[0].requests[1][0].startswith(b"GET /v1/models HTTP/1.1\r\n")


@pytest.mark.parametrize("framing", ["length", "chunked", "close", "close 1.1", "identity"])
async def test_a_reply_is_read_whole_whatever_its_framing(kind: str, framing: str) -> None:
    text = b'{"choices": []}' * 300  # more than one read's worth
    wire = {
        "length": reply(text),
        "chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (text[:1000], text[1000:]))
        + b"0\r\n\r\n",
        "close": b"HTTP/1.0 200 OK\r\n\r\n" + text,  # the body ends where the connection does
        "close 1.1": b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + text,
        "identity": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\n" + text,  # (not chunked: to the close)
    }[framing]

    async def handler(peer: Peer) -> None:
        await peer.read()
        await peer.send(wire)
        if framing == "length" or framing == "chunked":
            await peer.read()  # (keeps the connection; the client closes it)

    async with engine(handler) as (base, _), client_of(kind, base) as client:
        assert await client.request("POST", "/chat/completions", b"{}", JSON) == (200, text)


async def test_an_error_status_is_returned_with_its_body(kind: str) -> None:
    async def handler(peer: Peer) -> None:
        await peer.read()
        await peer.send(reply(b'{"error": "busy"}', status="503 Service Unavailable"))
        await peer.read()

    async with engine(handler) as (base, _), client_of(kind, base) as client:
        assert await client.request("POST", "/chat/completions", b"{}", JSON) == (503, b'{"error": "busy"}')


async def test_a_kept_connection_is_reused_until_the_engine_says_close() -> None:
    async def handler(peer: Peer) -> None:
        await peer.read()
        await peer.send(reply(b"first"))
        await peer.read()
        await peer.send(reply(b"second", "Connection: close"))
        await peer.read()  # a third request on this connection would land here (and not be answered)

    async with engine(handler) as (base, peers), client_of("lean", base, seconds=10) as client:
        assert [await client.request("GET", "/models", None, {}) for _ in range(3)] == [
            (200, b"first"),
            (200, b"second"),
            (200, b"first"),
        ]
    assert [len(p.requests) for p in peers] == [2, 1]


async def test_a_connection_the_engine_closed_while_idle_is_not_used_again() -> None:
    async def handler(peer: Peer) -> None:  # one request per connection, then closed (no Connection: close)
        await peer.read()
        await peer.send(reply(b"ok"))

    async with engine(handler) as (base, peers), client_of("lean", base) as client:
        assert await client.request("GET", "/models", None, {}) == (200, b"ok")
        assert isinstance(client, LeanUpstream) and len(client._idle) == 1
        await lost(client)
        assert await client.request("GET", "/models", None, {}) == (200, b"ok")
    assert [len(p.requests) for p in peers] == [1, 1]


@pytest.mark.parametrize("idle_reuse", [3600.0, 0.0])
async def test_a_connection_idle_past_the_engines_keep_alive_is_not_reused(
    idle_reuse: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(upstream, "IDLE_REUSE", idle_reuse)  # 0: every idle connection is too old
    async with engine(answering) as (base, peers), client_of("lean", base) as client:
        for _ in range(3):
            assert await client.request("GET", "/models", None, {}) == (200, b"echo ")
    assert [len(p.requests) for p in peers] == ([3] if idle_reuse else [1, 1, 1])


BROKEN = {
    "cut short": reply(b"x" * 100)[:-90],
    "not http": b"HELLO THERE\r\n\r\n",
    "closed at once": b"",
}
UPGRADE = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n"
"""An upgrade is broken for the lean client too (aiohttp returns it as a 101)."""


@pytest.mark.parametrize(
    ("kind", "broken"),
    [(kind, broken) for kind in sorted(CLIENTS) for broken in sorted(BROKEN)] + [("lean", "an upgrade")],
)
async def test_a_broken_reply_is_an_upstream_error_and_the_next_call_works(kind: str, broken: str) -> None:
    wire = BROKEN.get(broken, UPGRADE)

    async def handler(peer: Peer) -> None:
        await peer.read()
        if len(peers) == 1:  # the first connection breaks; later ones answer
            await peer.send(wire)
            return
        await peer.send(reply(b"fine"))
        await peer.read()

    async with engine(handler) as (base, peers), client_of(kind, base) as client:
        with pytest.raises(UpstreamError):
            await client.request("POST", "/chat/completions", b"{}", JSON)
        assert await client.request("POST", "/chat/completions", b"{}", JSON) == (200, b"fine")


async def test_a_second_reply_nobody_asked_for_does_not_answer_the_next_request() -> None:
    async def handler(peer: Peer) -> None:
        await peer.read()
        if len(peers) == 1:
            await peer.send(reply(b"asked") + reply(b"stale"))  # two replies to one request
        else:
            await peer.send(reply(b"fresh"))
        await peer.read()

    async with engine(handler) as (base, peers), client_of("lean", base) as client:
        assert await client.request("GET", "/models", None, {}) == (200, b"asked")
        assert await client.request("GET", "/models", None, {}) == (200, b"fresh")
    assert len(peers) == 2


async def test_an_interim_reply_is_skipped() -> None:
    async def handler(peer: Peer) -> None:
        await peer.read()
        await peer.send(b"HTTP/1.1 100 Continue\r\n\r\n" + reply(b"final"))
        await peer.read()

    async with engine(handler) as (base, _), client_of("lean", base) as client:
        assert await client.request("GET", "/models", None, {}) == (200, b"final")


async def test_an_engine_that_never_answers_times_out_and_its_connection_is_dropped(kind: str) -> None:
    async def handler(peer: Peer) -> None:
        await peer.read()
        await peer.read()  # never answers; returns when the client closes the connection

    async with engine(handler) as (base, peers), client_of(kind, base, seconds=0.2) as client:
        with pytest.raises(TimeoutError):
            await client.request("POST", "/chat/completions", b"{}", JSON)
        with anyio.fail_after(10):
            await peers[0].closed.wait()  # the client closed it: its state was unknown


async def test_nobody_listening_is_an_upstream_error(kind: str) -> None:
    with socket.socket() as held:  # bound, never listening: connecting is refused while we hold it
        held.bind(("127.0.0.1", 0))
        base = f"http://127.0.0.1:{held.getsockname()[1]}/v1"
        async with client_of(kind, base) as client:
            with pytest.raises(UpstreamError):
                await client.request("GET", "/models", None, {})


@pytest.mark.parametrize("header", [("x-a", "1\r\nInjected: 1"), ("x-a\nInjected", "1"), ("x-a", "1\0")])
async def test_a_header_that_would_split_the_request_is_refused_before_anything_is_sent(
    header: tuple[str, str],
) -> None:
    async with engine(answering) as (base, peers), client_of("lean", base) as client:
        with pytest.raises(UpstreamError, match="CR, LF or NUL"):
            await client.request("GET", "/models", None, dict([header]))
    assert peers == []


async def test_closing_the_client_fails_a_call_in_flight() -> None:
    on_the_wire = anyio.Event()

    async def handler(peer: Peer) -> None:
        await peer.read()
        on_the_wire.set()
        await peer.read()

    outcome: list[BaseException] = []
    async with engine(handler) as (base, _), client_of("lean", base) as client:

        async def call() -> None:
            try:
                await client.request("GET", "/models", None, {})
            except UpstreamError as exc:
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            with anyio.fail_after(10):
                await on_the_wire.wait()
            await client.aclose()
    assert len(outcome) == 1
    with pytest.raises(UpstreamError, match="closed"):
        await client.request("GET", "/models", None, {})


async def test_concurrent_calls_each_get_their_own_reply(kind: str) -> None:
    calls = 8
    everyone = anyio.Event()

    async def handler(peer: Peer) -> None:
        while True:
            _, body = await peer.read()
            if sum(len(p.requests) for p in peers) == calls:
                everyone.set()
            await everyone.wait()  # no reply until all eight are in: they are truly concurrent
            await peer.send(reply(b"echo " + body))

    got: dict[int, tuple[int, bytes]] = {}
    async with engine(handler) as (base, peers), client_of(kind, base) as client:

        async def call(i: int) -> None:
            got[i] = await client.request("POST", "/chat/completions", str(i).encode(), JSON)

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                for i in range(calls):
                    tg.start_soon(call, i)
    assert got == {i: (200, b"echo %d" % i) for i in range(calls)} and len(peers) == calls


async def test_connections_a_burst_left_idle_are_closed_once_too_old_to_reuse() -> None:
    async with engine(answering) as (base, peers), client_of("lean", base) as client:
        assert isinstance(client, LeanUpstream)
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                for _ in range(8):
                    tg.start_soon(client.request, "GET", "/models", None, {})
        assert len(client._idle) == len(peers) == 8  # (each its own: no reply waits for another)
        for connection in list(client._idle)[:-1]:
            connection.idle_since -= upstream.IDLE_REUSE  # as if the burst were long past, but for the last
        assert await client.request("GET", "/models", None, {}) == (200, b"echo ")
        [kept] = client._idle
        port = kept._transport.get_extra_info("sockname")[1] if kept._transport else None
        pruned = [p for p in peers if p.stream.extra(SocketAttribute.remote_port) != port]
        assert len(pruned) == 7
        with anyio.fail_after(10):
            for peer in pruned:  # the engine sees them closed
                await peer.closed.wait()


async def test_a_body_cut_by_a_reset_is_an_error_not_a_whole_reply() -> None:
    # A body that ends at the close is whole only when the connection ended cleanly.
    async def handler(peer: Peer) -> None:
        await peer.read()
        if len(peers) > 1:
            await peer.send(reply(b"fine"))
            await peer.read()
            return
        await peer.send(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\npart of it")
        raw = peer.stream.extra(SocketAttribute.raw_socket)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST

    async with engine(handler) as (base, peers), client_of("lean", base) as client:
        with pytest.raises(UpstreamError):
            await client.request("GET", "/models", None, {})
        assert await client.request("GET", "/models", None, {}) == (200, b"fine")


async def test_a_connection_whose_end_the_engine_announced_is_not_taken_again() -> None:
    # The engine's FIN and a caller's next call can land in one loop pass; the caller must not
    # take the connection between eof_received and connection_lost (here: eof_received alone).
    async with engine(answering) as (base, peers), client_of("lean", base) as client:
        assert isinstance(client, LeanUpstream)
        assert await client.request("GET", "/models", None, {}) == (200, b"echo ")
        [idle] = client._idle
        assert idle.eof_received() is False
        assert await client.request("GET", "/models", None, {}) == (200, b"echo ")
    assert [len(p.requests) for p in peers] == [1, 1]


async def test_a_time_out_of_zero_is_no_time_out(kind: str) -> None:
    async with engine(answering) as (base, _), client_of(kind, base, seconds=0) as client:
        assert await client.request("GET", "/models", None, {}) == (200, b"echo ")


async def test_a_cancelled_caller_leaves_no_connection_to_reuse(kind: str) -> None:
    on_the_wire = anyio.Event()

    async def handler(peer: Peer) -> None:
        await peer.read()
        on_the_wire.set()
        await peer.read()  # never answers; returns when the client closes the connection

    async with engine(handler) as (base, peers), client_of(kind, base) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.request, "GET", "/models", None, {})
            with anyio.fail_after(10):
                await on_the_wire.wait()
            tg.cancel_scope.cancel()
        with anyio.fail_after(10):
            await peers[0].closed.wait()
        if isinstance(client, LeanUpstream):
            assert not client._idle and not client._busy


def test_credentials_in_the_url_go_through_aiohttp_which_sends_them() -> None:
    assert isinstance(upstream.connect("http://user:secret@127.0.0.1:8000/v1", 1), AiohttpUpstream)
    with pytest.raises(ValueError, match="without credentials"):
        LeanUpstream("http://user:secret@127.0.0.1:8000/v1", 1)


def test_an_international_host_name_goes_on_the_wire_as_idna() -> None:
    client = LeanUpstream("http://b\u00fccher.invalid:8000/v1", 1)
    assert client._host_header == "xn--bcher-kva.invalid:8000" and client._host == "xn--bcher-kva.invalid"


async def test_a_header_that_is_not_latin1_is_an_upstream_error() -> None:
    async with engine(answering) as (base, peers), client_of("lean", base) as client:
        with pytest.raises(UpstreamError, match="latin-1"):
            await client.request("GET", "/models", None, {"authorization": "Bearer sk\u2013x"})
    assert peers == []
