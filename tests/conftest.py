"""Shared fixtures: every door to an environment, and a real HTTP server on a free loopback port."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest
from mcp import StdioServerParameters
from mcp.client.stdio import get_default_environment

import mcpgym
from mcpgym import testing
from mcpgym.servers.echo import Echo
from mcpgym.testing import DOORS, serve_app, serve_gym

__all__ = ["DOORS", "door", "serve_app", "serve_gym"]

pytest_plugins = ["mcpgym.testing.plugin"]  # the kit authors use; our tests use it too


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def door(kind: str, env: type[mcpgym.Environment] = Echo) -> contextlib.AbstractAsyncContextManager[mcpgym.Target]:
    """The same environment behind each door (Echo unless told): mcpgym.testing.door."""
    return testing.door(kind, env)


def stdio_command(*args: str) -> StdioServerParameters:
    """This interpreter running `args`, importing mcpgym and the servers from this checkout (the
    SDK passes a child only a few environment variables, so say where they are)."""
    source = str(Path(mcpgym.__file__).resolve().parent.parent)
    root = str(Path(__file__).resolve().parent.parent)
    env = {**get_default_environment(), "PYTHONPATH": os.pathsep.join([source, root])}
    return StdioServerParameters(command=sys.executable, args=list(args), env=env)


@contextlib.asynccontextmanager
async def module_over_http(module: str) -> AsyncIterator[str]:
    """`python -m MODULE --http` from this checkout on a free loopback port, always stopped on
    exit: `--port 0` and the banner the server prints once its socket listens (no port to guess,
    no polling)."""
    server = mcpgym.ServerProcess([sys.executable, "-m", module, "--http", "--host", "127.0.0.1", "--port", "0"])
    await anyio.to_thread.run_sync(server.start)
    try:
        yield server.url
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(server.stop)


def stdio(target: str, *flags: str) -> StdioServerParameters:
    """`mcpgym serve TARGET FLAGS` over stdio, importing the code under test (see `stdio_command`)."""
    return stdio_command("-m", "mcpgym", "serve", target, *flags)


@pytest.fixture
def repo_root() -> Iterator[str]:
    import pathlib

    yield str(pathlib.Path(__file__).resolve().parent.parent)


@pytest.fixture
def own_locks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A lock directory of a test's own (inherited by its subprocesses): what it counts is
    its own, whatever other coding servers on the machine hold or release meanwhile."""
    from collections import deque

    from mcpgym._isolation import uids as _uids

    directory = tmp_path / "uid-locks"
    monkeypatch.setenv(_uids.LOCK_DIRECTORY_VARIABLE, str(directory))
    monkeypatch.setattr(_uids, "_RESERVE", deque())  # claimed under the host's directory: not these
    return directory
