"""The stdio transport to a wrapped server, with a bound on what one message may cost us.

Layer: an MCP SDK `Transport` (the SDK's session and types on top, a process below). The SDK's
own stdio client reads a line however long it grows: one huge answer from an untrusted server
(hundreds of MiB for a sub-KiB call) is all held and parsed in the environment's process. Here a
line longer than `limit` bytes is skipped as it streams in (its first and last bytes kept to
find its request id) and the request it answers gets a JSON-RPC error instead, which the proxy
turns into an `isError` result: the episode goes on. A stray oversized message (a notification,
a request of the server's) is dropped and logged.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import mcp_types as types
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage

logger = logging.getLogger("mcpgym.wrap")
_sdk_logger = logging.getLogger("mcp.client.stdio")
"""A line that is not JSON-RPC is logged as the SDK's stdio client logs it (same logger, message
and exception), so whatever counts or filters those records sees ours alike."""

MESSAGE_LIMIT = 16 << 20
"""Largest message (bytes of one JSON-RPC line) taken from a wrapped server."""
TOO_LARGE = types.INTERNAL_ERROR
"""The JSON-RPC error code an oversized answer is replaced with (not one the SDK gives a meaning
of its own, as it does -32000 and -32001: closed, timed out)."""
_KEPT = 4096  # bytes kept from each end of an oversized line: where serializers put "id"
STDERR_KEPT = 2048
"""Bytes kept of the end of a wrapped server's stderr (quoted when it fails to start)."""
_STOP_GRACE = 2.0  # seconds a server has to exit once its stdin closes, then to die of SIGTERM
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')


