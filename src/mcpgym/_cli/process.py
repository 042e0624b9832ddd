"""`ServerProcess`: an HTTP environment server in a child process, for tests, benchmarks, demos.

Layer: tooling over the CLI (it only runs a command and reads its output). The child's stderr
is drained for its whole life — a server whose log pipe is never read blocks on its first long
log line — and kept (the last lines) for the error message if it fails to start.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import threading
from collections.abc import Sequence
from types import TracebackType
from typing import IO, Any, Self

from mcpgym._targets.connect import command

_BANNER = " on http"


class ServerProcess:
    """Start a server command that prints mcpgym's `serving NAME on URL` banner once listening.

    ```python
    with ServerProcess("python -m mcpgym.servers.echo --http --port 0") as server:
        async with mcpgym.connect(server.url) as env: ...
    ```
    `--port 0` picks a free port; the banner carries the real one. A leading `python` runs
    this interpreter. Leaving the block stops the server (SIGTERM, then SIGKILL); without a
    block, `start()` and `stop()`.
    """

    def __init__(self, argv: str | Sequence[str], *, startup_timeout: float = 60.0, keep_lines: int = 500) -> None:
        params = command(argv)
        self.argv = [params.command, *params.args]
        self.startup_timeout = startup_timeout
        self.log: collections.deque[str] = collections.deque(maxlen=keep_lines)
        self._url: str | None = None
        self._ready = threading.Event()
        self._proc: subprocess.Popen[str] | None = None
        self._drain: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError("the server has not started")
        return self._url

    @property
    def process(self) -> subprocess.Popen[str]:
        if self._proc is None:
            raise RuntimeError("the server has not started")
        return self._proc

    @property
    def pid(self) -> int:
        return self.process.pid

    def __enter__(self) -> Self:
        return self.start()

    def start(self) -> Self:
        """Launch and wait for the banner (also what `with` does); pair with `stop()`."""
        self._proc = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        assert self._proc.stderr is not None
        self._drain = threading.Thread(target=self._read, args=(self._proc.stderr,), daemon=True)
        self._drain.start()
        if not self._ready.wait(self.startup_timeout) or self._url is None:
            self.stop()
            raise RuntimeError(f"{' '.join(self.argv)} did not start:\n" + "".join(self.log))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.log.append(line)
            if self._url is None and _BANNER in line:
                self._url = line.split(" on ", 1)[1].strip()
                self._ready.set()
        self._ready.set()  # the process ended (before or after starting): wake the waiter

    def kill(self) -> None:
        """SIGKILL, as a crash would (no shutdown handlers run)."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        proc = self._proc
        if proc is None:
            return
        terminate(proc)
        if self._drain is not None:
            self._drain.join(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


def terminate(proc: subprocess.Popen[Any], timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `timeout` seconds; reaped either way."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
