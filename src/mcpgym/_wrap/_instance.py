"""One running instance of a wrapped MCP server (a process per episode), and a warm pool of them.

Layer: below the wrapped environment, above the SDK client. An instance is an async context
manager: a fresh workspace directory (a tmpfs of its own, a uid and a memory cgroup of its own
on root hosts), the task's set-up done in it, the server started in it under the sandbox, an
initialized `mcp.Client`; leaving it stops the process tree and removes the workspace. Both an
episode and the pool hold instances through a `Host` (they outlive the request that starts them).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import stat
import subprocess
import tempfile
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import Client, MCPError
from mcp.client.stdio import get_default_environment
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from mcpgym._episode.host import Host, Release
from mcpgym._isolation import cgroups, uids
from mcpgym._isolation.tmpfs import mount_tmpfs
from mcpgym._isolation.tree import remove_tree
from mcpgym._wrap._relay import Passthrough, Relay, wanted
from mcpgym._wrap._sandbox import Sandbox
from mcpgym._wrap._stdio import MESSAGE_LIMIT, BoundedStdio
from mcpgym._wrap._tasks import TaskSpec

logger = logging.getLogger("mcpgym.wrap")

WORKSPACE = "{workspace}"
"""The placeholder that a wrapped command's arguments (and `Sandbox.env` values) may hold: the
episode's workspace path."""
INSTANCE = "{instance}"
"""The placeholder for a name unique to the instance (its workspace's name)."""
_FETCHERS = {"npx", "uvx", "pipx", "bunx", "pnpx"}
"""Programs that fetch the server at run time: without network they fail (said plainly)."""


@dataclass(frozen=True)
class Instance:
    client: Client
    workspace: Path
    command: tuple[str, ...]
    relay: Relay


@dataclass(frozen=True)
class _Box:
    """What one instance holds of the host: its workspace, its uid (root hosts), its memory cgroup."""

    workspace: Path
    uid: int | None
    group: cgroups.Group | None

    def join(self, argv: list[str]) -> list[str]:
        return argv if self.group is None else self.group.join_argv(argv)