@dataclass
class BoundedStdio:
    """Starts `argv` and speaks MCP over its stdin and stdout (a `Transport` for `mcp.Client`)."""

    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: Path
    limit: int = MESSAGE_LIMIT
    bad_line: Callable[[bytes], None] | None = None
    """Told of each line that is not JSON-RPC (else each is logged as the SDK logs it)."""
    show_stderr: bool = False
    """Pass the server's stderr through to ours (else only its last bytes are kept, in
    `stderr_tail`: what a server that fails to start said)."""
    stderr_tail: bytes = b""
    _pending: dict[str | int, None] = field(default_factory=dict)  # ids of our requests awaiting an answer
    _stack: contextlib.AsyncExitStack | None = None

    async def __aenter__(self) -> TransportStreams:
        self._stack = contextlib.AsyncExitStack()
        return await self._stack.enter_async_context(self._run())

    async def __aexit__(self, *exc: object) -> None:
        assert self._stack is not None
        await self._stack.__aexit__(*exc)  # type: ignore[arg-type]

    @contextlib.asynccontextmanager
    async def _run(self) -> AsyncIterator[TransportStreams]:
        stderr = None if self.show_stderr else subprocess.PIPE
        process = await anyio.open_process(
            list(self.argv), env=dict(self.env), cwd=self.cwd, stderr=stderr, start_new_session=True
        )
        drained = anyio.Event()
        to_session, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write, from_session = anyio.create_memory_object_stream[SessionMessage](0)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._reader, process, to_session)
                tg.start_soon(self._writer, process, from_session)
                tg.start_soon(self._keep_stderr, process, drained)
                try:
                    yield read, write
                finally:
                    with anyio.CancelScope(shield=True):
                        await _stop(process)
                        with anyio.move_on_after(_STOP_GRACE):  # what it said as it died
                            await drained.wait()
                        if process.stderr is not None:
                            with contextlib.suppress(OSError, anyio.ClosedResourceError, anyio.BrokenResourceError):
                                await process.stderr.aclose()
                    tg.cancel_scope.cancel()
        finally:
            for stream in (read, write, to_session, from_session):
                await stream.aclose()

    async def _keep_stderr(self, process: Process, drained: anyio.Event) -> None:
        """Read the server's stderr as it comes (a full pipe would stall it), keeping its end."""
        try:
            if process.stderr is not None:
                with contextlib.suppress(
                    anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError
                ):
                    async for chunk in process.stderr:
                        self.stderr_tail = (self.stderr_tail + chunk)[-STDERR_KEPT:]
        finally:
            drained.set()

    async def _writer(self, process: Process, messages: MemoryObjectReceiveStream[SessionMessage]) -> None:
        assert process.stdin is not None
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async for item in messages:
                message = item.message
                if isinstance(message, types.JSONRPCRequest):
                    self._pending[message.id] = None
                line = message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                await process.stdin.send(line.encode())

    async def _reader(self, process: Process, out: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
        assert process.stdout is not None
        buffer = bytearray()
        skipped: tuple[bytes, bytearray, int] | None = None  # an oversized line: head, tail, size
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with out:
                async for chunk in process.stdout:
                    while chunk:
                        end = chunk.find(b"\n")
                        piece, chunk = (chunk, b"") if end < 0 else (chunk[:end], chunk[end + 1 :])
                        if skipped is not None:
                            head, tail, size = skipped
                            tail = (tail + piece)[-_KEPT:]
                            skipped = (head, tail, size + len(piece))
                        elif len(buffer) + len(piece) > self.limit:
                            whole = bytes(buffer + piece)
                            skipped = (whole[:_KEPT], bytearray(whole[-_KEPT:]), len(whole))
                            buffer.clear()
                        else:
                            buffer += piece
                        if end < 0:
                            continue
                        if skipped is not None:
                            message: SessionMessage | Exception | None = self._too_large(*skipped)
                            skipped = None
                        else:
                            message = self._parse(bytes(buffer))
                            buffer.clear()
                        if message is not None:
                            await out.send(message)

    def _parse(self, line: bytes) -> SessionMessage | Exception | None:
        if not line.strip():
            return None
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError as exc:
            if self.bad_line is not None:
                self.bad_line(line)
            else:
                _sdk_logger.exception("Failed to parse JSONRPC message from server")
            return exc  # the session surfaces it (as the SDK's stdio client does)
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            self._pending.pop(message.id, None)  # type: ignore[arg-type]
        return SessionMessage(message)

    def _too_large(self, head: bytes, tail: bytearray, size: int) -> SessionMessage | None:
        """The error that answers the request an oversized line answered (its id found in the
        line's first or last bytes, or the only request waiting), else None (dropped)."""
        ids = [_decoded(m.group(1)) for part in (bytes(tail), head) for m in _ID.finditer(part)]
        candidates = [i for i in reversed(ids) if i in self._pending] or (
            list(self._pending) if len(self._pending) == 1 else []
        )
        if not candidates:
            logger.warning("a wrapped server sent a %d-byte message (limit %d bytes); dropped", size, self.limit)
            return None
        request_id = candidates[0]
        self._pending.pop(request_id, None)
        text = f"its answer was {size} bytes, over the limit of {self.limit} bytes for one message; nothing of it kept"
        error = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=TOO_LARGE, message=text))
        return SessionMessage(error)


def _decoded(raw: bytes) -> str | int:
    if raw.startswith(b'"'):
        value = json.loads(raw)
        return value if isinstance(value, str) else str(value)
    return int(raw)


async def _stop(process: Process) -> None:
    """Close stdin, give the server a moment to exit, then SIGTERM and SIGKILL its process group
    (the sandbox's own pid namespace dies with it)."""
    with contextlib.suppress(OSError, anyio.ClosedResourceError, anyio.BrokenResourceError):
        if process.stdin is not None:
            await process.stdin.aclose()
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
        if await _exited(process, _STOP_GRACE):
            break
    with contextlib.suppress(OSError, anyio.ClosedResourceError, anyio.BrokenResourceError):
        if process.stdout is not None:
            await process.stdout.aclose()


async def _exited(process: Process, seconds: float) -> bool:
    """Whether the process exited within `seconds`, by its return code: not `wait()`, which on
    asyncio also waits for the pipes to close, and a daemon the server left may hold them."""
    with anyio.move_on_after(seconds):
        while process.returncode is None:  # noqa: ASYNC110 (no event says a process exited)
            await anyio.sleep(0.01)
        return True
    return False
