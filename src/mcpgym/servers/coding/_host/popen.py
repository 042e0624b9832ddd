"""A `subprocess.Popen` made in another thread, driven from the event loop as an anyio `Process`.

Layer: OS plumbing, no package imports. `anyio.open_process` forks from the event loop's thread;
`_cradle` must fork from a thread of its own (the one inside the episode's cgroup), so the
process is made there with `subprocess.Popen` and handed over. Its pipes are made non-blocking
and awaited with `anyio.wait_readable` / `wait_writable`; its exit with a pidfd, then reaped
with `Popen.wait()` (which cannot block by then). Only what `_process.WorkerProcess` uses.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import IO

import anyio
import anyio.lowlevel
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

_CHUNK = 65536


class _ReadPipe(ByteReceiveStream):
    def __init__(self, pipe: IO[bytes]) -> None:
        self._pipe = pipe
        self._fd = pipe.fileno()
        os.set_blocking(self._fd, False)

    async def receive(self, max_bytes: int = _CHUNK) -> bytes:
        await anyio.lowlevel.checkpoint_if_cancelled()
        while True:
            if self._pipe.closed:
                raise anyio.ClosedResourceError
            try:
                data = os.read(self._fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if not data:
                raise anyio.EndOfStream
            # A receive is a checkpoint even when data was there at once (a flood must stay
            # interruptible), but one that cannot lose the bytes just read.
            await anyio.lowlevel.cancel_shielded_checkpoint()
            return data

    async def aclose(self) -> None:
        if not self._pipe.closed:
            anyio.notify_closing(self._fd)  # a task waiting on it gets ClosedResourceError
            self._pipe.close()
        await anyio.lowlevel.checkpoint()


class _WritePipe(ByteSendStream):
    def __init__(self, pipe: IO[bytes]) -> None:
        self._pipe = pipe
        self._fd = pipe.fileno()
        os.set_blocking(self._fd, False)

    async def send(self, item: bytes) -> None:
        await anyio.lowlevel.checkpoint_if_cancelled()
        view = memoryview(item)
        while view:
            if self._pipe.closed:
                raise anyio.ClosedResourceError
            try:
                view = view[os.write(self._fd, view) :]
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        if not self._pipe.closed:
            anyio.notify_closing(self._fd)  # a task waiting on it gets ClosedResourceError
            self._pipe.close()
        await anyio.lowlevel.checkpoint()


class PopenProcess(Process):
    """`popen` (made with stdin and stdout pipes) as an anyio `Process`; stderr is not piped."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        assert popen.stdin is not None and popen.stdout is not None
        self._popen = popen
        self._stdin = _WritePipe(popen.stdin)
        self._stdout = _ReadPipe(popen.stdout)
        self._pidfd = os.pidfd_open(popen.pid)  # the pid cannot be reused before we reap it
        self._waiting = anyio.Lock()

    async def wait(self) -> int:
        async with self._waiting:  # one waiter on the pidfd at a time
            if self._popen.returncode is None:
                await anyio.wait_readable(self._pidfd)  # readable once the process has exited
                self._popen.wait()  # reaps it: returns at once
                os.close(self._pidfd)
        assert self._popen.returncode is not None
        return self._popen.returncode

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def send_signal(self, sig: signal.Signals) -> None:
        if self._popen.returncode is None:
            signal.pidfd_send_signal(self._pidfd, sig)

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    @property
    def stdin(self) -> ByteSendStream:
        return self._stdin

    @property
    def stdout(self) -> ByteReceiveStream:
        return self._stdout

    @property
    def stderr(self) -> None:
        return None

    async def aclose(self) -> None:
        """Close the pipes and wait for the process (killed if this is cancelled)."""
        await self._stdin.aclose()
        await self._stdout.aclose()
        try:
            await self.wait()
        except BaseException:
            self.kill()
            with anyio.CancelScope(shield=True):
                await self.wait()
            raise