@dataclass(frozen=True)
class Launcher:
    """How to start instances of one wrapped server."""

    argv: tuple[str, ...]
    sandbox: Sandbox
    base: Path
    """The directory under which each instance gets its own workspace."""
    start_timeout: float = 30.0
    call_timeout: float = 60.0
    message_bytes: int = MESSAGE_LIMIT
    """Largest message taken from the server (a larger answer becomes an `isError` result)."""
    tool_pages: int = 100
    """Pages of `tools/list` read at start-up (a server that paginates forever fails to wrap)."""
    passthrough: Passthrough = field(default_factory=Passthrough)
    show_stderr: bool = False
    """Pass each instance's stderr through (else kept quiet, and quoted when it fails to start)."""

    @contextlib.asynccontextmanager
    async def start(
        self,
        *,
        network: bool = False,
        task: TaskSpec | None = None,
        capabilities: types.ClientCapabilities | None = None,
    ) -> AsyncIterator[Instance]:
        """A running instance; with `task`, its files and set-up commands are in place first (a
        server may check its workspace as it starts). Its client declares `capabilities` (the
        driving client's sampling, elicitation and roots: _relay)."""
        network = network or self.sandbox.network
        relay = Relay(self.passthrough)
        async with contextlib.AsyncExitStack() as stack:
            stack.callback(relay.summarise, shlex.join(self.argv))
            box = await stack.enter_async_context(self._box())
            values = {WORKSPACE: str(box.workspace), INSTANCE: box.workspace.name}
            argv = [_fill(arg, values) for arg in self.argv]
            env = self._environment(values, network)
            if task is not None:
                await self._set_up(task, box, env, network)
            cmd = box.join(self.sandbox.command(argv, box.workspace, network=network, uid=box.uid))
            transport = BoundedStdio(
                cmd, env, box.workspace, self.message_bytes, bad_line=relay.bad_line, show_stderr=self.show_stderr
            )
            # The SDK's read timeout bounds the initialize handshake: a server that never
            # answers fails its episode's reset instead of hanging it. (Each tool call
            # passes its own timeout.)
            client = Client(transport, read_timeout_seconds=self.start_timeout, **relay.client_options(capabilities))
            try:
                client = await stack.enter_async_context(client)
            except Exception as exc:
                raise WrappedServerError(self._why_not_started(exc, network, transport.stderr_tail)) from exc
            yield Instance(client, box.workspace, tuple(argv), relay)

    def _environment(self, values: dict[str, str], network: bool) -> dict[str, str]:
        env = get_default_environment()
        if not network:
            # npm (npx) then fails at once when the package is not installed, instead of
            # retrying a registry it cannot reach for a minute.
            env["npm_config_offline"] = "true"
        env["NO_UPDATE_NOTIFIER"] = "1"
        env.update({key: _fill(value, values) for key, value in self.sandbox.env.items()})
        return env

    @contextlib.asynccontextmanager
    async def _box(self) -> AsyncIterator[_Box]:
        uid = uids.claim() if self.sandbox.own_uid else None
        try:
            workspace = await anyio.to_thread.run_sync(self._workspace, uid)
            try:
                hierarchy = self.sandbox.cgroups
                group = None
                if isinstance(hierarchy, cgroups.Hierarchy) and self.sandbox.memory_bytes is not None:
                    group = cgroups.Group(hierarchy, self.sandbox.memory_bytes)
                try:
                    yield _Box(workspace, uid, group)
                finally:
                    if group is not None:
                        with anyio.CancelScope(shield=True):
                            await anyio.to_thread.run_sync(group.remove)  # whatever still runs in it
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(remove_tree, workspace)
        finally:
            if uid is not None:
                uids.release(uid)  # nothing of it runs any more: the group was emptied, the sandbox is gone

    def _workspace(self, uid: int | None) -> Path:
        """A new workspace: a tmpfs of its own (root hosts), owned by the instance's uid. 0711:
        bubblewrap, root without CAP_DAC_OVERRIDE, must enter it for the server."""
        workspace = Path(tempfile.mkdtemp(prefix="ws-", dir=self.base))
        owner = os.geteuid() if uid is None else uid
        try:
            if self.sandbox.quota:
                quota = (self.sandbox.workspace_bytes, self.sandbox.workspace_files)
                mount_tmpfs(workspace, quota, f"mode=0711,uid={owner},gid={owner}")
            elif uid is not None:
                os.chown(workspace, uid, uid)
                workspace.chmod(0o711)
        except OSError:
            workspace.rmdir()
            raise
        return workspace

    async def _set_up(self, task: TaskSpec, box: _Box, env: dict[str, str], network: bool) -> None:
        """The task's files, then its set-up commands, each run under the sandbox (as the server
        will be: same uid, cgroup, network and view) with the start timeout."""
        await anyio.to_thread.run_sync(place_files, box.workspace, task.files, box.uid)
        for line in task.setup:
            argv = ["/bin/sh", "-c", line]
            cmd = self.sandbox.command(argv, box.workspace, network=network, uid=box.uid, programs=self.argv)
            try:
                with anyio.fail_after(self.start_timeout):
                    done = await anyio.run_process(
                        box.join(cmd), env=env, cwd=box.workspace, check=False, stdin=subprocess.DEVNULL
                    )
            except TimeoutError:
                raise WrappedServerError(
                    f"task {task.id!r}: the set-up command {line!r} did not finish within {self.start_timeout:g}s"
                ) from None
            if done.returncode != 0:
                said = (done.stderr or done.stdout).decode(errors="replace").strip()[-500:]
                raise WrappedServerError(
                    f"task {task.id!r}: the set-up command {line!r} failed (exit status {done.returncode}): {said}"
                )

    def _why_not_started(self, exc: BaseException, network: bool = False, stderr: bytes = b"") -> str:
        leaf = _leaf(exc)
        code = getattr(leaf, "code", None)
        said = stderr.decode(errors="replace").strip()
        if code == REQUEST_TIMEOUT:
            why = f"did not answer initialize within {self.start_timeout:g}s"
        elif code == CONNECTION_CLOSED:
            why = "exited before it answered initialize"
            if not said and not self.show_stderr:
                why += " (it wrote nothing to stderr)"
        else:
            why = f"could not be started: {type(leaf).__name__}: {leaf}"
        hidden = self.sandbox.unreadable(self.argv)
        if hidden:
            why += (
                f"; it runs as an unprivileged uid of its own, which cannot read {', '.join(hidden)} "
                "(make it readable by others, e.g. chmod o+rX, as installed packages are)"
            )
        program = Path(self.argv[0]).name if self.argv else ""
        if program in _FETCHERS and not network and self.sandbox.mode == "bwrap":
            why += (
                f". {program} fetches the server at run time, and the sandbox has no network: install it "
                "first (npm install PACKAGE, then run node_modules/.bin/NAME; or a virtualenv's bin/NAME) "
                'or allow the network (mcpgym wrap --network, or "network": true in a task)'
            )
        if said:
            why += f"; its stderr ended: {said[-500:]}"
        return f"the wrapped server {shlex.join(self.argv)} {why}"


