"""One running instance of a wrapped MCP server (a process per episode), and a warm pool of them.

Layer: below the wrapped environment, above the SDK client. An instance is an async context
manager: a fresh workspace directory, the server started in it under the sandbox, an
initialized `mcp.Client`; leaving it stops the process tree and removes the workspace. Both an
episode and the pool hold instances through a `Host` (they outlive the request that starts them).
"""

from __future__ import annotations

import contextlib
import logging
import shlex
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import Client, MCPError, StdioServerParameters
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from mcpgym._episode.host import Host, Release
from mcpgym._wrap._relay import Passthrough, Relay, wanted
from mcpgym._wrap._sandbox import Sandbox

logger = logging.getLogger("mcpgym.wrap")

WORKSPACE = "{workspace}"
"""The placeholder that a wrapped command's arguments may hold: the episode's workspace path."""


@dataclass(frozen=True)
class Instance:
    client: Client
    workspace: Path
    command: tuple[str, ...]
    relay: Relay


@dataclass(frozen=True)
class Launcher:
    """How to start instances of one wrapped server."""

    argv: tuple[str, ...]
    sandbox: Sandbox
    base: Path
    """The directory under which each instance gets its own workspace."""
    start_timeout: float = 30.0
    call_timeout: float = 60.0
    passthrough: Passthrough = field(default_factory=Passthrough)

    @contextlib.asynccontextmanager
    async def start(
        self, *, network: bool = False, capabilities: types.ClientCapabilities | None = None
    ) -> AsyncIterator[Instance]:
        """An instance whose client declares `capabilities` (the driving client's; _relay)."""
        relay = Relay(self.passthrough)
        workspace = Path(tempfile.mkdtemp(prefix="ws-", dir=self.base))
        try:
            argv = [arg.replace(WORKSPACE, str(workspace)) for arg in self.argv]
            cmd = self.sandbox.command(argv, workspace, network=network)
            params = StdioServerParameters(command=cmd[0], args=cmd[1:], cwd=str(workspace))
            async with contextlib.AsyncExitStack() as stack:
                try:
                    # The SDK's read timeout bounds the initialize handshake: a server that never
                    # answers fails its episode's reset instead of hanging it. (Each tool call
                    # passes its own timeout.)
                    client = Client(
                        params, read_timeout_seconds=self.start_timeout, **relay.client_options(capabilities)
                    )
                    with relay.current():  # the stdio reader starts here: bad lines reach this relay
                        client = await stack.enter_async_context(client)
                except Exception as exc:
                    raise WrappedServerError(self._why_not_started(exc)) from exc
                yield Instance(client, workspace, tuple(argv), relay)
        finally:
            relay.summarise(shlex.join(self.argv))
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(_remove, workspace)

    def _why_not_started(self, exc: BaseException) -> str:
        leaf = _leaf(exc)
        code = getattr(leaf, "code", None)
        if code == REQUEST_TIMEOUT:
            why = f"did not answer initialize within {self.start_timeout:g}s"
        elif code == CONNECTION_CLOSED:
            why = "exited before it answered initialize (its stderr says why)"
        else:
            why = f"could not be started: {type(leaf).__name__}: {leaf}"
        return f"the wrapped server {shlex.join(self.argv)} {why}"


class WrappedServerError(RuntimeError):
    """The wrapped server could not be started (it exited, never answered, or is not a server)."""


def _leaf(exc: BaseException) -> BaseException:
    """The first exception at the bottom of task-group nesting (what actually went wrong)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)  # what the sandboxed server left: nothing to keep


class WarmPool:
    """Up to `size` instances started ahead of time, so a reset does not wait for a spawn.

    Entered once per host (it holds its instances in a task group of its own); `take()` hands out
    a ready instance or, when none is ready, starts one on the spot. Instances of tasks that ask
    for network access are always started on the spot (the pool's have none).
    """

    def __init__(self, launcher: Launcher, size: int) -> None:
        self.launcher = launcher
        self.size = size
        self._host: Host | None = None
        self._send: MemoryObjectSendStream[tuple[Instance, Release]] | None = None
        self._ready: MemoryObjectReceiveStream[tuple[Instance, Release]] | None = None
        self._free = anyio.Semaphore(size)
        self._changed = anyio.Event()
        self._starting = 0
        """Instances the pool is starting now."""
        self._waiting = 0
        """Resets waiting for one of those (rather than starting another beside them)."""
        self.spawned = 0
        """Instances the pool has started."""
        self.hits = 0
        """Resets served by an instance that was already running."""
        self.on_the_spot = 0
        """Resets that found no instance waiting nor one starting for them, and started their own."""
        self.dead = 0
        """Waiting instances found dead when a reset came for them (then passed over)."""

    @property
    def ready(self) -> int:
        """Instances started and waiting for a reset."""
        return 0 if self._ready is None else self._ready.statistics().current_buffer_used

    async def changed(self) -> None:
        """Wait until an instance is started or taken (for tests and monitoring)."""
        await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[WarmPool]:
        send, receive = anyio.create_memory_object_stream[tuple[Instance, Release]](self.size)
        self._send, self._ready = send, receive
        async with send, receive, anyio.create_task_group() as fill, anyio.create_task_group() as held:
            self._host = Host(held)
            fill.start_soon(self._fill)
            try:
                yield self
            finally:
                fill.cancel_scope.cancel()
                await self._host.aclose()  # every instance, waiting or handed out, is stopped

    async def take(
        self, *, network: bool = False, capabilities: types.ClientCapabilities | None = None
    ) -> tuple[Instance, Release]:
        """A waiting instance; started on the spot for network access or a client declaring a
        capability the pool's instances do not (they declare none, as RL clients do)."""
        assert self._host is not None and self._ready is not None
        while not network and not wanted(capabilities):
            ready = await self._next_ready()
            if ready is None:
                break
            self._free.release()
            self._notify()
            if await _alive(ready[0]):
                self.hits += 1
                return ready
            self.dead += 1
            await ready[1]()  # it exited while it waited (crashed, timed out): stop what is left
        self.on_the_spot += 1
        return await self._host.enter(self.launcher.start(network=network, capabilities=capabilities))

    async def _next_ready(self) -> tuple[Instance, Release] | None:
        """A waiting instance, or one the pool is starting that no other reset waits for (a
        burst of resets does not start more servers than it needs beside the pool's); None
        when neither."""
        assert self._ready is not None
        while True:
            try:
                return self._ready.receive_nowait()
            except anyio.WouldBlock:
                pass
            if self._starting <= self._waiting:
                return None
            self._waiting += 1
            try:
                await self.changed()
            finally:
                self._waiting -= 1

    async def _fill(self) -> None:
        assert self._host is not None and self._send is not None
        backoff = 0.5
        while True:
            await self._free.acquire()
            self._starting += 1
            try:
                ready = await self._host.enter(self.launcher.start())
            except Exception:
                self._starting -= 1
                self._notify()
                self._free.release()
                logger.exception("starting a warm instance failed; retrying in %.1fs", backoff)
                await anyio.sleep(backoff)  # pacing retries of a failing command, not synchronisation
                backoff = min(backoff * 2, 30.0)
                continue
            backoff = 0.5
            self.spawned += 1
            self._starting -= 1
            self._send.send_nowait(ready)  # room is guaranteed: a free slot was acquired for it
            self._notify()


_PING_TIMEOUT = 5.0
"""Seconds a waiting instance has to answer the request that shows it is still alive."""


async def _alive(instance: Instance) -> bool:
    """One round trip, so no reset gets a server that died while it waited. `tools/list`, which
    every wrapped server answers (`ping` is gone from the 2026-07-28 protocol); any answer,
    even an error, shows it alive."""
    with anyio.move_on_after(_PING_TIMEOUT):
        try:
            await instance.client.list_tools()
        except MCPError as exc:
            return exc.code != CONNECTION_CLOSED
        except Exception:
            return False
        return True
    return False


def pooled(
    pool: WarmPool, *, network: bool, capabilities: types.ClientCapabilities | None = None
) -> AbstractAsyncContextManager[Instance]:
    """An instance from `pool`, as a context the episode holds (leaving it stops the instance)."""

    @contextlib.asynccontextmanager
    async def hold() -> AsyncIterator[Instance]:
        instance, release = await pool.take(network=network, capabilities=capabilities)
        try:
            yield instance
        finally:
            await release()

    return hold()