def _fill(text: str, values: dict[str, str]) -> str:
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return text


class WrappedServerError(RuntimeError):
    """The wrapped server could not be started (it exited, never answered, or is not a server)."""


def _leaf(exc: BaseException) -> BaseException:
    """The first exception at the bottom of task-group nesting (what actually went wrong)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def place_files(workspace: Path, files: dict[str, str], uid: int | None = None) -> None:
    """Write the task's files into the workspace (owned by `uid`, the server's), never through a
    link or into a FIFO: a set-up command or an instance may have run there (untrusted), and a
    link it made would otherwise turn our write into one anywhere on the host."""
    for path, text in files.items():
        parts = PurePosixPath(path).parts
        fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for part in parts[:-1]:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                fd, parent = _open_at(fd, part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, path), fd
                os.close(parent)
                if uid is not None:
                    os.fchown(fd, uid, uid)
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK
            fd, parent = _open_at(fd, parts[-1], flags, path, mode=0o644), fd
            os.close(parent)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise RuntimeError(f"cannot place the task's file {path}: the workspace has something else there")
            if uid is not None:
                os.fchown(fd, uid, uid)
            data = text.encode("utf-8")
            while data:
                data = data[os.write(fd, data) :]
        finally:
            os.close(fd)


def _open_at(fd: int, name: str, flags: int, path: str, mode: int = 0o777) -> int:
    try:
        return os.open(name, flags, mode, dir_fd=fd)
    except OSError as exc:
        raise RuntimeError(
            f"cannot place the task's file {path}: {name} in the workspace is a link or not usable ({exc.strerror})"
        ) from None


class WarmPool:
    """Up to `size` instances started ahead of time, so a reset does not wait for a spawn.

    Entered once per host (it holds its instances in a task group of its own): a server enters it
    as it starts (`Environment.start_hosting`), in-process the first reset does. It starts its
    instances side by side and refills each slot as it is taken. `take()` hands out a ready
    instance, or waits for one the pool is starting that no other reset waits for, or (neither)
    starts one on the spot. Instances for tasks that ask for network access, or for clients that
    declare capabilities, are always started on the spot (the pool's have neither).
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
        self.live = 0
        """Instances of this pool running now: waiting, being checked, or handed out."""

    @property
    def ready(self) -> int:
        """Instances started and waiting for a reset."""
        return 0 if self._ready is None else self._ready.statistics().current_buffer_used

    async def changed(self) -> None:
        """Wait until an instance is started, taken or stopped (for tests and monitoring)."""
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
            for _ in range(self.size):  # started side by side: a pool fills as fast as one start
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
            try:
                alive = await _alive(ready[0])
            except BaseException:
                # The reset was cancelled while it checked this one: it is nobody's now, and
                # would otherwise run, held by the pool, until the pool closes.
                await ready[1]()
                raise
            if alive:
                self.hits += 1
                return ready
            self.dead += 1
            await ready[1]()  # it exited while it waited (crashed, timed out): stop what is left
        self.on_the_spot += 1
        return await self._start(network=network, capabilities=capabilities)

    async def _start(self, **options: Any) -> tuple[Instance, Release]:
        assert self._host is not None
        return await self._host.enter(self._counted(self.launcher.start(**options)))

    @contextlib.asynccontextmanager
    async def _counted(self, instance: AbstractAsyncContextManager[Instance]) -> AsyncIterator[Instance]:
        async with instance as started:
            self.live += 1
            try:
                yield started
            finally:
                self.live -= 1
                self._notify()

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
                ready = await self._start()
            except BaseException as exc:
                self._starting -= 1
                self._notify()  # a reset waiting for this start goes on (to start its own, or fail)
                if not isinstance(exc, Exception):
                    raise  # cancelled: the pool is closing
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
